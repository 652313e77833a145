"""Workers as separate processes on one PostgreSQL: SKIP LOCKED, SIGKILL, SIGTERM, `echoctl worker`."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from echo.adapters.store import migrations, testing
from echo.adapters.store.pool import Store
from echo.config import tenancy
from echo.domain.jobs import JobState
from echo.queue.queue import JobQueue

# A worker process running `run_worker` (what `echoctl worker` runs) with one test handler that
# records each run in `job_runs`. payload["seconds"][attempt - 1] says how long an attempt takes.
WORKER_SCRIPT = """
import asyncio, os, sys
from echo.config.settings import Settings
from echo.entrypoints import worker as runner
from echo.queue import registry

def build(settings, store):
    handlers = registry.Registry()

    async def work(job):
        seconds = job.payload.get("seconds", [0])
        run_id = await store.fetchval(
            "INSERT INTO job_runs (job_id, attempt, worker) VALUES ($1, $2, $3) RETURNING id",
            job.id, job.attempts, str(os.getpid()),
        )
        await asyncio.sleep(seconds[min(job.attempts, len(seconds)) - 1])
        await store.execute("UPDATE job_runs SET ended_at = clock_timestamp() WHERE id = $1", run_id)

    handlers.register("work", work, concurrency=4)
    return handlers

