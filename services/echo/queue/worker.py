"""The worker: claims jobs of the kinds it has room for, runs their handlers, stores the outcome.

One asyncio loop per worker: wake on NOTIFY (enqueue or release) or when a slot frees, else sleep
until the next job is due (a retry's `run_after`, a lease's expiry) or `poll_seconds` at most.
Leases are renewed every third of their length while handlers run; a job whose lease was taken
over is cancelled here, one that outlives its kind's timeout too (a failed attempt). `stop()` lets
running jobs finish for a grace period, then cancels them and releases their leases (pending again,
attempt not counted). Beside the claiming loop run the lease renewal, the queue-depth gauges and
the retention sweep; every task runs under a `supervision.Supervisor` (the helpers are restarted
when they raise, a failed claiming loop is reported and raised by `wait()`). Used by
`echoctl worker` and, in-process, by the embedded `serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from echo.adapters.store import errors as store_errors
from echo.adapters.store import pool
from echo.domain import jobs as domain
from echo.errors import EchoError
from echo.queue import depths, execution, queue, registry, retention
from echo.support import metrics, supervision

if TYPE_CHECKING:
    from echo.config.settings import Settings

__all__ = ["Worker"]

log = structlog.get_logger("echo.jobs")


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass
class _Slot:
    job: domain.Job
    task: asyncio.Task[None] | None = None
    lost: bool = False
    started: float = field(default_factory=time.monotonic)


class Worker:
    """Runs the handlers of `registry` on the jobs of `store`'s tenant; `start()`, then `stop()`."""

    def __init__(
        self,
        store: pool.Store,
        handlers: registry.Registry,
        *,
        worker_id: str | None = None,
        concurrency: int = 4,
        lease_seconds: float = 30.0,
        poll_seconds: float = 5.0,
        grace_seconds: float = 20.0,
        metrics_seconds: float = 15.0,
        retention_policy: retention.RetentionPolicy | None = None,
        supervisor: supervision.Supervisor | None = None,
        listen: bool = True,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if concurrency < 1 or lease_seconds <= 0 or poll_seconds <= 0 or grace_seconds < 0:
            raise ValueError("need concurrency >= 1, lease_seconds > 0, poll_seconds > 0, grace_seconds >= 0")
        self.queue = queue.JobQueue(store)
        self.registry = handlers
        self.worker_id = worker_id or default_worker_id()
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.grace_seconds = grace_seconds
        self.metrics_seconds = metrics_seconds
        self.retention_policy = retention_policy or retention.RetentionPolicy()
        self.supervisor = supervisor or supervision.Supervisor()
        self._listen = listen
        self._draw = draw
        self._slots: dict[int, _Slot] = {}
        self._wake = asyncio.Event()
        self._stopping = False
        self._stopped = False
        self._loop: supervision.Supervised | None = None
        self._helpers: list[supervision.Supervised] = []
        self._listener: pool.Listener | None = None
        self._log = log.bind(worker_id=self.worker_id)

    @classmethod
    def from_settings(
        cls,
        store: pool.Store,
        handlers: registry.Registry,
        settings: Settings,
        *,
        concurrency: int,
        worker_id: str | None = None,
        supervisor: supervision.Supervisor | None = None,
    ) -> Worker:
        """A worker with the lease, poll, grace, metrics and retention settings of the process."""
        return cls(
            store,
            handlers,
            worker_id=worker_id,
            concurrency=concurrency,
            lease_seconds=settings.job_lease_seconds,
            poll_seconds=settings.job_poll_seconds,
            grace_seconds=settings.job_grace_seconds,
            metrics_seconds=settings.job_metrics_seconds,
            retention_policy=retention.RetentionPolicy.from_settings(settings),
            supervisor=supervisor,
        )

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start claiming; returns at once. Idempotent; a stopped worker stays stopped."""
        if self._loop is not None or self._stopping:
            return
        if not self.registry.kinds:
            self._log.warning("worker_without_handlers", detail="no job kind is registered: nothing to run")
        await self._connect_listener()
        me = self.worker_id
        self._loop = self.supervisor.run("worker-loop", self._claim_loop(), worker_id=me)
        self._helpers = [
            self.supervisor.keep_running("lease-renewal", self._renew_leases, worker_id=me),
            self.supervisor.keep_running("queue-metrics", self._refresh, worker_id=me),
            self.supervisor.keep_running("retention-sweep", self._sweep, worker_id=me),
        ]
        self._log.info("worker_started", kinds=list(self.registry.kinds), concurrency=self.concurrency)

    async def wait(self) -> None:
        """Until the claiming loop ends: after `stop()` or `interrupt()`, or when it failed (raised)."""
        if self._loop is not None:
            await asyncio.shield(self._loop.task)
            if self._loop.error is not None:
                raise self._loop.error

    def interrupt(self) -> None:
        """Stop claiming (a signal handler's call); `wait()` returns, then `stop()` drains."""
        self._stopping = True
        self._wake.set()

    @property
    def failure(self) -> str | None:
        """What ended the claiming loop, when it failed."""
        error = self._loop.error if self._loop is not None else None
        return supervision.describe(error) if error is not None else None

    @property
    def stopped(self) -> bool:
        """`stop()` ran to its end: nothing claims, runs or listens any more."""
        return self._stopped

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop claiming, let running jobs finish within the grace period, release the rest. Idempotent."""
        self.interrupt()
        if self._loop is not None:
            await asyncio.wait([self._loop.task])  # ends now that we stop; never raises
        grace = self.grace_seconds if grace_seconds is None else grace_seconds
        tasks = [slot.task for slot in self._slots.values() if slot.task is not None]
        if tasks:
            self._log.info("worker_draining", running=len(tasks), grace_seconds=grace)
            _, late = await asyncio.wait(tasks, timeout=grace) if grace > 0 else (set(), set(tasks))
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        left = [slot for slot in self._slots.values() if not slot.lost]
        leftover = [slot.job for slot in left]
        self._slots.clear()
        if leftover:
            try:
                released = await self.queue.release(self.worker_id, leftover)
            except store_errors.StoreError as error:
                self._log.error("release_failed", jobs=[j.id for j in leftover], error=str(error))
            else:
                for slot in left:
                    metrics.JOB_DURATION.labels(slot.job.kind, "released").observe(
                        time.monotonic() - slot.started
                    )
                self._log.info("jobs_released", jobs=sorted(released))
        for helper in self._helpers:
            helper.cancel()
        await asyncio.gather(*(helper.task for helper in self._helpers), return_exceptions=True)
        self._helpers = []
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
        self._stopped = True
        self._log.info("worker_stopped")

    @property
    def running(self) -> dict[int, domain.Job]:
        """Jobs being run now, by id."""
        return {job_id: slot.job for job_id, slot in self._slots.items()}

    async def run_until_idle(self) -> int:
        """Claim and run due jobs, those their handlers enqueue included, until none is left; the
        number claimed. Deterministic: no sleeping, no NOTIFY, nothing in the background once it
        returns (a retry whose `run_after` lies ahead stays pending). For tests and one-shot runs
        on a worker that was not `start()`ed; the caller bounds it (`asyncio.timeout`)."""
        if self._loop is not None:
            raise RuntimeError("run_until_idle() is for a worker that was not started")
        claims = 0
        while True:
            while (kinds := self._free_kinds()) and (
                claimed := await self.queue.claim(self.worker_id, kinds, self.lease_seconds)
            ):
                await self._begin(claimed)
                claims += 1
            tasks = [slot.task for slot in self._slots.values() if slot.task is not None]
            if not tasks:
                return claims
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)

    # -- claiming --------------------------------------------------------------------------------

    def _free_kinds(self) -> list[str]:
        if self._stopping or len(self._slots) >= self.concurrency:
            return []
        busy = Counter(slot.job.kind for slot in self._slots.values())
        return [spec.kind for spec in self.registry if busy[spec.kind] < spec.policy.limit(self.concurrency)]

    async def _claim_loop(self) -> None:
        failures = 0
        while not self._stopping:
            self._wake.clear()
            try:
                while (kinds := self._free_kinds()) and (
                    claimed := await self.queue.claim(self.worker_id, kinds, self.lease_seconds)
                ):
                    await self._begin(claimed)
                timeout = await self._idle_timeout()
                if self._listen and (self._listener is None or not self._listener.alive):
                    await self._connect_listener()
                failures = 0
            except store_errors.TransientStoreError as error:
                failures += 1
                timeout = min(self.poll_seconds, 0.5 * 2**failures)
                self._log.warning("queue_unavailable", error=str(error), retry_in=timeout)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    async def _idle_timeout(self) -> float:
        kinds = self._free_kinds()
        if not kinds:
            return self.poll_seconds  # a finishing job wakes us
        due = await self.queue.next_due(kinds)
        if due is None:
            return self.poll_seconds
        return min(self.poll_seconds, max(due, 0.05))  # never spin on a row another claimer holds

    async def _begin(self, claimed: queue.Claimed) -> None:
        job = claimed.job
        spec = self.registry.get(job.kind)
        metrics.JOB_ATTEMPTS.labels(job.kind).inc()
        if claimed.redelivered:
            self._log.warning(
                "job_redelivered", job_id=job.id, kind=job.kind, lost_by=claimed.previous_worker
            )
        exhausted = domain.on_claim(job.attempts, spec.policy, job.last_error)
        if exhausted is not None:
            if await self.queue.finish(self.worker_id, job, exhausted):
                metrics.JOB_DEAD_LETTERS.labels(job.kind).inc()
                self._log.error("job_dead", job_id=job.id, kind=job.kind, error=exhausted.last_error)
            return
        slot = self._slots[job.id] = _Slot(job)
        run = self._run(slot, spec)
        slot.task = self.supervisor.run("job", run, vital=False, job_id=job.id, job_kind=job.kind).task

    # -- running ---------------------------------------------------------------------------------

    async def _run(self, slot: _Slot, spec: registry.HandlerSpec) -> None:
        job = slot.job
        started = time.monotonic()
        with structlog.contextvars.bound_contextvars(job_id=job.id, job_kind=job.kind, attempt=job.attempts):
            try:
                transition = await execution.attempt(job, spec, self._draw())
            except asyncio.CancelledError:
                if slot.lost:
                    metrics.JOB_DURATION.labels(job.kind, "lost").observe(time.monotonic() - started)
                raise
            # Cancelled while storing (grace period over): the slot stays, and stop() releases the
            # job, which changes nothing if the outcome was stored already. Anything else frees the
            # slot (the lease expires and the job runs again) and goes to the supervisor.
            try:
                stored = await self._store_outcome(job, transition)
            except Exception:
                self._slots.pop(job.id, None)
                self._wake.set()
                raise
            self._slots.pop(job.id, None)
            self._wake.set()
            execution.record(job, transition, stored, time.monotonic() - started, self._log)

    async def _store_outcome(self, job: domain.Job, transition: domain.Transition) -> bool:
        for attempt in range(4):
            try:
                return await self.queue.finish(self.worker_id, job, transition)
            except store_errors.StoreError as error:
                if attempt == 3 or not error.retryable:
                    self._log.error("outcome_not_stored", error=str(error))
                    return False  # the lease expires and another worker runs the job again
                await asyncio.sleep(0.25 * 2**attempt)
        return False  # pragma: no cover

    # -- helpers ---------------------------------------------------------------------------------

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            jobs = [slot.job for slot in self._slots.values() if not slot.lost]
            if not jobs:
                continue
            try:
                held = await self.queue.extend_leases(self.worker_id, jobs, self.lease_seconds)
            except store_errors.StoreError as error:
                self._log.warning("lease_renewal_failed", error=str(error))
                continue
            for job in jobs:
                slot = self._slots.get(job.id)
                if job.id not in held and slot is not None and slot.job is job and slot.task is not None:
                    slot.lost = True
                    self._slots.pop(job.id, None)
                    slot.task.cancel()
                    self._log.warning("job_lease_lost", job_id=job.id, kind=job.kind)

    async def _refresh(self) -> None:
        while True:
            try:
                await self.refresh_metrics()
            except store_errors.StoreError as error:
                self._log.warning("queue_metrics_failed", error=str(error))
            await asyncio.sleep(self.metrics_seconds)

    async def _sweep(self) -> None:
        while True:
            try:
                await retention.sweep(self.queue.store, self.retention_policy)
            except store_errors.StoreError as error:
                self._log.warning("retention_sweep_failed", error=str(error))
            for spec in self.registry:  # handlers that keep data of their own expire it here too
                expire = getattr(spec.handler, "expire", None)
                if expire is None:
                    continue
                try:
                    await expire()
                except EchoError as error:
                    self._log.warning("retention_sweep_failed", kind=spec.kind, error=str(error))
            await asyncio.sleep(self.retention_policy.interval_seconds)

    async def refresh_metrics(self) -> None:
        """Set the queue-depth gauges from one count query."""
        await depths.refresh_gauges(self.queue, self.registry.kinds)

    async def _connect_listener(self) -> None:
        if not self._listen or self._stopping:
            return
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
        try:
            self._listener = await self.queue.store.listen(self.queue.channel, self._notified)
        except store_errors.StoreError as error:
            self._log.warning("listen_failed", error=str(error), detail="polling until it comes back")

    def _notified(self, kind: str) -> None:
        if kind in self.registry:
            self._wake.set()
