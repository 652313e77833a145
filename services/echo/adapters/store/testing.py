"""Test support: the PostgreSQL that tests use and throwaway tenant schemas (never a mock).

`ECHO_TEST_DATABASE_URL` names the server (default: the local one at 127.0.0.1:5432, database
`test`). Each test takes a fresh tenant (`unique_tenant`) whose schema is dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from echo.adapters.store import migrations, pool
from echo.config import tenancy

__all__ = ["drop_schema", "temporary_store", "test_dsn", "unique_tenant", "unreachable", "wait_for_listeners"]

DEFAULT_TEST_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def test_dsn() -> str:
    return os.environ.get("ECHO_TEST_DATABASE_URL", DEFAULT_TEST_DSN)


test_dsn.__test__ = False  # type: ignore[attr-defined]  # not a test, whatever its name


async def unreachable(dsn: str, connect_seconds: float = 3.0) -> str | None:
    """None when a connection to `dsn` works, else why not."""
    try:
        connection = await asyncpg.connect(dsn, timeout=connect_seconds)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    await connection.close()
    return None


def unique_tenant(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def drop_schema(dsn: str, schema: str) -> None:
    connection = await asyncpg.connect(dsn, timeout=5)
    try:
        await connection.execute(f"DROP SCHEMA IF EXISTS {tenancy.quote_identifier(schema)} CASCADE")
    finally:
        await connection.close()


@asynccontextmanager
async def temporary_store(
    dsn: str, tenant: str | None = None, *, migrate: bool = True, **options: Any
) -> AsyncIterator[pool.Store]:
    """A store on a fresh tenant schema (migrated unless told not to), dropped on exit."""
    schema = tenancy.schema_for(tenant or unique_tenant())
    options.setdefault("max_size", 8)
    store = await pool.Store.open(dsn, schema=schema, **options)
    try:
        if migrate:
            await migrations.migrate(store)
        yield store
    finally:
        await store.close()
        await drop_schema(dsn, schema)


async def wait_for_listeners(store: pool.Store, channel: str, count: int, within: float = 15.0) -> None:
    """Until `count` sessions LISTEN on `channel` (how tests know workers are up)."""
    deadline = time.monotonic() + within
    query = "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'idle'"
    while True:
        found = await store.fetchval(query, f'LISTEN "{channel}"')
        if found >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{found} of {count} listeners on {channel} after {within} s")
        await asyncio.sleep(0.05)
