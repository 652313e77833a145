"""Migrations: idempotent, safe from concurrent processes, step by step equal to a fresh install."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from echo.adapters.store import errors, migrations, testing
from echo.adapters.store.pool import Store
from echo.config import tenancy
from echo.entrypoints import cli


@pytest.fixture
async def bare(dsn: str) -> AsyncIterator[Store]:
    """A store on a tenant schema that does not exist yet."""
    async with testing.temporary_store(dsn, migrate=False) as store:
        yield store


async def _snapshot(store: Store) -> dict[str, list[tuple[object, ...]]]:
    """The shape of a schema (columns, indexes, constraints, triggers, functions), schema name blanked."""
    schema = store.schema

    def blank(rows: list) -> list[tuple[object, ...]]:
        return sorted(tuple(str(v).replace(schema, "<schema>") for v in row.values()) for row in rows)

    return {
        "columns": blank(
            await store.fetch(
                """SELECT table_name, column_name, ordinal_position, data_type, is_nullable,
                          column_default, is_identity
                   FROM information_schema.columns WHERE table_schema = $1""",
                schema,
            )
        ),
        "indexes": blank(
            await store.fetch("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1", schema)
        ),
        "constraints": blank(
            await store.fetch(
                """SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
                   FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1""",
                schema,
            )
        ),
        "triggers": blank(
            await store.fetch(
                """SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t
                   JOIN pg_class r ON r.oid = t.tgrelid JOIN pg_namespace n ON n.oid = r.relnamespace
                   WHERE n.nspname = $1 AND NOT t.tgisinternal""",
                schema,
            )
        ),
        "functions": blank(
            await store.fetch(
                """SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                   WHERE n.nspname = $1""",
                schema,
            )
        ),
    }


async def test_migrating_twice_applies_once(bare: Store) -> None:
    known = migrations.discover()
    assert [m.version for m in known] == list(range(1, len(known) + 1))
    first = await migrations.migrate(bare)
    assert first == list(known)
    assert await migrations.migrate(bare) == []
    recorded = await migrations.applied(bare)
    assert [(r.version, r.name, r.checksum) for r in recorded] == [
        (m.version, m.name, m.checksum) for m in known
    ]


async def test_step_by_step_equals_fresh_install(dsn: str) -> None:
    async with (
        testing.temporary_store(dsn, migrate=False) as stepwise,
        testing.temporary_store(dsn, migrate=False) as fresh,
    ):
        for migration in migrations.discover():
            applied = await migrations.migrate(stepwise, target=migration.version)
            assert [m.name for m in applied] == [migration.name]
        await migrations.migrate(fresh)
        stepwise_shape, fresh_shape = await _snapshot(stepwise), await _snapshot(fresh)
        assert stepwise_shape == fresh_shape
        assert any(row[0] == "jobs" for row in fresh_shape["columns"])
        assert fresh_shape["triggers"]
        assert fresh_shape["functions"]
        assert fresh_shape["indexes"]


async def _advisory_waiters(store: Store) -> int:
    query = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    return await store.fetchval(query)


async def test_concurrent_migrators_in_two_pools_and_a_process_apply_each_migration_once(dsn: str) -> None:
    tenant = testing.unique_tenant()
    schema = tenancy.schema_for(tenant)
    lock = migrations._queries()["lock"]
    pools = [await Store.open(dsn, schema=schema, max_size=2) for _ in range(3)]
    gate, first, second = pools
    try:
        async with gate.dedicated() as holder:
            await holder.fetchval(lock, schema)  # every migrator now waits on this lock
            env = {**os.environ, "ECHO_DATABASE_URL": dsn, "ECHO_TENANT": tenant}
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "echo.entrypoints.cli", "migrate", env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
            in_process = asyncio.gather(migrations.migrate(first), migrations.migrate(second))
            deadline = time.monotonic() + 15
            while await _advisory_waiters(gate) < 3:
                assert time.monotonic() < deadline, "the three migrators never queued on the lock"
                assert process.returncode is None
                await asyncio.sleep(0.05)
        results = await asyncio.wait_for(in_process, 15)  # the holder's connection closed: lock free
        output = (await asyncio.wait_for(process.communicate(), 15))[0].decode()
        assert process.returncode == 0, output
        names = [m.name for m in results[0] + results[1]]
        names += [
            line.removeprefix("applied ") for line in output.splitlines() if line.startswith("applied ")
        ]
        assert sorted(names) == [m.name for m in migrations.discover()]
        assert [r.version for r in await migrations.applied(first)] == [
            m.version for m in migrations.discover()
        ]
    finally:
        for store in pools:
            await store.close()
        await testing.drop_schema(dsn, schema)


async def test_an_edited_migration_is_refused(bare: Store) -> None:
    original = [migrations.Migration(1, "0001_t", "CREATE TABLE t (a integer);")]
    await migrations.migrate(bare, migrations=original)
    edited = [migrations.Migration(1, "0001_t", "CREATE TABLE t (a integer, b integer);")]
    with pytest.raises(errors.MigrationError, match="0001_t was changed after it was applied"):
        await migrations.migrate(bare, migrations=edited)


async def test_a_failing_migration_leaves_nothing_and_frees_the_lock(bare: Store) -> None:
    good = migrations.Migration(1, "0001_t", "CREATE TABLE t (a integer);")
    bad = migrations.Migration(2, "0002_bad", "CREATE TABLE u (a integer); SELECT 1 / 0;")
    with pytest.raises(errors.MigrationError, match="0002_bad failed") as caught:
        await migrations.migrate(bare, migrations=[good, bad])
    assert caught.value.sqlstate == "22012"
    assert [r.name for r in await migrations.applied(bare)] == ["0001_t"]
    assert await bare.fetchval("SELECT to_regclass('u')") is None
    fixed = migrations.Migration(2, "0002_fixed", "CREATE TABLE u (a integer);")
    applied = await asyncio.wait_for(migrations.migrate(bare, migrations=[good, fixed]), 5)
    assert [m.name for m in applied] == ["0002_fixed"]


async def test_applied_is_empty_before_the_first_migration(bare: Store) -> None:
    assert await migrations.applied(bare) == []


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["01_short.sql"], "NNNN_lowercase_label.sql"),
        (["0001_Upper.sql"], "NNNN_lowercase_label.sql"),
        (["0001_a.sql", "0001_b.sql"], "version 1 is also"),
        (["0001_a.sql", "0003_c.sql"], "migration 0002 is missing"),
        (["0002_b.sql"], "migration 0001 is missing"),
    ],
)
def test_bad_migration_directories_are_refused(tmp_path: Path, files: list[str], message: str) -> None:
    for name in files:
        (tmp_path / name).write_text("SELECT 1;")
    (tmp_path / "README.md").write_text("not a migration")
    with pytest.raises(errors.MigrationError, match=message):
        migrations.discover(tmp_path)


def test_echoctl_migrate_prints_what_it_applied(dsn: str) -> None:
    tenant = testing.unique_tenant()
    env = {"ECHO_DATABASE_URL": dsn, "ECHO_TENANT": tenant}
    try:
        first = CliRunner().invoke(cli.main, ["migrate"], env=env)
        assert first.exit_code == 0, first.output
        schema = tenancy.schema_for(tenant)
        latest = migrations.discover()[-1].version
        assert first.stdout.splitlines() == [
            *(f"applied {m.name}" for m in migrations.discover()),
            f"schema {schema} is at version {latest}",
        ]
        again = CliRunner().invoke(cli.main, ["migrate"], env=env)
        assert again.exit_code == 0, again.output
        assert again.stdout.strip() == f"schema {schema} is at version {latest} (nothing to apply)"
    finally:
        asyncio.run(testing.drop_schema(dsn, tenancy.schema_for(tenant)))


def test_echoctl_migrate_explains_an_unreachable_server() -> None:
    env = {"ECHO_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x", "ECHO_DATABASE_TIMEOUT_SECONDS": "2"}
    result = CliRunner().invoke(cli.main, ["migrate"], env=env)
    assert result.exit_code == 1
    assert "migration failed" in result.output
    bad = CliRunner().invoke(cli.main, ["migrate"], env={"ECHO_TENANT": "Bad"})
    assert bad.exit_code == 1
    assert "ECHO_TENANT" in bad.output
