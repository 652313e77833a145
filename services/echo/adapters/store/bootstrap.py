"""Open the store a process is configured for: the server at ECHO_DATABASE_URL, else embedded.

The one place where settings become a store; entrypoints (`echoctl serve`, `worker`, `migrate`)
call `open_store(settings)` and pass the store on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from echo.adapters.store import embedded, migrations, pool
from echo.config import tenancy
from echo.config.settings import Settings

__all__ = ["open_store"]

log = structlog.get_logger("echo.store")


@asynccontextmanager
async def open_store(
    settings: Settings, *, migrate: bool | None = None, application_name: str = "echo"
) -> AsyncIterator[pool.Store]:
    """The tenant's store, migrated first unless `migrate` (default `settings.migrate_on_start`) is false.

    Without `database_url`, an embedded PostgreSQL is started under `data_dir/postgres` and stopped
    on exit (when this process is its last user).
    """
    schema = tenancy.schema_for(settings.tenant)
    server: embedded.EmbeddedPostgres | None = None
    dsn = settings.database_url
    if dsn is None:
        server = embedded.EmbeddedPostgres(settings.data_dir / "postgres")
        dsn = await server.start()
        log.info("embedded_postgres_started", data_dir=str(server.data_dir))
    try:
        store = await pool.Store.open(
            dsn,
            schema=schema,
            min_size=1,
            max_size=settings.database_pool_size,
            connect_timeout=settings.database_timeout_seconds,
            application_name=application_name,
        )
        try:
            if migrate if migrate is not None else settings.migrate_on_start:
                await migrations.migrate(store)
            yield store
        finally:
            await store.close()
    finally:
        if server is not None:
            await server.stop()
