"""Test support: the PostgreSQL that tests use and throwaway tenant schemas (never a mock).

`ECHO_TEST_DATABASE_URL` names the server (default: the local one at 127.0.0.1:5432, database
`test`). A test that needs a migrated schema takes one from this process's reusable schemas
(`migrated_tenant`, `temporary_store`): migrated once, the first time one is needed; when the test
gives it back, emptied (every row deleted, every sequence restarted) and renamed (the next test's
tenant is a new name, as a fresh schema's is), which leaves it as a fresh migration would. One
whose structure a test changed (a table created, a function replaced) is dropped instead of reused.
Two tests at once (two stores, two processes) never share one; `drop_reusable` drops them all at
the end of a run. A test of the migrations themselves takes an unmigrated schema (`migrate=False`,
`unique_tenant`), dropped afterwards.
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

__all__ = [
    "drop_reusable",
    "drop_schema",
    "migrated_tenant",
    "temporary_store",
    "test_dsn",
    "unique_tenant",
    "unreachable",
    "wait_for_listeners",
]

DEFAULT_TEST_DSN = "postgresql://postgres@127.0.0.1:5432/test"

# What a schema holds, independent of its name and its rows: relations and their columns, indexes,
# constraints, functions and triggers (`structure`, an md5 that must read the same when a reusable
# schema is given back); and what emptying it takes: its tables and its sequences' start values.
_CONTENTS = r"""
WITH relations AS MATERIALIZED (
    SELECT oid, relname, relkind FROM pg_class WHERE relnamespace = $1::regnamespace
), entries AS (
    SELECT 'rel ' || relkind::text || ' ' || relname AS entry FROM relations
    UNION ALL
    SELECT 'col ' || r.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           || ' ' || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
      FROM relations r
      JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    UNION ALL
    SELECT 'idx ' || relname || ' ' || replace(pg_get_indexdef(oid), $2, '')
      FROM relations WHERE relkind = 'i'
    UNION ALL
    SELECT 'con ' || r.relname || ' ' || c.conname || ' ' || replace(pg_get_constraintdef(c.oid), $2, '')
      FROM relations r JOIN pg_constraint c ON c.conrelid = r.oid
    UNION ALL
    SELECT 'fn ' || proname || '(' || pg_get_function_identity_arguments(oid) || ') ' || md5(prosrc)
      FROM pg_proc WHERE pronamespace = $1::regnamespace
    UNION ALL
    SELECT 'tg ' || r.relname || ' ' || t.tgname || ' ' || t.tgenabled::text
      FROM relations r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
)
SELECT
    (SELECT md5(coalesce(string_agg(entry, E'\n' ORDER BY entry), '')) FROM entries) AS structure,
    (SELECT coalesce(array_agg(relname::text ORDER BY relname), '{}') FROM relations
      WHERE relkind IN ('r', 'p') AND relname <> 'schema_migrations') AS tables,
    (SELECT coalesce(array_agg(r.relname::text ORDER BY r.relname), '{}')
       FROM relations r JOIN pg_sequence s ON s.seqrelid = r.oid) AS sequences,
    (SELECT coalesce(array_agg(s.seqstart ORDER BY r.relname), '{}')
       FROM relations r JOIN pg_sequence s ON s.seqrelid = r.oid) AS starts
