"""The queue on a real PostgreSQL: idempotent enqueue, caller transactions, SKIP LOCKED claims, fencing."""

from __future__ import annotations

import asyncio

import pytest
from fakes.metric_samples import sample as _sample
from opentelemetry.sdk.trace import TracerProvider

from echo.adapters.store import errors
from echo.adapters.store.pool import Store
from echo.domain import jobs as domain
from echo.domain.jobs import JobState
from echo.queue import execution, queue
from echo.queue.queue import JobQueue


async def test_enqueue_with_the_same_key_returns_the_first_job(jobs: JobQueue, store: Store) -> None:
    before = _sample("echo_jobs_enqueued_total", kind="summary", result="existing")
    first = await jobs.enqueue("summary", {"chat_id": "c1"}, idempotency_key="sum:abc")
    again = await jobs.enqueue("summary", {"chat_id": "other"}, idempotency_key="sum:abc")
    other_kind = await jobs.enqueue("distill", {}, idempotency_key="sum:abc")
    unkeyed = [await jobs.enqueue("summary") for _ in range(2)]
    assert again == first
    assert len({first, other_kind, *unkeyed}) == 4
    info = await jobs.get(first)
    assert info is not None
    assert info.payload == {"chat_id": "c1"}
    assert info.state is JobState.PENDING
    assert await store.fetchval("SELECT count(*) FROM jobs") == 4
    assert _sample("echo_jobs_enqueued_total", kind="summary", result="existing") == before + 1


async def test_concurrent_enqueues_of_one_key_make_one_job(jobs: JobQueue, store: Store) -> None:
    ids = await asyncio.gather(*(jobs.enqueue("merge", {"n": n}, idempotency_key="same") for n in range(10)))
    assert len(set(ids)) == 1
    assert await store.fetchval("SELECT count(*) FROM jobs") == 1


async def test_enqueue_inside_the_callers_transaction(jobs: JobQueue, store: Store) -> None:
    notified: asyncio.Queue[str] = asyncio.Queue()
    listener = await store.listen(jobs.channel, notified.put_nowait)
    try:

        async def outlet_fails_after_enqueue() -> None:
            async with store.transaction() as connection:
                await jobs.enqueue("summary", idempotency_key="k1", connection=connection)
                raise RuntimeError("outlet failed")

        with pytest.raises(RuntimeError, match="outlet failed"):
            await outlet_fails_after_enqueue()
        assert await store.fetchval("SELECT count(*) FROM jobs") == 0
        async with store.transaction() as connection:
            job_id = await jobs.enqueue("summary", idempotency_key="k1", connection=connection)
            assert await jobs.enqueue("summary", idempotency_key="k1", connection=connection) == job_id
            await asyncio.sleep(0.1)
            assert notified.empty()  # workers hear of it at commit, not before
        assert await asyncio.wait_for(notified.get(), 2) == "summary"
        assert (await jobs.get(job_id)) is not None
    finally:
        await listener.close()


async def test_claims_skip_locked_rows_and_never_hand_out_a_job_twice(jobs: JobQueue) -> None:
    ids = {await jobs.enqueue("summary", {"n": n}) for n in range(10)}
    claims = await asyncio.gather(*(jobs.claim(f"w{n}", ["summary"], 30) for n in range(12)))
    got = [c.job.id for c in claims if c is not None]
    assert sorted(got) == sorted(ids)
    assert sum(c is None for c in claims) == 2
    assert all(c.job.attempts == 1 and not c.redelivered for c in claims if c is not None)


async def test_claim_respects_kinds_and_run_after(jobs: JobQueue) -> None:
    later = await jobs.enqueue("summary", delay_seconds=60)
    other = await jobs.enqueue("distill")
    assert await jobs.claim("w", ["summary"], 30) is None
    due = await jobs.next_due(["summary"])
    assert due is not None
    assert 55 < due <= 60
    assert (await jobs.next_due(["distill"]) or 0) <= 0
    assert await jobs.next_due(["merge"]) is None
    claimed = await jobs.claim("w", ["summary", "distill"], 30)
    assert claimed is not None
    assert claimed.job.id == other
    assert (await jobs.get(later)).state is JobState.PENDING  # type: ignore[union-attr]


