"""The hook service's connections to the outside: store, embedder, vectors and, embedded, a worker.

`open_runtime` is what `echoctl serve` runs the app with. Embedded (no `ECHO_DATABASE_URL`) it
starts PostgreSQL under the data dir and an in-process job worker running the same job code as
the distiller. The embedder loads in the background (a model load takes seconds): `/readyz`
answers 503 until it is ready, then the tenant's vector store is opened with its dimension.

Background tasks (the warm-up, the worker's) run under a `supervision.Supervisor`: a warm-up that
raises anything leaves the service unready with the error, and shutdown stops every part whatever
happened to the others.

What a newcomer is told: with `ECHO_DATABASE_URL` set and no in-process worker, no job (summaries,
memory distillation, big files) runs in this process; that is logged at start (`jobs_not_run_here`,
with the fix), shown by /readyz (`checks.jobs`: `in_process`, `pending`, `note`) and repeated in the
ready line. Once the store, the embedder and the vectors answer, `ready` is logged once with the URL
to give Open WebUI (`ready_message`), and printed as a plain line on a terminal's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import structlog
import tenacity

from echo import errors
from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.store import bootstrap, pool
from echo.adapters.vectors import factory as vectors_factory
from echo.capabilities import backends as capability_backends
from echo.capabilities import handlers as capability_handlers
from echo.capabilities.memory import backends as memory_backends
from echo.config.settings import Settings
from echo.domain import jobs as domain
from echo.errors import EchoError
from echo.ports import backends as backends_port
from echo.ports import embeddings as embeddings_base
from echo.ports import vectors as vectors_base
from echo.queue import queue, worker
from echo.support import supervision

__all__ = ["Runtime", "announce_ready", "no_worker_note", "open_runtime", "ready_message", "service_url"]

log = structlog.get_logger("echo.runtime")

CHECK_SECONDS = 2.0
WARM_UP = "warm-up"  # the supervised task's name, in logs, metrics and /readyz
WARM_UP_MAX_WAIT_S = 30.0  # longest pause between two tries of an embedder that does not answer yet


@dataclass
class Runtime:
    """What the hooks reach beyond their own process; `readiness` reports on each part."""

    store: pool.Store
    embedder: embeddings_base.Embedder
    vectors: vectors_base.VectorStore | None = None
    worker: worker.Worker | None = None
    warm_up_error: str | None = None
    supervisor: supervision.Supervisor = field(default_factory=supervision.Supervisor, repr=False)
    jobs_note: str | None = None  # why no job runs in this process (None: a worker runs here)
    announced: bool = field(default=False, repr=False)  # `ready` was logged
    _backends: backends_port.Backends | None = field(default=None, init=False, repr=False)

    def backends(self) -> backends_port.Backends:
        """What the filters, routes and embedded handlers reach through this runtime
        (`echo.ports.backends`): the store's repositories and job queue, and the embedder and vectors
        (`RuntimeBackends`: None until the warm-up opened them). One value for the runtime's life:
        its index reads the runtime's parts on every call."""
        if self._backends is None:
            self._backends = backends_port.Backends(
                store=capability_backends.on_store(self.store), index=memory_backends.RuntimeBackends(self)
            )
        return self._backends

    def start_warm_up(self, settings: Settings) -> supervision.Supervised:
        """Warm up in the background; anything it raises beyond an EchoError makes it a failed task."""
        return self.supervisor.run(WARM_UP, self.warm_up(settings))

    async def warm_up(self, settings: Settings) -> None:
        """Load the embedder, learn its dimension, open the vector store with it.

        An embedder that cannot answer yet (an embedding pod still loading its model, a network
        hiccup, a store error: any error whose `retryable` is set) is asked again with backoff, up to
        every `WARM_UP_MAX_WAIT_S`, until it answers, so a replica started before its embedder becomes
        ready by itself; the error meanwhile is in `warm_up_error` (and /readyz). A permanent EchoError
        (a model that will not load, a dimension mismatch) stops there; anything else (a
        PermissionError on the Qdrant directory) is raised for the supervisor to log, count and
        report. A vector store that does not answer yet is opened anyway: /readyz checks it on every
        probe.
        """
        try:
            dimension = await self._probe()
        except EchoError as error:  # not retryable: asking again cannot help
            self.warm_up_error = str(error)
            log.error("warm_up_failed", error=str(error), retry_in_s=None)
            return
        try:
            expected = settings.embedding_dimension
            if expected is not None and expected != dimension:
                raise embeddings_base.EmbeddingError(
                    f"the embedder serves {dimension}-d vectors but ECHO_EMBEDDING_DIMENSION is {expected}",
                    retryable=False,
                )
            self.vectors = vectors_factory.vector_store_from_settings(settings, dimension=dimension)
            self.warm_up_error = None
            await self.vectors.check()
            log.info("embedder_ready", model=self.embedder.model_name, dimension=dimension)
        except EchoError as error:
            self.warm_up_error = str(error)
            log.error("warm_up_failed", error=str(error))
            return
        if not self.announced:  # the store opened before the warm-up began: everything answers now
            self.announced = True
            settle_heap()
            announce_ready(settings, in_process=self.worker is not None)

    async def _probe(self) -> int:
        """The embedder's dimension, asked again (tenacity, never giving up) while it fails with a
        retryable error: after 1 s, 2 s, 4 s … then every `WARM_UP_MAX_WAIT_S`, or the error's
        `retry_after_s` when longer, within that cap."""
        cap = WARM_UP_MAX_WAIT_S
        backoff = tenacity.wait_exponential(multiplier=1.0, max=cap)

        def wait(state: tenacity.RetryCallState) -> float:
            asked = errors.retry_after(state.outcome.exception() if state.outcome else None)
            return min(max(backoff(state), asked or 0.0), cap)

        def failed(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            self.warm_up_error = str(error)
            log.error("warm_up_failed", error=str(error), retry_in_s=state.upcoming_sleep)

        asking = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(errors.is_retryable),
            wait=wait,
            stop=tenacity.stop_never,
            before_sleep=failed,
            reraise=True,
        )
        dimension: int = await asking(self.embedder.probe)
        return dimension

    async def readiness(self) -> dict[str, dict[str, Any]]:
        checks: dict[str, dict[str, Any]] = {}
        try:
            async with asyncio.timeout(CHECK_SECONDS):
                await self.store.fetchval("SELECT 1")
            checks["store"] = {"ok": True}
        except (EchoError, TimeoutError) as error:
            checks["store"] = {"ok": False, "error": str(error) or "timed out"}
        checks["jobs"] = await self._jobs_check(store_ok=checks["store"]["ok"])
        if self.vectors is None:
            crashed = self.supervisor.failure(WARM_UP)
            reason = self.warm_up_error or (f"warm-up failed: {crashed}" if crashed else None)
            reason = reason or "embedder still loading"
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

    async def _jobs_check(self, *, store_ok: bool) -> dict[str, Any]:
        """Who runs the jobs, and how many wait to run now; always ok (the distiller may run elsewhere)."""
        check: dict[str, Any] = {"ok": True, "in_process": self.worker is not None}
        if store_ok:
            try:
                async with asyncio.timeout(CHECK_SECONDS):
                    depths = await queue.JobQueue(self.store).depths()
                check["pending"] = sum(d.ready for d in depths if d.state is domain.JobState.PENDING)
            except (EchoError, TimeoutError):
                pass  # the store check says what is wrong
        if self.worker is None:
            check["note"] = self.jobs_note or NO_WORKER
        return check

    async def close_vectors(self) -> None:
        if self.vectors is not None:
            await self.vectors.aclose()


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings, supervisor: supervision.Supervisor | None = None
) -> AsyncIterator[Runtime]:
    """Store, embedder (warming up in the background), vectors and, when asked, a worker.

    Every part is closed on exit even when another part failed (the exit stack runs them all).
    """
    async with (
        bootstrap.open_store(settings, application_name="echo-hooks") as store,
        contextlib.AsyncExitStack() as parts,
    ):
        runtime = Runtime(
            store=store,
            embedder=embeddings_factory.embedder_from_settings(settings),
            supervisor=supervisor or supervision.Supervisor(),
        )
        parts.push_async_callback(runtime.embedder.aclose)
        parts.push_async_callback(runtime.close_vectors)
        in_process = (
            settings.inprocess_worker if settings.inprocess_worker is not None else not settings.database_url
        )
        if not in_process:
            runtime.jobs_note = no_worker_note(settings)
            # ECHO_INPROCESS_WORKER=false is a deployment's choice (the operator's hooks); unset is a slip
            report = log.info if settings.inprocess_worker is False else log.warning
            report(
                "jobs_not_run_here",
                reason=runtime.jobs_note.split(":", 1)[0],
                effect="summaries, memory distillation and big files wait in the queue",
                fix=WORKER_FIX,
            )
        if in_process:
            handlers = capability_handlers.builtin_registry(
                settings, capability_backends.on_store(store), index=runtime.backends().index
            )
            for spec in handlers:  # handlers that hold a connection (an LLM client) close after the worker
                close = getattr(spec.handler, "aclose", None)
                if close is not None:
                    parts.push_async_callback(close)
            runtime.worker = worker.Worker.from_settings(
                store,
                handlers,
                settings,
                concurrency=settings.inprocess_worker_concurrency,
                supervisor=runtime.supervisor,
            )
            parts.push_async_callback(runtime.worker.stop)
        warm_up = runtime.start_warm_up(settings)
        parts.push_async_callback(_cancel, warm_up)
        if runtime.worker is not None:
            await runtime.worker.start()
            log.info("inprocess_worker_started", kinds=sorted(runtime.worker.registry.kinds))
        yield runtime


