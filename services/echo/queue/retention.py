"""Retention of finished jobs: done rows older than `done_seconds` and dead rows older than
`dead_seconds` are deleted, in batches, by one worker at a time.

Every worker runs `sweep` every `interval_seconds`; a session advisory lock per tenant schema lets
one of them work while the others skip, and each batch is its own short statement (rows picked in
`finished_at` order from a partial index, `FOR UPDATE SKIP LOCKED`), so a sweep never holds many
locks nor blocks the queue. A deleted done job frees its idempotency key: enqueueing the same key
afterwards runs the job again, which idempotent handlers (DESIGN §4) make harmless.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from echo.adapters.store import pool, queries
from echo.domain import jobs as domain
from echo.support import metrics

if TYPE_CHECKING:
    from echo.config.settings import Settings

__all__ = ["RetentionPolicy", "Swept", "sweep"]

log = structlog.get_logger("echo.jobs")

DAY_SECONDS = 86400.0


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.queue", "queries.sql")


@dataclass(frozen=True)
class RetentionPolicy:
    """How long finished jobs are kept (s), how often workers sweep (s), rows per delete."""

    done_seconds: float = 7 * DAY_SECONDS
    dead_seconds: float = 30 * DAY_SECONDS
    interval_seconds: float = 600.0
    batch_size: int = 1000

    def __post_init__(self) -> None:
        if min(self.done_seconds, self.dead_seconds, self.interval_seconds) <= 0:
            raise ValueError("done_seconds, dead_seconds and interval_seconds must be positive")
        if self.batch_size < 1:
            raise ValueError("batch_size is at least 1")

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionPolicy:
        return cls(
            done_seconds=settings.job_done_retention_seconds,
            dead_seconds=settings.job_dead_retention_seconds,
            interval_seconds=settings.job_sweep_seconds,
        )


@dataclass(frozen=True)
class Swept:
    """Rows deleted by one sweep; `ran` is False when another worker was sweeping."""

    done: int
    dead: int
    ran: bool


async def sweep(store: pool.Store, policy: RetentionPolicy) -> Swept:
    """Delete the done and dead jobs past their retention, batch by batch, unless another sweeps."""
    sql = _sql()
    async with store.connection() as connection:
        connection.keep_session_state()
        if not await connection.fetchval(sql["try_sweep_lock"], store.schema):
            return Swept(0, 0, ran=False)
        try:
            done = await _delete(connection, sql["sweep_done"], policy.done_seconds, policy.batch_size)
            dead = await _delete(connection, sql["sweep_dead"], policy.dead_seconds, policy.batch_size)
        finally:
            await connection.fetchval(sql["sweep_unlock"], store.schema)
    metrics.JOBS_SWEPT.labels(domain.JobState.DONE.value).inc(done)
    metrics.JOBS_SWEPT.labels(domain.JobState.DEAD.value).inc(dead)
    if done or dead:
        log.info("jobs_swept", done=done, dead=dead)
    return Swept(done, dead, ran=True)


async def _delete(connection: pool.Connection, query: queries.Query, older_than: float, batch: int) -> int:
    total = 0
    while True:
        deleted = int(await connection.fetchval(query, float(older_than), batch))
        total += deleted
        if deleted < batch:
            return total
