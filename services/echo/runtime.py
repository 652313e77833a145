"""The hook service's connections to the outside: store, embedder, vectors and, embedded, a worker.

`open_runtime` is what `echoctl serve` runs the app with. Embedded (no `ECHO_DATABASE_URL`) it
starts PostgreSQL under the data dir and an in-process job worker running the same job code as
the distiller. The embedder loads in the background (a model load takes seconds): `/readyz`
answers 503 until it is ready, then the tenant's vector store is opened with its dimension.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import structlog

from echo.config.settings import Settings
from echo.embeddings import base as embeddings_base
from echo.embeddings import factory as embeddings_factory
from echo.errors import EchoError
from echo.jobs import kinds, worker
from echo.store import bootstrap, pool
from echo.vectors import base as vectors_base
from echo.vectors import factory as vectors_factory

__all__ = ["Runtime", "open_runtime"]

log = structlog.get_logger("echo.runtime")

CHECK_SECONDS = 2.0


@dataclass
class Runtime:
    """What the hooks reach beyond their own process; `readiness` reports on each part."""

    store: pool.Store
    embedder: embeddings_base.Embedder
    vectors: vectors_base.VectorStore | None = None
    worker: worker.Worker | None = None
    warm_up_error: str | None = None
    _warm_up: asyncio.Task[None] | None = field(default=None, repr=False)

    async def warm_up(self, settings: Settings) -> None:
        """Load the embedder, learn its dimension, open the vector store with it."""
        try:
            dimension = await self.embedder.probe()
            expected = settings.embedding_dimension
            if expected is not None and expected != dimension:
                raise embeddings_base.EmbeddingError(
                    f"the embedder serves {dimension}-d vectors but ECHO_EMBEDDING_DIMENSION is {expected}",
                    retryable=False,
                )
            self.vectors = vectors_factory.vector_store_from_settings(settings, dimension=dimension)
            await self.vectors.check()
            log.info("embedder_ready", model=self.embedder.model_name, dimension=dimension)
        except EchoError as error:
            self.warm_up_error = str(error)
            log.error("warm_up_failed", error=str(error))

    async def readiness(self) -> dict[str, dict[str, Any]]:
        checks: dict[str, dict[str, Any]] = {}
        try:
            async with asyncio.timeout(CHECK_SECONDS):
                await self.store.fetchval("SELECT 1")
            checks["store"] = {"ok": True}
        except (EchoError, TimeoutError) as error:
            checks["store"] = {"ok": False, "error": str(error) or "timed out"}
        if self.vectors is None:
            reason = self.warm_up_error or "embedder still loading"
            checks["embedder"] = {"ok": False, "error": reason}
            checks["vectors"] = {"ok": False, "error": reason}
            return checks
        checks["embedder"] = {
            "ok": True,
            "model": self.embedder.model_name,
            "dimension": self.embedder.dimension,
        }
        try:
            async with asyncio.timeout(CHECK_SECONDS):
                await self.vectors.check()
            checks["vectors"] = {"ok": True}
        except (EchoError, TimeoutError) as error:
            checks["vectors"] = {"ok": False, "error": str(error) or "timed out"}
        return checks


@contextlib.asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    async with bootstrap.open_store(settings, application_name="echo-hooks") as store:
        runtime = Runtime(store=store, embedder=embeddings_factory.embedder_from_settings(settings))
        runtime._warm_up = asyncio.create_task(runtime.warm_up(settings), name="echo-warm-up")
        in_process = (
            settings.inprocess_worker if settings.inprocess_worker is not None else not settings.database_url
        )
        handlers = kinds.builtin_registry(settings, store)
        if in_process:
            runtime.worker = worker.Worker(
                store,
                handlers,
                concurrency=settings.inprocess_worker_concurrency,
                lease_seconds=settings.job_lease_seconds,
                poll_seconds=settings.job_poll_seconds,
                grace_seconds=settings.job_grace_seconds,
                metrics_seconds=settings.job_metrics_seconds,
            )
            await runtime.worker.start()
            log.info("inprocess_worker_started", kinds=sorted(handlers.kinds))
        try:
            yield runtime
        finally:
            runtime._warm_up.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runtime._warm_up
            if runtime.worker is not None:
                await runtime.worker.stop()
            if runtime.vectors is not None:
                await runtime.vectors.aclose()
            await runtime.embedder.aclose()
