"""One HTTP request straight into an ASGI app, with a `receive` the test controls and watches.

What a socket cannot show: whether the app read a byte of the body (`Exchange.reads`) before it
answered, and how much it read before it cut the stream (`Exchange.bytes_read`). The body is given
as chunks (an endless iterator is fine: the app must stop reading).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Exchange", "call"]


@dataclass
class Exchange:
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    reads: int = 0  # `http.request` messages handed to the app
    bytes_read: int = 0

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name.lower()), None)

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    app: Any,
    method: str,
    path: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    chunks: Iterable[bytes] = (),
    root_path: str = "",
) -> Exchange:
    """Send `method path` with `headers` and the body `chunks` (`path` includes `root_path`, the
    prefix a proxy mounts the app under); the app's answer and what it read."""
    url, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": url,
        "raw_path": url.encode(),
        "query_string": query.encode(),
        "root_path": root_path,
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 9099),
        "state": {},
    }
    exchange = Exchange()
    body = iter(chunks)
    pending = next(body, None)
    answered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal pending
        if pending is None:  # the whole body was read: what comes next is the client going away
            await answered.wait()
            return {"type": "http.disconnect"}
        chunk, pending = pending, next(body, None)
        exchange.reads += 1
        exchange.bytes_read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": pending is not None}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            exchange.status = message["status"]
            exchange.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message["headers"]]
        elif message["type"] == "http.response.body":
            exchange.body += message.get("body", b"")
            if not message.get("more_body", False):
                answered.set()

    await asyncio.wait_for(app(scope, receive, send), timeout=30)
    return exchange
