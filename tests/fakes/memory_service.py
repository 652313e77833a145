"""echo-hooks as `echoctl serve` runs it, for the memory tests: the real runtime (`open_runtime`) on a
migrated tenant schema of the test PostgreSQL (one of the run's reusable ones: the runtime's own
migration finds nothing to do), the packaged MiniLM embedder, Qdrant local mode in a temporary
directory and the in-process worker running `distill` jobs; the offline LLM unless told otherwise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fakes.eventually import eventually
from fakes.hooks_service import outlet_body
from fakes.live_server import LiveServer
from fakes.shared_data import ADMIN_KEY, API_KEY

from echo.adapters.store import pool, testing
from echo.config import tenancy
from echo.config.settings import Settings
from echo.entrypoints import runtime
from echo.entrypoints.http import create_app
from echo.support import supervision

__all__ = ["MemoryService", "memory_service", "outlet_body"]


@dataclass
class MemoryService:
    """A running service: `http` its client with the hooks' key, `admin` its client with the admin key
    (the memory-management API: `/memories…`, `/users/…`, compaction), `store` a connection to its
    schema."""

    http: httpx.AsyncClient
    store: pool.Store
    settings: Settings
    supervisor: supervision.Supervisor
    admin: httpx.AsyncClient

    async def hook(self, filter_id: str, phase: str, body: Mapping[str, Any], user_id: str) -> Any:
        answer = await self.http.post(
            f"/{filter_id}/filter/{phase}",
            json={"body": dict(body), "user": {"id": user_id, "name": user_id}},
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    async def drained(self, within: float = 60.0) -> None:
        """Wait until no job is pending or running (the service's own in-process worker runs them,
        woken by NOTIFY)."""

        async def idle() -> bool:
            return not await self.store.fetchval(
                "SELECT count(*) FROM jobs WHERE state IN ('pending', 'running')"
            )

        await eventually(idle, within=within, what="jobs drained")

    async def jobs(self) -> list[Any]:
        return await self.store.fetch(
            "SELECT kind, state, payload, idempotency_key, attempts, last_error FROM jobs ORDER BY id"
        )


@asynccontextmanager
async def memory_service(
    dsn: str,
    tmp_path: Path,
    *,
    valves: Mapping[str, Any] | None = None,
    wait_ready: bool = True,
    **settings: Any,
) -> AsyncIterator[MemoryService]:
    async with testing.migrated_tenant(dsn) as tenant:
        options: dict[str, Any] = {
            "data_dir": tmp_path / "echo",
            "database_url": dsn,
            "tenant": tenant,
            "inprocess_worker": True,
            "qdrant_path": tmp_path / "qdrant",
            "api_key": API_KEY,
            "admin_key": ADMIN_KEY,
            "llm_provider": "offline",
            "job_poll_seconds": 0.2,
            **settings,
        }
        config = Settings(**options)
        supervisor = supervision.Supervisor()
        app = create_app(
            config,
            backends=lambda s: runtime.open_runtime(s, supervisor=supervisor),
            supervisor=supervisor,
        )
        schema = tenancy.schema_for(tenant)
        with LiveServer(app, name="echo-hooks") as live:
            headers = {"Authorization": f"Bearer {API_KEY}"}
            admin_headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
            async with (
                httpx.AsyncClient(base_url=live.url, headers=headers, timeout=30) as http,
                httpx.AsyncClient(base_url=live.url, headers=admin_headers, timeout=30) as admin,
                await_store(dsn, schema) as store,
            ):

                async def ready() -> bool:
                    return (await http.get("/readyz")).status_code == 200

                if wait_ready:
                    await eventually(ready, within=60, what="service ready")
                if valves:
                    updated = await http.post("/echo_memory/valves/update", json=dict(valves))
                    assert updated.status_code == 200, updated.text
                yield MemoryService(http, store, config, supervisor, admin)


@asynccontextmanager
async def await_store(dsn: str, schema: str) -> AsyncIterator[pool.Store]:
    store = await pool.Store.open(dsn, schema=schema, max_size=2)
    try:
        yield store
    finally:
        await store.close()
