"""``LocalEmbedder`` specifics and ``embedder_from_settings`` (the shared contract is in tests/contract)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from echo.adapters.embeddings import (
    PACKAGED_MODEL_NAME,
    EmbeddingError,
    HttpEmbedder,
    LocalEmbedder,
    embedder_from_settings,
    packaged_model_path,
)
from echo.config.settings import Settings
from echo.errors import ConfigError


async def test_the_model_is_loaded_once_per_process_and_offline() -> None:
    first, second = LocalEmbedder(packaged_model_path()), LocalEmbedder(packaged_model_path())
    assert await first.probe() == await second.probe() == 384
    assert first._model is second._model
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    before = (
        REGISTRY.get_sample_value("echo_embedding_texts_total", {"backend": "local", "model": "model"}) or 0
    )
    await first.embed(["a", "b", "c"])
    after = REGISTRY.get_sample_value("echo_embedding_texts_total", {"backend": "local", "model": "model"})
    assert after == before + 3


async def test_a_missing_model_directory_is_a_clear_error(tmp_path: Path) -> None:
    embedder = LocalEmbedder(tmp_path / "nowhere")
    with pytest.raises(
        EmbeddingError, match=r"no sentence-transformers model in directory .*nowhere"
    ) as caught:
        await embedder.embed(["a"])
    assert not caught.value.retryable
    with pytest.raises(EmbeddingError, match="not known yet"):
        _ = embedder.dimension


async def test_a_broken_model_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(EmbeddingError, match="cannot load the model in"):
        await LocalEmbedder(tmp_path).probe()


def test_factory_defaults_to_the_packaged_model(tmp_path: Path) -> None:
    embedder = embedder_from_settings(Settings(data_dir=tmp_path, embedding_batch_size=8))
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.model_path == packaged_model_path()
    assert embedder.model_name == PACKAGED_MODEL_NAME


def test_factory_takes_a_model_directory(tmp_path: Path) -> None:
    embedder = embedder_from_settings(Settings(embedding_model_path=tmp_path))
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.model_path == tmp_path
    with pytest.raises(ConfigError, match="ECHO_EMBEDDING_MODEL_PATH"):
        embedder_from_settings(Settings(embedding_model_path=tmp_path / "missing"))


async def test_factory_builds_the_http_client_from_settings() -> None:
    settings = Settings(
        embedding_url="http://infinity:7997",
        embedding_model="BAAI/bge-m3",
        embedding_api_key="secret",
        embedding_timeout_seconds=3,
    )
    embedder = embedder_from_settings(settings)
    assert isinstance(embedder, HttpEmbedder)
    assert (embedder.url, embedder.model_name) == ("http://infinity:7997/embeddings", "BAAI/bge-m3")
    await embedder.aclose()