async def _cancel(task: supervision.Supervised) -> None:
    task.cancel()
    await asyncio.wait([task.task])


NO_WORKER = "no job worker runs in this process"
WORKER_FIX = "run `echoctl worker` (the distiller) on the same database, or set ECHO_INPROCESS_WORKER=true"
OPENWEBUI_FUNCTION = "integrations/openwebui/echo_filter_function.py"


def no_worker_note(settings: Settings) -> str:
    """Why no job runs in this process, and the two ways to have them run."""
    why = (
        "ECHO_INPROCESS_WORKER=false"
        if settings.inprocess_worker is False
        else "ECHO_DATABASE_URL is set and ECHO_INPROCESS_WORKER is unset"
    )
    return (
        f"{why}: no job (summaries, memory distillation, big files) runs in this process; they wait "
        "in the queue until `echoctl worker` runs on the same database, or set ECHO_INPROCESS_WORKER=true"
    )


def service_url(settings: Settings) -> str:
    """The URL of this service as Open WebUI would reach it (a wildcard bind names no address)."""
    host = settings.host.strip()
    if host in ("", "0.0.0.0", "::", "[::]"):
        shown = "<this machine's address>"
    elif ":" in host and not host.startswith("["):
        shown = f"[{host}]"
    else:
        shown = host
    return f"http://{shown}:{settings.port}"


