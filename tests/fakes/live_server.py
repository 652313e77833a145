"""Serve an ASGI app with a real uvicorn on 127.0.0.1 (or `host`) in a background thread (tests, benches)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

__all__ = ["LiveServer"]


class LiveServer:
    """`with LiveServer(app) as server: httpx.get(server.url + "/healthz")`."""

    def __init__(
        self, app: Any, *, name: str = "live-server", lifespan: str = "on", host: str = "127.0.0.1"
    ) -> None:
        self._app = app
        self.host = host
        self._name = name
        self._lifespan = lifespan
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> LiveServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        config = uvicorn.Config(
            self._app, log_level="warning", access_log=False, lifespan=self._lifespan, log_config=None
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=self._name, daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError(f"{self._name} did not start within {timeout_s} s")
            time.sleep(0.01)
        self._server, self._thread, self.port = server, thread, sock.getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