asyncio.run(runner.run_worker(Settings(), concurrency=int(sys.argv[1]), build_registry=build))
"""

RUNS_TABLE = """CREATE TABLE job_runs (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, attempt integer NOT NULL, worker text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz)"""


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[Store]:
    async with testing.temporary_store(dsn) as store:
        await store.execute(RUNS_TABLE)
        yield store


class Processes:
    """Worker processes of one test, killed at the end whatever happens; their output in files."""

    def __init__(self, tmp_path: Path, dsn: str) -> None:
        self.tmp_path = tmp_path
        self.dsn = dsn
        self.script = tmp_path / "worker.py"
        self.script.write_text(WORKER_SCRIPT)
        self.started: list[tuple[asyncio.subprocess.Process, Path]] = []

    def env(self, store: Store, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
        tenant = store.schema.removeprefix(tenancy.SCHEMA_PREFIX).replace("_", "-")
        return {
            **base,
            "ECHO_DATABASE_URL": self.dsn,
            "ECHO_TENANT": tenant,
            "ECHO_LOG_FORMAT": "console",
            "ECHO_JOB_LEASE_SECONDS": "1",
            "ECHO_JOB_POLL_SECONDS": "5",
            "ECHO_JOB_GRACE_SECONDS": "2",
            "ECHO_WORKER_METRICS_PORT": "0",
            **extra,
        }

    async def start(self, store: Store, *args: str, **extra: str) -> asyncio.subprocess.Process:
        log = self.tmp_path / f"worker-{len(self.started)}.log"
        with log.open("wb") as sink:
            process = await asyncio.create_subprocess_exec(
                sys.executable, *args, env=self.env(store, **extra), cwd=self.tmp_path,
                stdout=sink, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
        self.started.append((process, log))
        return process

    async def worker(self, store: Store, concurrency: int = 4, **extra: str) -> asyncio.subprocess.Process:
        return await self.start(store, str(self.script), str(concurrency), **extra)

    def output(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()}" for _, log in self.started if log.exists())

    async def stop_all(self) -> None:
        for process, _ in self.started:
            if process.returncode is None:
                process.kill()
                await asyncio.wait_for(process.wait(), 10)


@pytest.fixture
async def processes(tmp_path: Path, dsn: str) -> AsyncIterator[Processes]:
    group = Processes(tmp_path, dsn)
    try:
        yield group
    finally:
        await group.stop_all()


async def until(check: Callable[[], Awaitable[bool]], within: float, what: str, group: Processes) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, f"{what} not reached in {within} s\n{group.output()}"
        await asyncio.sleep(0.05)


async def test_two_worker_processes_never_run_a_job_twice(store: Store, processes: Processes) -> None:
    jobs = JobQueue(store)
    workers = [await processes.worker(store) for _ in range(2)]
    await testing.wait_for_listeners(store, jobs.channel, 2)
    async with store.transaction() as connection:  # one commit: both workers woken at once
        ids = [
            await jobs.enqueue("work", {"seconds": [0.01 + (n % 5) * 0.01]}, connection=connection)
            for n in range(60)
        ]

    async def all_done() -> bool:
        return await store.fetchval("SELECT count(*) FROM jobs WHERE state = 'done'") == len(ids)

    await until(all_done, 20, "60 jobs done", processes)
    runs = await store.fetch("SELECT job_id, worker, started_at, ended_at FROM job_runs ORDER BY started_at")
    by_job: dict[int, list] = {}
    for run in runs:
        by_job.setdefault(run["job_id"], []).append(run)
    for job_runs in by_job.values():  # never two runs of one job at the same time
        for earlier, later in itertools.pairwise(job_runs):
            assert earlier["ended_at"] is not None
            assert earlier["ended_at"] <= later["started_at"]
    assert sorted(by_job) == sorted(ids)
    assert all(len(job_runs) == 1 for job_runs in by_job.values())
    assert await store.fetchval("SELECT max(attempts) FROM jobs") == 1
    assert {run["worker"] for run in runs} == {str(w.pid) for w in workers}, "both workers took jobs"
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    assert [await asyncio.wait_for(w.wait(), 10) for w in workers] == [0, 0], processes.output()


async def test_a_killed_workers_job_is_rerun_after_its_lease_expires(
    store: Store, processes: Processes
) -> None:
    jobs = JobQueue(store)
    job_id = await jobs.enqueue("work", {"seconds": [30, 0.05]})
    first = await processes.worker(store)

    async def started() -> bool:
        return await store.fetchval("SELECT count(*) FROM job_runs") == 1

    await until(started, 15, "first run started", processes)
    first.send_signal(signal.SIGKILL)
    assert await asyncio.wait_for(first.wait(), 5) == -signal.SIGKILL
    killed_at = await store.fetchval("SELECT clock_timestamp()")
    await processes.worker(store)

    async def done() -> bool:
        info = await jobs.get(job_id)
        return info is not None and info.state is JobState.DONE

    await until(done, 15, "job re-run", processes)
    runs = await store.fetch("SELECT attempt, started_at, ended_at FROM job_runs ORDER BY id")
    assert [r["attempt"] for r in runs] == [1, 2]
    assert runs[0]["ended_at"] is None  # killed mid-job
    assert runs[1]["started_at"] > killed_at
    assert runs[1]["ended_at"] is not None
    info = await jobs.get(job_id)
    assert info is not None
    assert info.attempts == 2


async def test_sigterm_finishes_running_jobs_within_grace_and_releases_the_rest(
    store: Store, processes: Processes
) -> None:
    jobs = JobQueue(store)
    short = await jobs.enqueue("work", {"seconds": [0.5]})
    long = await jobs.enqueue("work", {"seconds": [30]})
    worker = await processes.worker(store, concurrency=2, ECHO_JOB_GRACE_SECONDS="1.2")

    async def both_started() -> bool:
        return await store.fetchval("SELECT count(*) FROM job_runs") == 2

    await until(both_started, 15, "both jobs running", processes)
    began = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(worker.wait(), 10) == 0, processes.output()
    assert time.monotonic() - began < 5
    finished, released = await jobs.get(short), await jobs.get(long)
    assert finished is not None
    assert finished.state is JobState.DONE
    assert released is not None
    assert (released.state, released.attempts) == (JobState.PENDING, 0)
    assert "jobs_released" in processes.output()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_the_worker_serves_queue_depth_metrics_and_stops_on_sigint(
    store: Store, processes: Processes
) -> None:
    jobs = JobQueue(store)
    await jobs.enqueue("work", delay_seconds=60)  # waits: counted pending, not ready
    port = _free_port()
    worker = await processes.worker(
        store, ECHO_WORKER_METRICS_PORT=str(port), ECHO_JOB_METRICS_SECONDS="0.2", ECHO_HOST="127.0.0.1"
    )
    wanted = ['echo_jobs{kind="work",state="pending"} 1.0', 'echo_jobs_pending{kind="work"} 0.0']

    async def exported() -> bool:
        try:
            async with httpx.AsyncClient() as client:
                text = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=2)).text
        except httpx.TransportError:
            return False
        return all(line in text for line in wanted)

    await until(exported, 10, "queue depth exported", processes)
    worker.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(worker.wait(), 10) == 0, processes.output()
    assert "worker_stopped" in processes.output()


async def test_echoctl_worker_migrates_then_waits_for_summary_jobs(dsn: str, processes: Processes) -> None:
    async with testing.temporary_store(dsn, migrate=False) as store:  # the worker migrates it
        worker = await processes.start(store, "-m", "echo.entrypoints.cli", "worker", "--concurrency", "2")

        async def started() -> bool:
            return "worker_started" in processes.output()

        await until(started, 15, "worker started", processes)
        assert [m.version for m in await migrations.applied(store)] == [
            m.version for m in migrations.discover()
        ]
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 15) == 0, processes.output()
    started_line = next(line for line in processes.output().splitlines() if "worker_started" in line)
    assert "summary" in started_line
    assert "worker_idle" not in processes.output()
