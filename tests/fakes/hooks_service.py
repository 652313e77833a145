"""echo-hooks, in process, over a tenant schema of the test PostgreSQL, with chosen valves; the job drain."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fakes.shared_data import API_KEY

from echo.adapters.store.pool import Store
from echo.capabilities import backends as capability_backends
from echo.config.settings import Settings
from echo.entrypoints.http import create_app
from echo.ports import backends as backends_port
from echo.queue.registry import Registry
from echo.queue.worker import Worker

__all__ = ["StoreBackends", "exchange", "fence_of", "run_jobs", "serving", "store_backends"]


@dataclass
class StoreBackends:
    """The backends `create_app` gets: the store only (no embedder or vectors needed)."""

    store: Store

    def backends(self) -> backends_port.Backends:
        return backends_port.Backends(store=capability_backends.on_store(self.store))

    async def readiness(self) -> dict[str, dict[str, Any]]:
        return {"store": {"ok": True}}


def store_backends(dsn: str, schema: str, *, broken: bool = False) -> Callable[[Settings], Any]:
    """Opens `schema` for the app's lifetime; `broken`: closed at once, as a server that went away."""

    @asynccontextmanager
    async def open_backends(settings: Settings) -> AsyncIterator[StoreBackends]:
        store = await Store.open(dsn, schema=schema, max_size=4)
        if broken:
            await store.close()
        try:
            yield StoreBackends(store)
        finally:
            await store.close()

    return open_backends


@asynccontextmanager
async def serving(
    settings: Settings,
    dsn: str,
    schema: str,
    *,
    compression_valves: Mapping[str, Any],
    broken: bool = False,
    client_timeout_s: float = 30,
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the service, authenticated, after `echo_compression`'s valves were set: the whole
    app (its lifespan, middleware and routes) in this process and on this loop, called through
    httpx's ASGI transport; no socket or server thread, since what these tests check is what the
    hooks do, not HTTP (tests of the HTTP layer serve it with `LiveServer`)."""
    app = create_app(settings, backends=store_backends(dsn, schema, broken=broken))
    transport = httpx.ASGITransport(app, raise_app_exceptions=False)  # a 500, as a server answers
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:9099", headers=headers, timeout=client_timeout_s
        ) as http,
    ):
        updated = await http.post("/echo_compression/valves/update", json=dict(compression_valves))
        assert updated.status_code == 200, updated.text
        yield http


def exchange(i: int, topic: str) -> list[dict[str, Any]]:
    """Turn `i` of a test chat as an outlet sends it (flat, with ids): a question and a factual answer."""
    return [
        {
            "id": f"u{i}",
            "role": "user",
            "content": f"Question {i}: tell me more about {topic}. I need details for step {i}. "
            "Please keep the earlier constraints in mind and list the options.",
        },
        {
            "id": f"a{i}",
            "role": "assistant",
            "content": f"Answer {i} about {topic}. The first option is careful planning for step {i}. "
            f"The second option costs {i * 10} euros and takes {i + 2} days. "
            "The third option keeps every constraint you gave. I recommend the first one.",
        },
    ]


def fence_of(body: Mapping[str, Any]) -> str | None:
    """The one fenced summary an inlet answer holds, or None."""
    found = [m["content"] for m in body["messages"] if str(m.get("content", "")).startswith("<echo_summary")]
    assert len(found) <= 1
    return found[0] if found else None


# Retries of the registry's kinds brought forward; the answer counts those still pending (due ones
# included: a retry whose short backoff has just elapsed is pending and due, not brought forward).
_RETRIES_NOW = """
WITH due AS (
    UPDATE jobs SET run_after = now() WHERE state = 'pending' AND run_after > now() AND kind = ANY($1)
)
SELECT count(*) FROM jobs WHERE state = 'pending' AND kind = ANY($1)
"""


async def run_jobs(store: Store, registry: Registry, within: float = 20.0) -> None:
    """Run every job to its outcome (`Worker.run_until_idle`: no polling, at most `within` seconds):
    the due ones, those their handlers enqueue, and retries, whose delay the queue's clock skips
    (`run_after` brought forward, then another drain); then no job may be pending or running."""
    worker = Worker(store, registry, lease_seconds=5, poll_seconds=0.2, grace_seconds=1, metrics_seconds=60)
    try:
        async with asyncio.timeout(within):
            await worker.run_until_idle()
            kinds = [spec.kind for spec in registry]
            while await store.fetchval(_RETRIES_NOW, kinds):
                await worker.run_until_idle()
        left = await store.fetch(
            "SELECT id, kind, state, last_error FROM jobs WHERE state IN ('pending', 'running')"
        )
        assert not left, f"jobs left after the drain: {[dict(job) for job in left]}"
    finally:
        await asyncio.wait_for(worker.stop(), 10)
        for spec in registry:  # the LLM client of the summary handler
            close = getattr(spec.handler, "aclose", None)
            if close is not None:
                await close()


def outlet_body(messages: list[dict[str, Any]], chat_id: str = "c1") -> dict[str, Any]:
    """An outlet body as Open WebUI sends it: flat, the chat id, the assistant message's id."""
    return {
        "model": "gpt-x",
        "messages": messages,
        "chat_id": chat_id,
        "session_id": "s1",
        "id": messages[-1]["id"],
    }