"""


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


class _Reusable:
    """The migrated tenants of this process on one server that no test holds now."""

    def __init__(self) -> None:
        self.free: list[str] = []
        self.made: set[str] = set()
        self.structure: str | None = None  # of a freshly migrated schema (the same for every name)


_REUSABLE: dict[str, _Reusable] = {}


async def _contents(connection: asyncpg.Connection, schema: str) -> asyncpg.Record:
    found: asyncpg.Record = await connection.fetchrow(_CONTENTS, schema, schema + ".")  # names qualified
    return found


async def _migrated(dsn: str, reusable: _Reusable) -> str:
    tenant = unique_tenant()
    schema = tenancy.schema_for(tenant)
    store = await pool.Store.open(dsn, schema=schema, min_size=1, max_size=1)
    try:
        await migrations.migrate(store)
        async with store.connection() as connection:
            structure = (await _contents(connection.raw, schema))["structure"]
    except BaseException:
        await store.close()
        await drop_schema(dsn, schema)
        raise
    await store.close()
    reusable.structure = reusable.structure or structure
    reusable.made.add(tenant)
    return tenant


async def _emptied(dsn: str, reusable: _Reusable, tenant: str) -> str | None:
    """Empty the tenant's tables and rename its schema to a new tenant's, when its structure is still
    a fresh migration's: the new tenant, else None. A new name, since caches of the process are keyed
    by schema (the shadow's, for one) and a fresh schema never has their entries."""
    schema = tenancy.schema_for(tenant)
    connection = await asyncpg.connect(dsn, timeout=5)
    try:
        contents = await _contents(connection, schema)
        if contents["structure"] != reusable.structure:
            return None
        # DELETE, not TRUNCATE (ten times slower on small tables), with triggers (foreign keys
        # included) off: every row goes, in any order; each sequence starts again (setval: identity
        # columns' sequences refuse ALTER SEQUENCE). One simple query: one transaction.
        quoted = tenancy.quote_identifier(schema)
        renamed = unique_tenant()
        statements = ["SET LOCAL lock_timeout = '10s'", "SET LOCAL session_replication_role = replica"]
        statements += [
            f"DELETE FROM {quoted}.{tenancy.quote_identifier(name)}" for name in contents["tables"]
        ]
        statements += [
            f"SELECT setval('{quoted}.{tenancy.quote_identifier(name)}', {start}, false)"
            for name, start in zip(contents["sequences"], contents["starts"], strict=True)
        ]
        statements.append(
            f"ALTER SCHEMA {quoted} RENAME TO {tenancy.quote_identifier(tenancy.schema_for(renamed))}"
        )
        await connection.execute(";".join(statements))
        return renamed
    finally:
        await connection.close()


@asynccontextmanager
async def migrated_tenant(dsn: str) -> AsyncIterator[str]:
    """A tenant whose schema holds every migration and no rows, the caller's alone until it exits; a
    name no earlier caller had."""
    reusable = _REUSABLE.setdefault(dsn, _Reusable())
    tenant = reusable.free.pop() if reusable.free else await _migrated(dsn, reusable)
    renamed: str | None = None
    try:
        yield tenant
        renamed = await _emptied(dsn, reusable, tenant)
    finally:
        reusable.made.discard(tenant)
        if renamed is not None:
            reusable.made.add(renamed)
            reusable.free.append(renamed)
        else:
            await drop_schema(dsn, tenancy.schema_for(tenant))


async def drop_reusable() -> None:
    """Drop every reusable schema this process made (the end of a test run)."""
    for dsn, reusable in list(_REUSABLE.items()):
        for tenant in sorted(reusable.made):
            await drop_schema(dsn, tenancy.schema_for(tenant))
        del _REUSABLE[dsn]


@asynccontextmanager
async def temporary_store(
    dsn: str, tenant: str | None = None, *, migrate: bool = True, **options: Any
) -> AsyncIterator[pool.Store]:
    """A store on a tenant schema of its own: a reusable migrated one (`migrated_tenant`) by default;
    a fresh one when told `migrate=False` or given a `tenant` (migrated unless told not to), dropped on
    exit."""
    options.setdefault("max_size", 8)
    if tenant is None and migrate:
        async with migrated_tenant(dsn) as reused:
            store = await pool.Store.open(dsn, schema=tenancy.schema_for(reused), **options)
            try:
                yield store
            finally:
                await store.close()
        return
    schema = tenancy.schema_for(tenant or unique_tenant())
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
