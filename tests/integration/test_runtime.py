"""The hooks' backends as /readyz sees them: store, embedder and vectors, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.eventually import eventually, eventually_blocking
from fakes.live_server import LiveServer
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.store import pool, testing
from echo.adapters.store.errors import TransientStoreError
from echo.adapters.vectors import factory as vectors_factory
from echo.config import tenancy
from echo.config.settings import Settings
from echo.entrypoints import runtime
from echo.entrypoints.http import create_app
from echo.entrypoints.runtime import Runtime
from echo.ports import embeddings as embeddings_base
from echo.queue.queue import JobQueue
from echo.support import supervision


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


async def test_an_embedder_not_answering_yet_is_asked_again_until_it_does(
    store: pool.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica started before its embedding pod is ready becomes ready by itself, without a restart."""
    embedder = FakeEmbedder(dimension=8)
    embedder.failure = embeddings_base.EmbeddingError("connection refused", retryable=True)
    monkeypatch.setattr(runtime, "WARM_UP_MAX_WAIT_S", 0.05)
    rt = Runtime(store=store, embedder=embedder)
    warming = asyncio.create_task(rt.warm_up(Settings(data_dir=tmp_path, tenant="rt")))
    await asyncio.sleep(0.3)  # tries at 0, then every 0.05 s (the cap)
    assert not warming.done()
    assert "connection refused" in (await rt.readiness())["embedder"]["error"]
    embedder.failure = None  # the embedder is up
    await asyncio.wait_for(warming, 2)
    checks = await rt.readiness()
    assert all(check["ok"] for check in checks.values()), checks
    assert rt.vectors is not None
    await rt.vectors.aclose()


class _StoreDownEmbedder(FakeEmbedder):
    """An embedder whose first probes fail with a transient store error (`retryable`, not an
    EmbeddingError): warm-up once read another spelling of the flag and gave up on it."""

    def __init__(self, failures: int) -> None:
        super().__init__(dimension=8)
        self.failures = failures
        self.probes = 0

    async def probe(self) -> int:
        self.probes += 1
        if self.probes <= self.failures:
            raise TransientStoreError("connection refused", sqlstate="08001")
        return await super().probe()


async def test_a_retryable_store_error_at_warm_up_is_retried_not_taken_as_permanent(
    store: pool.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "WARM_UP_MAX_WAIT_S", 0.01)
    embedder = _StoreDownEmbedder(failures=2)
    rt = Runtime(store=store, embedder=embedder)
    with capture_logs() as logs:
        await asyncio.wait_for(rt.warm_up(Settings(data_dir=tmp_path, tenant="rt")), 5)
    assert embedder.probes == 3
    failed = [e for e in logs if e["event"] == "warm_up_failed"]
    assert [(e["error"], e["retry_in_s"]) for e in failed] == [("connection refused", 0.01)] * 2
    checks = await rt.readiness()
    assert all(check["ok"] for check in checks.values()), checks
    assert rt.vectors is not None
    await rt.vectors.aclose()


async def test_a_permanent_error_at_warm_up_is_not_asked_again(store: pool.Store, tmp_path: Path) -> None:
    embedder = FakeEmbedder(dimension=8)
    embedder.failure = embeddings_base.EmbeddingError("model directory missing")
    calls = 0
    probe = embedder.probe

    async def counted() -> int:
        nonlocal calls
        calls += 1
        return await probe()

    embedder.probe = counted  # type: ignore[method-assign]
    rt = Runtime(store=store, embedder=embedder)
    with capture_logs() as logs:
        await rt.warm_up(Settings(data_dir=tmp_path))
    assert calls == 1
    assert [e.get("retry_in_s") for e in logs if e["event"] == "warm_up_failed"] == [None]
    assert rt.warm_up_error == "model directory missing"


async def test_a_lost_store_is_reported(dsn: str) -> None:
    async with testing.temporary_store(dsn) as store:
        runtime = Runtime(store=store, embedder=FakeEmbedder(dimension=8))
    checks = await runtime.readiness()  # the pool is closed now
    assert checks["store"]["ok"] is False


# -- background tasks: a warm-up that raises anything is reported, and shutdown still stops the worker


