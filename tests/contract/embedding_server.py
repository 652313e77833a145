"""A scripted OpenAI-style ``/embeddings`` server (Starlette, served by a real uvicorn in tests).

It answers with ``FakeEmbedder`` vectors (``data`` in reverse order, each with its ``index``) unless
a scripted step is queued: ``status(429, headers=…)``, ``delay(seconds)``, ``raw(text)``…, one step
per request. It records every request (body, headers, arrival time).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from echo.adapters.embeddings import FakeEmbedder

Step = Callable[[dict[str, Any]], Awaitable[Response | None]]


def status(code: int, body: str = "scripted failure", headers: dict[str, str] | None = None) -> Step:
    async def step(_: dict[str, Any]) -> Response:
        return Response(body, status_code=code, headers=headers)

    return step


def delay(seconds: float) -> Step:
    async def step(_: dict[str, Any]) -> None:
        await asyncio.sleep(seconds)

    return step


def raw(text: str, code: int = 200) -> Step:
    async def step(_: dict[str, Any]) -> Response:
        return Response(text, status_code=code, media_type="application/json")

    return step


def answer(transform: Callable[[dict[str, Any]], Any]) -> Step:
    """Answer ``transform(normal_answer)`` (to break a well-formed answer in one precise way)."""

    async def step(body: dict[str, Any]) -> Response:
        return JSONResponse(transform(_normal(body)))

    return step


@dataclass
class Seen:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float


_FAKE = FakeEmbedder(16)


def _normal(body: dict[str, Any]) -> dict[str, Any]:
    texts = body["input"]
    data = [{"object": "embedding", "index": i, "embedding": _FAKE.vector(t)} for i, t in enumerate(texts)]
    return {
        "object": "list",
        "model": "stub-model",
        "data": data[::-1],
        "usage": {"total_tokens": len(texts)},
    }


@dataclass
class StubEmbeddingServer:
    prefix: str = ""
    script: list[Step] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    keep_requests: bool = True  # False: record nothing (a long fuzzing run sends thousands)

    dimension = 16
    fake = _FAKE

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route(f"{self.prefix}/embeddings", self._embeddings, methods=["POST"])])

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        if self.keep_requests:
            self.seen.append(Seen(body, dict(request.headers), time.monotonic()))
        if self.script:
            response = await self.script.pop(0)(body)
            if response is not None:
                return response
        return JSONResponse(_normal(body))
