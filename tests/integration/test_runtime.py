"""The hooks' backends as /readyz sees them: store, embedder and vectors, on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from echo.config.settings import Settings
from echo.embeddings import base as embeddings_base
from echo.embeddings.fake import FakeEmbedder
from echo.runtime import Runtime
from echo.store import pool, testing


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[pool.Store]:
    async with testing.temporary_store(dsn) as opened:
        yield opened


async def test_ready_once_the_embedder_has_warmed_up(store: pool.Store, tmp_path: Path) -> None:
    runtime = Runtime(store=store, embedder=FakeEmbedder(dimension=8))
    checks = await runtime.readiness()
    assert checks["store"] == {"ok": True}
    assert checks["embedder"] == {"ok": False, "error": "embedder still loading"}
    await runtime.warm_up(Settings(data_dir=tmp_path, tenant="rt"))
    checks = await runtime.readiness()
    assert all(check["ok"] for check in checks.values()), checks
    assert checks["embedder"]["dimension"] == 8
    assert runtime.vectors is not None
    await runtime.vectors.aclose()


async def test_a_dimension_other_than_the_expected_one_is_reported(store: pool.Store, tmp_path: Path) -> None:
    runtime = Runtime(store=store, embedder=FakeEmbedder(dimension=8))
    await runtime.warm_up(Settings(data_dir=tmp_path, embedding_dimension=1024))
    checks = await runtime.readiness()
    assert checks["embedder"]["ok"] is False
    assert "8-d vectors but ECHO_EMBEDDING_DIMENSION is 1024" in checks["embedder"]["error"]


async def test_a_failing_embedder_is_reported(store: pool.Store, tmp_path: Path) -> None:
    embedder = FakeEmbedder(dimension=8)
    embedder.failure = embeddings_base.EmbeddingError("model directory missing")
    runtime = Runtime(store=store, embedder=embedder)
    await runtime.warm_up(Settings(data_dir=tmp_path))
    assert "model directory missing" in (await runtime.readiness())["embedder"]["error"]


async def test_a_lost_store_is_reported(dsn: str) -> None:
    async with testing.temporary_store(dsn) as store:
        runtime = Runtime(store=store, embedder=FakeEmbedder(dimension=8))
    checks = await runtime.readiness()  # the pool is closed now
    assert checks["store"]["ok"] is False