async def test_expired_lease_is_redelivered_with_the_attempt_counted(jobs: JobQueue) -> None:
    job_id = await jobs.enqueue("summary", {"x": 1}, traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    first = await jobs.claim("crashed", ["summary"], 0.2)
    assert first is not None
    assert await jobs.claim("other", ["summary"], 30) is None
    await asyncio.sleep(0.3)
    second = await jobs.claim("other", ["summary"], 30)
    assert second is not None
    assert second.job.id == job_id
    assert (second.redelivered, second.previous_worker, second.job.attempts) == (True, "crashed", 2)
    assert second.job.traceparent == first.job.traceparent
    # The first worker's late outcome is fenced off: it changes nothing.
    assert not await jobs.finish("crashed", first.job, domain.Transition(JobState.DONE))
    assert await jobs.extend_leases("crashed", [first.job], 30) == set()
    assert await jobs.extend_leases("other", [second.job], 30) == {job_id}
    assert await jobs.finish("other", second.job, domain.Transition(JobState.DONE))
    info = await jobs.get(job_id)
    assert info is not None
    assert info.state is JobState.DONE
    assert info.leased_until is None


async def test_retry_dead_release_and_requeue(jobs: JobQueue) -> None:
    job_id = await jobs.enqueue("summary")
    claimed = await jobs.claim("w", ["summary"], 30)
    assert claimed is not None
    retry = domain.Transition(JobState.PENDING, delay_seconds=30, last_error="boom")
    assert await jobs.finish("w", claimed.job, retry)
    info = await jobs.get(job_id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 1, "boom")
    assert await jobs.claim("w", ["summary"], 30) is None  # not due for 30 s
    await jobs.store.execute("UPDATE jobs SET run_after = now() WHERE id = $1", job_id)
    claimed = await jobs.claim("w", ["summary"], 30)
    assert claimed is not None
    assert claimed.job.last_error == "boom"
    assert claimed.job.attempts == 2
    assert await jobs.release("w", [claimed.job]) == {job_id}
    info = await jobs.get(job_id)
    assert info is not None
    assert (info.state, info.attempts) == (JobState.PENDING, 1)
    claimed = await jobs.claim("w", ["summary"], 30)
    assert claimed is not None
    assert await jobs.finish("w", claimed.job, domain.Transition(JobState.DEAD, last_error="poison"))
    info = await jobs.get(job_id)
    assert info is not None
    assert (info.state, info.last_error) == (JobState.DEAD, "poison")
    assert info.finished_at is not None
    assert await jobs.requeue_dead(job_id)
    assert not await jobs.requeue_dead(job_id)
    info = await jobs.get(job_id)
    assert info is not None
    assert (info.state, info.attempts) == (JobState.PENDING, 0)
    assert await jobs.get(999_999) is None


async def test_enqueue_refuses_bad_kinds_and_unserialisable_payloads(jobs: JobQueue) -> None:
    with pytest.raises(ValueError, match="not a job kind"):
        await jobs.enqueue("Summary")
    with pytest.raises(errors.PermanentStoreError, match="not JSON serializable"):
        await jobs.enqueue("summary", {"x": object()})
    with pytest.raises(errors.PermanentStoreError):
        await jobs.store.execute("INSERT INTO jobs (kind, state) VALUES ('summary', 'running')")


async def test_trace_context_travels_with_the_job(jobs: JobQueue) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("outlet") as span:
        job_id = await jobs.enqueue("summary")
    context = span.get_span_context()
    info = await jobs.get(job_id)
    assert info is not None
    assert info.traceparent == f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    claimed = await jobs.claim("w", ["summary"], 30)
    assert claimed is not None
    with execution.job_span(claimed.job) as job_span:
        assert job_span.get_span_context().trace_id == context.trace_id
    assert queue.current_traceparent() is None  # no span outside


async def test_depth_gauges(jobs: JobQueue) -> None:
    from echo.queue import depths

    await jobs.enqueue("summary")
    await jobs.enqueue("summary", delay_seconds=60)
    await jobs.enqueue("distill")
    await jobs.claim("w", ["distill"], 30)
    await depths.refresh_gauges(jobs, ["summary", "distill", "merge"])
    assert _sample("echo_jobs", kind="summary", state="pending") == 2
    assert _sample("echo_jobs", kind="distill", state="running") == 1
    assert _sample("echo_jobs", kind="merge", state="pending") == 0
    assert _sample("echo_jobs_pending", kind="summary") == 1  # the delayed one is not ready
    assert _sample("echo_jobs_pending", kind="distill") == 0
