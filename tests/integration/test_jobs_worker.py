"""The in-process worker on a real PostgreSQL: retries, dead letters, leases, concurrency, wake-ups, stop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fakes.eventually import eventually
from fakes.metric_samples import sample as _sample
from structlog.testing import capture_logs

from echo.adapters.store import errors as store_errors
from echo.adapters.store import testing
from echo.adapters.store.pool import Store
from echo.domain import jobs as domain
from echo.domain import kinds
from echo.domain.jobs import JobState, RetryPolicy
from echo.queue import errors
from echo.queue.queue import JobInfo, JobQueue
from echo.queue.registry import Registry
from echo.queue.worker import Worker
from echo.support import supervision

FAST = RetryPolicy(base_seconds=0.01, max_seconds=0.05, jitter=0)


@asynccontextmanager
async def running(store: Store, registry: Registry, **options: Any) -> AsyncIterator[Worker]:
    settings: dict[str, Any] = {
        "lease_seconds": 3,
        "poll_seconds": 1,
        "grace_seconds": 2,
        "metrics_seconds": 60,
    }
    worker = Worker(store, registry, **{**settings, **options})
    await worker.start()
    try:
        yield worker
    finally:
        await asyncio.wait_for(worker.stop(), 10)


async def state_is(jobs: JobQueue, job_id: int, state: JobState) -> JobInfo:
    info: JobInfo | None = None

    async def check() -> bool:
        nonlocal info
        info = await jobs.get(job_id)
        return info is not None and info.state is state

    await eventually(check, what=f"job {job_id} {state}")
    assert info is not None
    return info


async def test_a_job_runs_once_and_is_done(store: Store, jobs: JobQueue) -> None:
    seen: list[domain.Job] = []
    registry = Registry()

    @registry.handler("summary")
    async def handle(job: domain.Job) -> None:
        seen.append(job)

    async with running(store, registry):
        job_id = await jobs.enqueue("summary", {"chat_id": "c"}, idempotency_key="k")
        info = await state_is(jobs, job_id, JobState.DONE)
    assert [(j.id, j.payload, j.attempts, j.idempotency_key) for j in seen] == [
        (job_id, {"chat_id": "c"}, 1, "k")
    ]
    assert info.attempts == 1
    assert info.finished_at is not None
    assert info.leased_until is None


async def test_a_poison_job_ends_in_dead_letter_with_its_last_error(store: Store, jobs: JobQueue) -> None:
    registry = Registry()
    calls = 0

    @registry.handler("distill", max_attempts=3, retry=FAST)
    async def poison(job: domain.Job) -> None:
        nonlocal calls
        calls += 1
        raise ValueError(f"cannot parse window (attempt {job.attempts})")

    dead_before = _sample("echo_job_dead_letters_total", kind="distill")
    async with running(store, registry):
        job_id = await jobs.enqueue("distill")
        info = await state_is(jobs, job_id, JobState.DEAD)
    assert calls == 3
    assert info.attempts == 3
    assert info.last_error == "ValueError: cannot parse window (attempt 3)"
    assert _sample("echo_job_dead_letters_total", kind="distill") == dead_before + 1
    assert _sample("echo_job_duration_seconds_count", kind="distill", outcome="retry") >= 2


async def test_a_permanent_error_dead_letters_at_once(store: Store, jobs: JobQueue) -> None:
    registry = Registry()

    @registry.handler("merge", max_attempts=5, retry=FAST)
    async def refuse(job: domain.Job) -> None:
        raise errors.PermanentJobError("payload has no user_id")

    async with running(store, registry):
        job_id = await jobs.enqueue("merge")
        info = await state_is(jobs, job_id, JobState.DEAD)
    assert (info.attempts, info.last_error) == (1, "PermanentJobError: payload has no user_id")


async def test_retry_later_waits_the_delay_asked_for(store: Store, jobs: JobQueue) -> None:
    registry = Registry()
    starts: list[float] = []

    @registry.handler("summary", retry=RetryPolicy(base_seconds=30))
    async def flaky(job: domain.Job) -> None:
        starts.append(time.monotonic())
        if job.attempts == 1:
            raise errors.RetryLater("provider busy", delay_seconds=0.3)

    async with running(store, registry, poll_seconds=5):
        job_id = await jobs.enqueue("summary")
        info = await state_is(jobs, job_id, JobState.DONE)
    assert info.attempts == 2
    assert info.last_error == "RetryLater: provider busy"
    assert 0.25 <= starts[1] - starts[0] < 2.0  # woken by next_due, not by the 5 s poll


async def test_per_kind_and_total_concurrency_limits(store: Store, jobs: JobQueue) -> None:
    registry = Registry()
    now = {"slow": 0, "other": 0}
    peak = {"slow": 0, "other": 0, "total": 0}

    def tracked(kind: str) -> Callable[[domain.Job], Awaitable[None]]:
        async def handle(job: domain.Job) -> None:
            now[kind] += 1
            peak[kind] = max(peak[kind], now[kind])
            peak["total"] = max(peak["total"], sum(now.values()))
            await asyncio.sleep(0.15)
            now[kind] -= 1

        return handle

    registry.register("slow", tracked("slow"), concurrency=2)
    registry.register("other", tracked("other"), concurrency=3)
    ids = [await jobs.enqueue("slow") for _ in range(6)] + [await jobs.enqueue("other") for _ in range(6)]
    async with running(store, registry, concurrency=4):
        for job_id in ids:
            await state_is(jobs, job_id, JobState.DONE)
    assert peak["slow"] == 2
    assert peak["other"] <= 3
    assert peak["total"] == 4


async def test_a_kind_takes_its_share_of_a_larger_worker(store: Store, jobs: JobQueue) -> None:
    """An LLM-bound kind waits on the provider: a worker started with concurrency 16 runs 8 at once."""
    running_now, peak = 0, 0

    async def handle(job: domain.Job) -> None:
        nonlocal running_now, peak
        running_now += 1
        peak = max(peak, running_now)
        await asyncio.sleep(0.3)
        running_now -= 1

    registry = Registry()
    registry.register("distill", handle)  # its policy: 4 at once, or half of the worker's concurrency
    ids = [await jobs.enqueue("distill") for _ in range(12)]
    async with running(store, registry, concurrency=16):
        for job_id in ids:
            await state_is(jobs, job_id, JobState.DONE)
    assert peak == 8
    assert kinds.default_policy("distill").limit(4) == 4  # the default worker keeps the old cap
    assert kinds.default_policy("map_reduce").limit(64) == 2  # files in memory: never more


async def test_notify_wakes_an_idle_worker_at_once_without_polling(store: Store, jobs: JobQueue) -> None:
    registry = Registry()
    started: asyncio.Queue[float] = asyncio.Queue()

    @registry.handler("summary")
    async def handle(job: domain.Job) -> None:
        started.put_nowait(time.monotonic())

    async with running(store, registry, poll_seconds=30) as worker:
        await testing.wait_for_listeners(store, jobs.channel, 1)
        claims = 0
        original = worker.queue.claim

        async def counting(*args: Any) -> Any:
            nonlocal claims
            claims += 1
            return await original(*args)

        worker.queue.claim = counting  # type: ignore[method-assign]
        await asyncio.sleep(1.0)  # idle: no tight polling
        assert claims == 0
        latencies = []
        for _ in range(3):
            sent = time.monotonic()
            await jobs.enqueue("summary")
            latencies.append(await asyncio.wait_for(started.get(), 5) - sent)
    # Woken by NOTIFY: milliseconds, not the 30 s poll (bounds loose enough for a loaded CI machine).
    assert sorted(latencies)[1] < 0.3, latencies
    assert max(latencies) < 1.0, latencies
    assert claims <= 9  # per job: the claim, one finding the queue empty, one when its slot frees


async def test_a_crashed_workers_job_is_redelivered_after_its_lease(store: Store, jobs: JobQueue) -> None:
    job_id = await jobs.enqueue("summary", {"n": 1})
    ghost = await jobs.claim("ghost", ["summary"], 0.5)  # a worker that died holding it
    assert ghost is not None
    runs: list[int] = []
    registry = Registry()

    @registry.handler("summary")
    async def handle(job: domain.Job) -> None:
        runs.append(job.attempts)

    async with running(store, registry, poll_seconds=10):
        info = await state_is(jobs, job_id, JobState.DONE)
    assert runs == [2]
    assert info.attempts == 2


async def test_leases_are_renewed_while_a_long_job_runs(store: Store, jobs: JobQueue) -> None:
    runs: list[str] = []

    def registry_for(name: str) -> Registry:
        registry = Registry()

        @registry.handler("map_reduce")
        async def handle(job: domain.Job) -> None:
            runs.append(name)
            await asyncio.sleep(1.5)

        return registry

    job_id = await jobs.enqueue("map_reduce")
    async with running(store, registry_for("first"), lease_seconds=0.6, worker_id="first"):
        await eventually(lambda: bool(runs), what="first run")
        async with running(store, registry_for("second"), lease_seconds=0.6, poll_seconds=0.1):
            info = await state_is(jobs, job_id, JobState.DONE)
    assert runs == ["first"]
    assert info.attempts == 1


async def test_a_job_whose_lease_was_taken_over_is_cancelled(store: Store, jobs: JobQueue) -> None:
    cancelled = asyncio.Event()
    registry = Registry()

    @registry.handler("summary")
    async def handle(job: domain.Job) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job_id = await jobs.enqueue("summary")
    async with running(store, registry, lease_seconds=0.3) as worker:
        await eventually(lambda: bool(worker.running), what="job running")
        await store.execute("UPDATE jobs SET worker_id = 'thief' WHERE id = $1", job_id)
        await asyncio.wait_for(cancelled.wait(), 5)
        assert worker.running == {}
    info = await jobs.get(job_id)
    assert info is not None
    assert (info.state, info.worker_id) == (JobState.RUNNING, "thief")


async def test_stop_finishes_short_jobs_and_releases_long_ones(store: Store, jobs: JobQueue) -> None:
    registry = Registry()

    @registry.handler("summary")
    async def handle(job: domain.Job) -> None:
        await asyncio.sleep(job.payload["seconds"])

    short = await jobs.enqueue("summary", {"seconds": 0.3})
    long = await jobs.enqueue("summary", {"seconds": 30})
    worker = Worker(store, registry, lease_seconds=5, grace_seconds=1.0)
    await worker.start()
    await eventually(lambda: len(worker.running) == 2, what="both running")
    began = time.monotonic()
    await asyncio.wait_for(worker.stop(), 5)
    assert time.monotonic() - began < 2.5
    await worker.stop()  # idempotent
    done, released = await jobs.get(short), await jobs.get(long)
    assert done is not None
    assert done.state is JobState.DONE
    assert released is not None
    assert (released.state, released.attempts) == (JobState.PENDING, 0)


async def test_a_worker_without_handlers_claims_nothing(store: Store, jobs: JobQueue) -> None:
    job_id = await jobs.enqueue("summary")
    async with running(store, Registry(), poll_seconds=0.1):
        await asyncio.sleep(0.3)
    info = await jobs.get(job_id)
    assert info is not None
    assert info.state is JobState.PENDING


async def test_worker_refuses_bad_settings(store: Store) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        Worker(store, Registry(), concurrency=0)


# -- timeouts: a hung handler does not hold its lease forever ---------------------------------------


async def test_a_hung_handler_times_out_is_retried_then_dead(store: Store, jobs: JobQueue) -> None:
    registry = Registry()
    cancelled = 0

    @registry.handler("summary", max_attempts=2, retry=FAST, timeout_seconds=0.2)
    async def hang(job: domain.Job) -> None:
        nonlocal cancelled
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled += 1
            raise

    timeouts = _sample("echo_job_timeouts_total", kind="summary")
    began = time.monotonic()
    async with running(store, registry, lease_seconds=0.3):  # renewed while it hangs
        job_id = await jobs.enqueue("summary")
        info = await state_is(jobs, job_id, JobState.DEAD)
    assert time.monotonic() - began < 5
    assert (info.attempts, info.last_error) == (2, "timed out after 0.2 s")
    assert cancelled == 2
    assert _sample("echo_job_timeouts_total", kind="summary") == timeouts + 2
    assert _sample("echo_job_duration_seconds_count", kind="summary", outcome="retry") >= 1


async def test_a_handlers_own_timeout_error_is_an_ordinary_failure(store: Store, jobs: JobQueue) -> None:
    registry = Registry()

    @registry.handler("merge", max_attempts=1, timeout_seconds=60)
    async def slow_provider(job: domain.Job) -> None:
        raise TimeoutError("provider took too long")

    timeouts = _sample("echo_job_timeouts_total", kind="merge")
    async with running(store, registry):
        job_id = await jobs.enqueue("merge")
        info = await state_is(jobs, job_id, JobState.DEAD)
    assert info.last_error == "TimeoutError: provider took too long"
    assert _sample("echo_job_timeouts_total", kind="merge") == timeouts


# -- supervised helpers: a lease or metrics task that raises is logged, counted and restarted ----


async def test_a_lease_renewal_that_raises_is_logged_counted_and_restarted(
    store: Store, jobs: JobQueue
) -> None:
    registry = Registry()

    @registry.handler("map_reduce")
    async def long(job: domain.Job) -> None:
        await asyncio.sleep(1.2)

    renewals = 0
    failures = _sample("echo_background_task_failures_total", task="lease-renewal")
    supervisor = supervision.Supervisor(backoff=supervision.Backoff(first_seconds=0.01, max_seconds=0.05))
    with capture_logs() as logs:
        async with running(store, registry, lease_seconds=0.45, supervisor=supervisor) as worker:
            original = worker.queue.extend_leases

            async def flaky(*args: Any) -> set[int]:
                nonlocal renewals
                renewals += 1
                if renewals == 1:
                    raise RuntimeError("driver bug")
                return await original(*args)

            worker.queue.extend_leases = flaky  # type: ignore[method-assign]
            job_id = await jobs.enqueue("map_reduce")
            info = await state_is(jobs, job_id, JobState.DONE)
            tasks = supervisor.readiness()["tasks"]
    assert info.attempts == 1  # the lease was kept: not re-delivered
    assert renewals >= 3
    assert _sample("echo_background_task_failures_total", task="lease-renewal") == failures + 1
    assert tasks["lease-renewal"] == {"state": "running", "failures": 1, "error": "RuntimeError: driver bug"}
    failed = [e for e in logs if e["event"] == "background_task_failed"]
    assert [(e["task"], e["worker_id"]) for e in failed] == [("lease-renewal", worker.worker_id)]


async def test_a_queue_metrics_task_that_raises_is_logged_counted_and_restarted(store: Store) -> None:
    refreshes = 0
    failures = _sample("echo_background_task_failures_total", task="queue-metrics")
    supervisor = supervision.Supervisor(backoff=supervision.Backoff(first_seconds=0.01, max_seconds=0.05))
    worker = Worker(store, Registry(), metrics_seconds=0.05, supervisor=supervisor)
    original = worker.queue.depths

    async def flaky() -> list[Any]:
        nonlocal refreshes
        refreshes += 1
        if refreshes == 1:
            raise KeyError("state")
        return await original()

    worker.queue.depths = flaky  # type: ignore[method-assign]
    await worker.start()
    try:
        await eventually(lambda: refreshes >= 3, what="metrics refreshed after the failure")
    finally:
        await worker.stop()
    assert _sample("echo_background_task_failures_total", task="queue-metrics") == failures + 1
    assert supervisor.readiness()["tasks"]["queue-metrics"]["failures"] == 1


async def test_a_claiming_loop_that_fails_is_reported_and_raised_by_wait(store: Store) -> None:
    registry = Registry()
    registry.register("summary", _noop)
    supervisor = supervision.Supervisor()
    worker = Worker(store, registry, poll_seconds=0.05, supervisor=supervisor)

    async def broken(*args: Any) -> None:
        raise store_errors.PermanentStoreError("relation jobs does not exist")

    worker.queue.claim = broken  # type: ignore[method-assign,assignment]
    await worker.start()
    try:
        with pytest.raises(store_errors.PermanentStoreError, match="does not exist"):
            await asyncio.wait_for(worker.wait(), 5)
        assert worker.failure == "PermanentStoreError: relation jobs does not exist"
        check = supervisor.readiness()
        assert check["ok"] is False
        assert check["error"] == "worker-loop failed: PermanentStoreError: relation jobs does not exist"
    finally:
        await worker.stop()
    assert worker.stopped


async def _noop(job: domain.Job) -> None:
    return None


async def test_run_until_idle_runs_the_due_jobs_and_those_they_enqueue_then_returns(
    store: Store, jobs: JobQueue
) -> None:
    registry = Registry()
    ran: list[str] = []

    @registry.handler("map_reduce")
    async def fan_out(job: domain.Job) -> None:
        ran.append(f"map_reduce {job.payload['chat_id']}")
        await jobs.enqueue("summary", {"chat_id": job.payload["chat_id"]})

    @registry.handler("summary", retry=RetryPolicy(base_seconds=30, jitter=0))
    async def summarise(job: domain.Job) -> None:
        ran.append(f"summary {job.payload['chat_id']}")
        if job.payload["chat_id"] == "flaky":
            raise ValueError("the model is down")

    first = await jobs.enqueue("map_reduce", {"chat_id": "c"})
    second = await jobs.enqueue("map_reduce", {"chat_id": "flaky"})
    worker = Worker(store, registry, lease_seconds=5)
    assert await asyncio.wait_for(worker.run_until_idle(), 10) == 4
    assert sorted(ran) == ["map_reduce c", "map_reduce flaky", "summary c", "summary flaky"]
    assert worker.running == {}
    stored = [await jobs.get(row["id"]) for row in await store.fetch("SELECT id FROM jobs ORDER BY id")]
    states = {(info.kind, info.payload["chat_id"]): info for info in stored if info is not None}
    assert {key: info.state for key, info in states.items()} == {
        ("map_reduce", "c"): JobState.DONE,
        ("map_reduce", "flaky"): JobState.DONE,
        ("summary", "c"): JobState.DONE,
        ("summary", "flaky"): JobState.PENDING,  # its retry is due in 30 s: not run now
    }
    assert states["summary", "flaky"].attempts == 1
    assert states["summary", "flaky"].last_error == "ValueError: the model is down"
    assert {first, second} <= {info.id for info in states.values()}
    assert await asyncio.wait_for(worker.run_until_idle(), 10) == 0  # nothing due: returns at once
    await worker.stop()


async def test_run_until_idle_is_refused_on_a_started_worker(store: Store) -> None:
    registry = Registry()
    registry.register("summary", _noop)
    async with running(store, registry) as worker:
        with pytest.raises(RuntimeError, match="not started"):
            await worker.run_until_idle()
