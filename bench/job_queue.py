"""The job queue with a million finished jobs: the depth count before and after, and the sweep.

One throwaway tenant schema on the test PostgreSQL (ECHO_TEST_DATABASE_URL, default
127.0.0.1:5432/test) is filled with `--finished` done and dead jobs (2% dead; done ones finished
over the last 14 days, dead ones over 56) beside a live queue (`--pending` pending, `--running`
running), vacuumed and analysed as autovacuum would leave it. Then, on that same table:

- the depth count every worker runs every 15 s: the query of the previous version (GROUP BY over
  the whole table: it reads every finished row) beside the current one (`counts`: pending,
  running and dead from partial indexes), alternated, `--repeats` times each;
- the retention sweep at its defaults (done kept 7 days, dead 30 days, 1000 rows per delete):
  rows deleted per second.

    .venv/bin/python bench/job_queue.py [--finished 1000000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from echo.adapters.store import pool, queries, testing
from echo.queue import queue, retention
from echo.support import logs

# The `counts` query of migration 0002's era, kept here as the baseline.
FULL_SCAN_COUNTS = """
SELECT kind, state, count(*) AS jobs,
       count(*) FILTER (WHERE (state = 'pending' AND run_after <= now())
                           OR (state = 'running' AND leased_until < now())) AS ready
FROM jobs
GROUP BY kind, state
"""

KINDS = ("summary", "distill", "map_reduce", "merge")

FILL = """
INSERT INTO jobs (kind, state, payload, idempotency_key, attempts, run_after, created_at, updated_at,
                  started_at, finished_at, last_error)
SELECT ($4::text[])[1 + i % 4],
       CASE WHEN i % 50 = 0 THEN 'dead' ELSE 'done' END,
       jsonb_build_object('chat_id', 'chat-' || (i % 5000), 'position', i),
       'key-' || i,
       CASE WHEN i % 50 = 0 THEN 5 ELSE 1 END,
       t, t, t, t, t + interval '2 seconds',
       CASE WHEN i % 50 = 0 THEN 'RuntimeError: provider unavailable' END
FROM (
    -- done jobs finished over the last $3 seconds, dead ones over four times as long
    SELECT i, now() - make_interval(secs => $3::float8 * random()
                                             * CASE WHEN i % 50 = 0 THEN 4 ELSE 1 END) AS t
    FROM generate_series($1::integer, $2::integer) AS i
) AS s
"""

LIVE = """
INSERT INTO jobs (kind, state, payload, attempts, worker_id, leased_until, run_after)
SELECT ($3::text[])[1 + i % 4],
       CASE WHEN i <= $2::integer THEN 'running' ELSE 'pending' END,
       jsonb_build_object('position', i),
       CASE WHEN i <= $2::integer THEN 1 ELSE 0 END,
       CASE WHEN i <= $2::integer THEN 'bench-worker' END,
       CASE WHEN i <= $2::integer THEN now() + interval '30 seconds' END,
       now() + make_interval(secs => (i % 3) * 30)
FROM generate_series(1, $1::integer) AS i
"""


async def fill(store: pool.Store, finished: int, pending: int, running: int) -> float:
    began = time.perf_counter()
    chunk = 200_000
    for start in range(1, finished + 1, chunk):
        end = min(finished, start + chunk - 1)
        await store.execute(FILL, start, end, 14 * 86400.0, list(KINDS))
    await store.execute(LIVE, pending + running, running, list(KINDS))
    await store.execute("VACUUM ANALYZE jobs")
    return time.perf_counter() - began


async def time_query(store: pool.Store, sql: str) -> float:
    began = time.perf_counter()
    await store.fetch(sql)
    return (time.perf_counter() - began) * 1000


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> int:
    logs.configure_logging("WARNING", "console")
    dsn = args.dsn or testing.test_dsn()
    reason = await testing.unreachable(dsn)
    if reason:
        print(f"PostgreSQL at {dsn} is unreachable: {reason}", file=sys.stderr)
        return 2
    new_counts = queries.load("echo.queue", "queries.sql")["counts"].sql
    async with testing.temporary_store(dsn, testing.unique_tenant("bench"), command_timeout=None) as store:
        seconds = await fill(store, args.finished, args.pending, args.running)
        total = await store.fetchval("SELECT count(*) FROM jobs")
        print(f"filled {total:,} rows ({args.finished:,} finished) in {seconds:.1f} s")
        before: list[float] = []
        after: list[float] = []
        for _ in range(3):  # warm the caches for both
            await time_query(store, FULL_SCAN_COUNTS)
            await time_query(store, new_counts)
        for _ in range(args.repeats):
            before.append(await time_query(store, FULL_SCAN_COUNTS))
            after.append(await time_query(store, new_counts))
        old_rows = len(await store.fetch(FULL_SCAN_COUNTS))
        new_rows = len(await store.fetch(new_counts))
        depths = await queue.JobQueue(store).depths()

        policy = retention.RetentionPolicy()
        began = time.perf_counter()
        swept = await retention.sweep(store, policy)
        sweep_seconds = time.perf_counter() - began
        left = await store.fetchval("SELECT count(*) FROM jobs")
        await store.execute("VACUUM jobs")  # as autovacuum would after so many deletes
        after_sweep = [await time_query(store, new_counts) for _ in range(args.repeats)]

    print()
    print(f"Depth count on {total:,} rows, {args.repeats} runs each, alternated (ms)")
    header = f"{'query':<44} {'median':>9} {'p95':>9} {'rows out':>9}"
    print(header)
    print("-" * len(header))
    for name, samples, rows in (
        ("before: GROUP BY kind, state (full scan)", before, old_rows),
        ("after: pending/running/dead, partial indexes", after, new_rows),
    ):
        median, p95 = summary(samples)
        print(f"{name:<44} {median:>9.2f} {p95:>9.2f} {rows:>9}")
    speedup = statistics.median(before) / statistics.median(after)
    print(f"{'speed-up (median)':<44} {speedup:>8.0f}x")
    print(
        f"(the new count sees {sum(d.jobs for d in depths):,} live and dead jobs; done ones are not counted)"
    )

    print()
    deleted = swept.done + swept.dead
    print(f"Retention sweep (done > 7 days, dead > 30 days, {policy.batch_size} rows per delete)")
    header = f"{'deleted done':>13} {'deleted dead':>13} {'seconds':>9} {'rows/s':>9} {'rows left':>10}"
    print(header)
    print("-" * len(header))
    print(
        f"{swept.done:>13,} {swept.dead:>13,} {sweep_seconds:>9.2f} "
        f"{deleted / sweep_seconds:>9,.0f} {left:>10,}"
    )
    median, p95 = summary(after_sweep)
    print(f"depth count after the sweep and a VACUUM: median {median:.2f} ms, p95 {p95:.2f} ms")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--finished", type=int, default=1_000_000, help="done and dead jobs in the table")
    parser.add_argument("--pending", type=int, default=2_000, help="pending jobs (a third of them due now)")
    parser.add_argument("--running", type=int, default=50, help="running jobs (leased)")
    parser.add_argument("--repeats", type=int, default=30, help="timed runs of each count query")
    parser.add_argument("--dsn", default=None, help="PostgreSQL DSN (default: the test database)")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
