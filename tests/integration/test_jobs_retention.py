"""Finished jobs do not pile up: the retention sweep, and depth counts that never read done rows."""

from __future__ import annotations

import pytest
from fakes.eventually import eventually
from fakes.metric_samples import sample as _sample
from prometheus_client import REGISTRY

from echo.adapters.store import queries
from echo.adapters.store.pool import Store
from echo.config.settings import Settings
from echo.domain.jobs import JobState
from echo.queue import depths, retention
from echo.queue.queue import JobQueue
from echo.queue.registry import Registry
from echo.queue.worker import Worker

DAY = 86400.0
SQL = queries.load("echo.queue", "queries.sql")


async def _finished(
    store: Store, state: JobState, count: int, *, age_days: float, kind: str = "summary"
) -> None:
    """`count` jobs finished in `state` `age_days` ago."""
    await store.execute(
        """
        INSERT INTO jobs (kind, state, attempts, finished_at, last_error)
        SELECT $1, $2, 1, now() - make_interval(secs => $3), CASE WHEN $2 = 'dead' THEN 'boom' END
        FROM generate_series(1, $4)
        """,
        kind,
        state.value,
        age_days * DAY,
        count,
    )


async def _states(store: Store) -> dict[str, int]:
    rows = await store.fetch("SELECT state, count(*) AS n FROM jobs GROUP BY state")
    return {row["state"]: row["n"] for row in rows}


async def test_the_sweep_deletes_old_done_and_dead_rows_in_batches(store: Store, jobs: JobQueue) -> None:
    await _finished(store, JobState.DONE, 25, age_days=8)
    await _finished(store, JobState.DONE, 4, age_days=6)
    await _finished(store, JobState.DEAD, 7, age_days=31)
    await _finished(store, JobState.DEAD, 3, age_days=20)
    await jobs.enqueue("summary")
    await jobs.enqueue("distill")
    await jobs.claim("w", ["distill"], 30)
    swept_done = _sample("echo_jobs_swept_total", state="done")
    swept_dead = _sample("echo_jobs_swept_total", state="dead")
    policy = retention.RetentionPolicy(done_seconds=7 * DAY, dead_seconds=30 * DAY, batch_size=10)
    result = await retention.sweep(store, policy)
    assert result == retention.Swept(done=25, dead=7, ran=True)
    assert await _states(store) == {"done": 4, "dead": 3, "pending": 1, "running": 1}
    assert _sample("echo_jobs_swept_total", state="done") == swept_done + 25
    assert _sample("echo_jobs_swept_total", state="dead") == swept_dead + 7
    assert await retention.sweep(store, policy) == retention.Swept(done=0, dead=0, ran=True)


async def test_one_sweeper_at_a_time(store: Store, dsn: str) -> None:
    await _finished(store, JobState.DONE, 3, age_days=8)
    policy = retention.RetentionPolicy(done_seconds=DAY)
    async with store.connection() as holder:
        assert await holder.fetchval(SQL["try_sweep_lock"], store.schema)
        assert await retention.sweep(store, policy) == retention.Swept(done=0, dead=0, ran=False)
        await holder.fetchval(SQL["sweep_unlock"], store.schema)
    assert await retention.sweep(store, policy) == retention.Swept(done=3, dead=0, ran=True)


async def test_workers_sweep_on_their_own(store: Store) -> None:
    await _finished(store, JobState.DONE, 5, age_days=2)
    await _finished(store, JobState.DONE, 2, age_days=0)
    policy = retention.RetentionPolicy(done_seconds=DAY, interval_seconds=0.05)
    worker = Worker(store, Registry(), retention_policy=policy)
    await worker.start()
    try:

        async def two_done() -> bool:
            return (await _states(store)).get("done") == 2

        await eventually(two_done, within=10, what="the worker's sweep")
        await _finished(store, JobState.DONE, 3, age_days=2)  # and again at the next interval
        await eventually(two_done, within=10, what="the worker's second sweep")
    finally:
        await worker.stop()


def test_retention_defaults_come_from_settings() -> None:
    settings = Settings(job_done_retention_seconds=60, job_dead_retention_seconds=120, job_sweep_seconds=5)
    assert retention.RetentionPolicy.from_settings(settings) == retention.RetentionPolicy(
        done_seconds=60, dead_seconds=120, interval_seconds=5
    )
    defaults = retention.RetentionPolicy.from_settings(Settings())
    assert (defaults.done_seconds, defaults.dead_seconds) == (7 * DAY, 30 * DAY)
    with pytest.raises(ValueError, match="batch_size"):
        retention.RetentionPolicy(batch_size=0)


async def test_depths_count_the_live_queue_and_dead_letters_but_never_done_rows(
    store: Store, jobs: JobQueue
) -> None:
    await _finished(store, JobState.DONE, 3, age_days=1, kind="merge")
    await _finished(store, JobState.DEAD, 2, age_days=1, kind="merge")
    await jobs.enqueue("merge")
    await jobs.enqueue("merge", delay_seconds=60)
    await jobs.enqueue("distill")
    await jobs.claim("w", ["distill"], 30)
    found = {(d.kind, d.state.value): (d.jobs, d.ready) for d in await jobs.depths()}
    assert found == {("merge", "pending"): (2, 1), ("merge", "dead"): (2, 0), ("distill", "running"): (1, 0)}
    await depths.refresh_gauges(jobs, ["merge", "distill"])
    assert _sample("echo_jobs", kind="merge", state="dead") == 2
    assert _sample("echo_jobs", kind="distill", state="dead") == 0
    assert REGISTRY.get_sample_value("echo_jobs", {"kind": "merge", "state": "done"}) is None


async def test_the_depth_count_reads_partial_indexes_only(store: Store, jobs: JobQueue) -> None:
    """With many done rows the count must not scan the table (the bench measures how much it saves)."""
    await _finished(store, JobState.DONE, 20_000, age_days=1)
    await _finished(store, JobState.DEAD, 50, age_days=1)
    await jobs.enqueue("summary")
    await store.execute("VACUUM ANALYZE jobs")
    plan = "\n".join(row[0] for row in await store.fetch("EXPLAIN " + SQL["counts"].sql))
    assert "Seq Scan" not in plan, plan
    for index in ("jobs_ready", "jobs_leases", "jobs_dead_finished"):
        assert index in plan, plan
