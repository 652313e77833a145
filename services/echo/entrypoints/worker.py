"""`echoctl worker`: a worker on the configured store until SIGTERM or SIGINT, then a graceful stop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

import prometheus_client
import structlog

from echo.adapters.store import bootstrap, pool
from echo.capabilities import backends as capability_backends
from echo.capabilities import handlers
from echo.config.settings import Settings
from echo.domain import kinds
from echo.queue import registry, worker

__all__ = ["builtin_handlers", "run_worker"]

log = structlog.get_logger("echo.worker")

RegistryFactory = Callable[[Settings, pool.Store], registry.Registry]


def builtin_handlers(settings: Settings, store: pool.Store) -> registry.Registry:
    """Every capability's handlers over ``store``'s repositories (the store port's, ``on_store``)."""
    return handlers.builtin_registry(settings, capability_backends.on_store(store))


async def run_worker(
    settings: Settings,
    *,
    concurrency: int,
    build_registry: RegistryFactory = builtin_handlers,
    worker_id: str | None = None,
) -> None:
    """Open the store (migrating it), run a worker, stop it on the first SIGTERM/SIGINT.

    Serves /metrics on `settings.worker_metrics_port` (0 = none). Running jobs get
    `settings.job_grace_seconds` to finish; the others are released. Raises what stopped the worker
    if it was not a signal (a permanent store error). With no handler registered it idles (logged).
    """
    async with bootstrap.open_store(settings, application_name="echo-worker") as store:
        handlers = build_registry(settings, store)
        if not len(handlers):
            # The distiller Deployment runs before any job kind has a handler (this version): it
            # idles, exports the queue depths and stops cleanly, instead of crash-looping.
            log.warning(
                "worker_idle",
                reason=f"no job handler is registered in this version ({', '.join(kinds.POLICIES)})",
            )
        if settings.worker_metrics_port:
            prometheus_client.start_http_server(settings.worker_metrics_port, addr=settings.host)
        runner = worker.Worker.from_settings(
            store, handlers, settings, concurrency=concurrency, worker_id=worker_id
        )
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        for signum in signals:
            loop.add_signal_handler(signum, runner.interrupt)
        try:
            await runner.start()
            await runner.wait()  # until a signal stops the claiming; raises what ended it otherwise
        finally:
            await runner.stop()
            for signum in signals:
                loop.remove_signal_handler(signum)