@pytest.fixture
def serve_settings(dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """`echoctl serve` on the test PostgreSQL with an in-process worker, a fake embedder, and a Qdrant
    directory the process may not write (PermissionError, as on a read-only root file system)."""
    tenant = testing.unique_tenant("rt")
    qdrant_path = tmp_path / "qdrant"

    def refuse(settings: Settings, *, dimension: int) -> None:
        raise PermissionError(13, "Permission denied", str(qdrant_path))

    monkeypatch.setattr(embeddings_factory, "embedder_from_settings", lambda _: FakeEmbedder(dimension=8))
    monkeypatch.setattr(vectors_factory, "vector_store_from_settings", refuse)
    yield Settings(
        data_dir=tmp_path, database_url=dsn, tenant=tenant, inprocess_worker=True, qdrant_path=qdrant_path
    )
    asyncio.run(testing.drop_schema(dsn, tenancy.schema_for(tenant)))


_real_vectors = vectors_factory.vector_store_from_settings


def _failures(task: str) -> float:
    return REGISTRY.get_sample_value("echo_background_task_failures_total", {"task": task}) or 0.0


async def test_a_warm_up_that_raises_is_reported_and_shutdown_still_stops_the_worker(
    serve_settings: Settings,
) -> None:
    before = _failures("warm-up")
    async with runtime.open_runtime(serve_settings) as opened:
        await eventually(lambda: opened.supervisor.failure("warm-up"), what="the warm-up to end")
        checks = await opened.readiness()
        worker = opened.worker
        assert worker is not None
        assert not worker.stopped
    denied = f"PermissionError: [Errno 13] Permission denied: '{serve_settings.qdrant_path}'"
    assert checks["embedder"] == {"ok": False, "error": f"warm-up failed: {denied}"}
    assert checks["vectors"]["ok"] is False
    assert checks["store"] == {"ok": True}
    assert _failures("warm-up") == before + 1
    assert worker.stopped  # the failed warm-up did not skip the worker's stop


def test_readyz_names_a_failed_warm_up_and_the_app_shuts_down_cleanly(serve_settings: Settings) -> None:
    supervisor = supervision.Supervisor()
    backends = functools.partial(runtime.open_runtime, supervisor=supervisor)
    app = create_app(serve_settings, backends=backends, supervisor=supervisor)
    with LiveServer(app) as server:
        eventually_blocking(lambda: supervisor.failure("warm-up"), what="the warm-up to end")
        answer = httpx.get(f"{server.url}/readyz")
    assert answer.status_code == 503
    checks = answer.json()["checks"]
    assert checks["background"]["ok"] is False
    assert checks["background"]["error"].startswith("warm-up failed: PermissionError: [Errno 13]")
    assert checks["background"]["tasks"]["warm-up"]["state"] == "failed"
    assert checks["background"]["tasks"]["worker-loop"]["state"] == "running"
    assert "PermissionError" in checks["embedder"]["error"]
    assert checks["store"] == {"ok": True}
    assert supervisor.readiness()["tasks"]["worker-loop"]["state"] == "done"  # ended by shutdown


# -- what a newcomer is told: where to point Open WebUI once ready, and who runs the jobs ----------


@pytest.fixture
def external_db_settings(dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """`echoctl serve` on the test PostgreSQL (ECHO_DATABASE_URL set, ECHO_INPROCESS_WORKER unset)."""
    tenant = testing.unique_tenant("rt")
    monkeypatch.setattr(embeddings_factory, "embedder_from_settings", lambda _: FakeEmbedder(dimension=8))
    yield Settings(data_dir=tmp_path, database_url=dsn, tenant=tenant, host="0.0.0.0", port=9123)
    asyncio.run(testing.drop_schema(dsn, tenancy.schema_for(tenant)))


async def _ready(opened: Runtime) -> dict[str, dict[str, Any]]:
    async def vectors_ready() -> dict[str, dict[str, Any]] | None:
        checks = await opened.readiness()
        return checks if checks["vectors"]["ok"] else None

    checks = await eventually(vectors_ready, what="the vector store ready")
    return checks


async def test_an_explicit_no_worker_is_said_as_information(external_db_settings: Settings) -> None:
    settings = external_db_settings.model_copy(update={"inprocess_worker": False})
    with capture_logs() as logs:
        async with runtime.open_runtime(settings) as opened:
            assert opened.worker is None
            await opened.close_vectors()
    said = [entry for entry in logs if entry["event"] == "jobs_not_run_here"]
    assert [entry["log_level"] for entry in said] == ["info"]
    assert "ECHO_INPROCESS_WORKER=false" in said[0]["reason"]


async def test_with_a_database_url_and_no_worker_setting_no_job_runs_here_and_it_is_said(
    external_db_settings: Settings,
) -> None:
    with capture_logs() as logs:
        async with runtime.open_runtime(external_db_settings) as opened:
            assert opened.worker is None
            checks = await _ready(opened)
            await JobQueue(opened.store).enqueue("summary", {"chat_id": "c1"}, idempotency_key="waiting")
            jobs = (await opened.readiness())["jobs"]
            await opened.close_vectors()
    said = [entry for entry in logs if entry["event"] == "jobs_not_run_here"]
    assert len(said) == 1
    assert said[0]["log_level"] == "warning"
    assert "ECHO_INPROCESS_WORKER=true" in said[0]["fix"]
    assert "echoctl worker" in said[0]["fix"]
    assert checks["jobs"]["ok"] is True  # the distiller may run elsewhere: never unready for it
    assert jobs["in_process"] is False
    assert jobs["pending"] == 1
    assert "ECHO_INPROCESS_WORKER=true" in jobs["note"]
    [ready] = [entry for entry in logs if entry["event"] == "ready"]
    assert ready["url"] == "http://<this machine's address>:9123"
    assert "Connections" in ready["message"]
    assert "no job runs in this process" in ready["message"]


async def test_with_an_in_process_worker_readyz_says_so_and_ready_is_logged_once(
    serve_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors_factory, "vector_store_from_settings", _real_vectors)
    with capture_logs() as logs:
        async with runtime.open_runtime(serve_settings.model_copy(update={"port": 9124})) as opened:
            checks = await _ready(opened)
            await opened.readiness()
            await opened.close_vectors()
    assert checks["jobs"] == {"ok": True, "in_process": True, "pending": 0}
    assert not [entry for entry in logs if entry["event"] == "jobs_not_run_here"]
    [ready] = [entry for entry in logs if entry["event"] == "ready"]
    assert ready["url"] == "http://127.0.0.1:9124"
    assert "no job runs" not in ready["message"]
    # what start-up built is out of the collector's reach once ready: no full collection walks it mid-request
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
