"""The job queue on the store: enqueue (idempotent, inside the caller's transaction if given),
claim with `FOR UPDATE SKIP LOCKED` and a lease, renew, finish, release, count.

Workers use the claim/finish side (`worker.Worker`); everything else only enqueues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from echo.adapters.store import pool, queries
from echo.domain import jobs as domain
from echo.support import metrics

__all__ = ["Claimed", "Depth", "JobInfo", "JobQueue", "channel_for"]


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.queue", "queries.sql")


def channel_for(schema: str) -> str:
    """The NOTIFY channel of a tenant's queue (the trigger of migration 0002 builds the same name)."""
    return f"echo_jobs_{schema}"


def current_traceparent() -> str | None:
    """The W3C traceparent of the current OpenTelemetry span, if one is recording."""
    try:
        from opentelemetry import propagate
    except ImportError:  # pragma: no cover - opentelemetry is part of the services extra
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


@dataclass(frozen=True)
class Claimed:
    """A job leased to a worker; `redelivered` when it was taken from a worker whose lease expired."""

    job: domain.Job
    redelivered: bool
    previous_worker: str | None


@dataclass(frozen=True)
class JobInfo:
    """Everything stored about one job (for tests, tools and operators)."""

    id: int
    kind: str
    state: domain.JobState
    payload: Mapping[str, Any]
    idempotency_key: str | None
    traceparent: str | None
    attempts: int
    run_after: datetime
    leased_until: datetime | None
    worker_id: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class Depth:
    kind: str
    state: domain.JobState
    jobs: int
    ready: int


class JobQueue:
    """The queue of one tenant (the store's schema)."""

    def __init__(self, store: pool.Store) -> None:
        self.store = store
        self.channel = channel_for(store.schema)

    async def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        traceparent: str | None = None,
        delay_seconds: float = 0.0,
        connection: pool.Connection | None = None,
    ) -> int:
        """Add a job and return its id; with a known (kind, idempotency_key), the existing job's id.

        With `connection` (a transaction of the caller's), the job commits or rolls back with it and
        workers are notified at commit; without, it is committed when this returns. `traceparent`
        defaults to the current span's.
        """
        domain.validate_kind(kind)
        args = (
            kind,
            dict(payload or {}),
            idempotency_key,
            traceparent if traceparent is not None else current_traceparent(),
            float(delay_seconds),
        )
        if connection is not None:
            job_id, created = await self._enqueue(connection, args)
        else:
            async with self.store.connection() as own:
                job_id, created = await self._enqueue(own, args)
        metrics.JOBS_ENQUEUED.labels(kind, "created" if created else "existing").inc()
        return job_id

    async def _enqueue(self, connection: pool.Connection, args: tuple[Any, ...]) -> tuple[int, bool]:
        sql = _sql()
        job_id = await connection.fetchval(sql["enqueue"], *args)
        if job_id is not None:
            return int(job_id), True
        # The key exists: committed by someone else (ON CONFLICT waited for them) or earlier in this
        # transaction. Under READ COMMITTED this new statement sees it.
        existing = await connection.fetchval(sql["find_by_key"], args[0], args[2])
        if existing is None:  # pragma: no cover - only if the row was deleted in between
            raise RuntimeError(f"job {args[0]}/{args[2]} vanished during enqueue")
        return int(existing), False

    async def claim(self, worker_id: str, kinds: Sequence[str], lease_seconds: float) -> Claimed | None:
        """Lease the oldest ready job of `kinds` to `worker_id` (attempts + 1), or None."""
        if not kinds:
            return None
        row = await self.store.fetchrow(_sql()["claim"], worker_id, list(kinds), float(lease_seconds))
        if row is None:
            return None
        job = domain.Job(
            id=row["id"],
            kind=row["kind"],
            payload=row["payload"],
            attempts=row["attempts"],
            idempotency_key=row["idempotency_key"],
            traceparent=row["traceparent"],
            last_error=row["last_error"],
            created_at=row["created_at"],
        )
        return Claimed(job, row["previous_state"] == domain.JobState.RUNNING, row["previous_worker"])

    async def extend_leases(
        self, worker_id: str, jobs: Sequence[domain.Job], lease_seconds: float
    ) -> set[int]:
        """Renew the leases of `jobs`; return the ids still held (the others were taken over)."""
        if not jobs:
            return set()
        rows = await self.store.fetch(
            _sql()["extend_leases"],
            worker_id,
            [job.id for job in jobs],
            [job.attempts for job in jobs],
            float(lease_seconds),
        )
        return {row["id"] for row in rows}

    async def finish(self, worker_id: str, job: domain.Job, transition: domain.Transition) -> bool:
        """Store the outcome of an attempt; False when the lease was lost (nothing changed)."""
        sql = _sql()
        key = (job.id, worker_id, job.attempts)
        if transition.state is domain.JobState.DONE:
            row = await self.store.fetchval(sql["finish_done"], *key)
        elif transition.state is domain.JobState.DEAD:
            row = await self.store.fetchval(sql["finish_dead"], *key, transition.last_error)
        elif transition.refund_attempt:
            return bool(await self.release(worker_id, [job]))
        else:
            row = await self.store.fetchval(
                sql["finish_retry"], *key, transition.delay_seconds, transition.last_error
            )
        return row is not None

    async def release(self, worker_id: str, jobs: Sequence[domain.Job]) -> set[int]:
        """Hand running jobs back as pending without counting their attempt; return the ids released."""
        if not jobs:
            return set()
        rows = await self.store.fetch(
            _sql()["release"], worker_id, [job.id for job in jobs], [job.attempts for job in jobs]
        )
        return {row["id"] for row in rows}

    async def next_due(self, kinds: Sequence[str]) -> float | None:
        """Seconds until a job of `kinds` may be claimed (<= 0: now), None when there is none."""
        if not kinds:
            return None
        value = await self.store.fetchval(_sql()["next_due"], list(kinds))
        return None if value is None else float(value)

    async def depths(self) -> list[Depth]:
        rows = await self.store.fetch(_sql()["counts"])
        return [Depth(r["kind"], domain.JobState(r["state"]), r["jobs"], r["ready"]) for r in rows]

    async def get(self, job_id: int) -> JobInfo | None:
        row = await self.store.fetchrow(_sql()["get"], job_id)
        if row is None:
            return None
        values = dict(row)
        values["state"] = domain.JobState(values["state"])
        return JobInfo(**values)

    async def forget_user(self, user_id: str, *, connection: pool.Connection | None = None) -> int:
        """Delete every job whose payload names `user_id` (any state); how many were deleted."""
        status = await (connection or self.store).execute(_sql()["forget_user"], user_id)
        tail = status.rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    async def requeue_dead(self, job_id: int) -> bool:
        """Give a dead job a fresh set of attempts; False when it is not dead."""
        return await self.store.fetchval(_sql()["requeue_dead"], job_id) is not None