def _loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def ready_message(settings: Settings, *, in_process: bool) -> str:
    """The line that tells a human the service is ready and how to connect Open WebUI to it."""
    url = service_url(settings)
    key = "the value of ECHO_API_KEY" if settings.api_key is not None else "any non-empty value (auth is off)"
    parts = [
        f"ECHO ready — point Open WebUI at {url}: Admin Panel → Settings → Connections → OpenAI API → +, "
        f"URL {url}, key: {key}; or paste the Function {OPENWEBUI_FUNCTION} and set its ECHO_URL to {url}."
    ]
    if _loopback(settings.host):
        wider = "ECHO_HOST=0.0.0.0" if settings.api_key is not None else "ECHO_API_KEY and ECHO_HOST=0.0.0.0"
        parts.append(
            "Bound to loopback only: reachable from this machine, not from a container or another host "
            f"(to listen on every interface, set {wider})."
        )
    if not in_process:
        parts.append(
            "Note: no job runs in this process (summaries, memory distillation): run `echoctl worker` on the "
            "same database, or set ECHO_INPROCESS_WORKER=true."
        )
    return " ".join(parts)


def settle_heap() -> None:
    """Move what start-up built (the model, the libraries: some 700k objects) out of the collector's
    reach. A full collection walked all of it, 150–460 ms holding the GIL on whichever thread ran it,
    in the middle of requests (bench/hostile.py); frozen objects are never scanned again."""
    gc.collect()
    gc.freeze()


def announce_ready(settings: Settings, *, in_process: bool) -> None:
    """Log `ready` (once per start: the caller sees to it) and, on a terminal, print it plainly."""
    message = ready_message(settings, in_process=in_process)
    log.info("ready", url=service_url(settings), message=message)
    stream = sys.stderr
    if stream is not None and stream.isatty():
        print(f"\n{message}\n", file=stream, flush=True)
