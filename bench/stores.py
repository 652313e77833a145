"""What the store-backed benchmarks share: a PostgreSQL (ECHO_DATABASE_URL, else an embedded one) and
a throwaway tenant schema on it, migrated, dropped afterwards."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from echo.adapters.store import embedded, migrations, pool
from echo.config import tenancy

__all__ = ["database", "tenant_store"]


@contextlib.asynccontextmanager
async def database(workdir: Path) -> AsyncIterator[str]:
    dsn = os.environ.get("ECHO_DATABASE_URL")
    if dsn:
        yield dsn
        return
    server = embedded.EmbeddedPostgres(workdir / "postgres")
    try:
        yield await server.start()
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def tenant_store(
    dsn: str, tenant: str, *, application: str = "echo-bench"
) -> AsyncIterator[pool.Store]:
    schema = tenancy.schema_for(tenant)
    store = await pool.Store.open(dsn, schema=schema, max_size=8, application_name=application)
    try:
        await migrations.migrate(store)
        yield store
    finally:
        await store.execute(f"DROP SCHEMA IF EXISTS {tenancy.quote_identifier(schema)} CASCADE")
        await store.close()
