"""Versioned migrations of a tenant schema: `migrations/NNNN_name.sql`, applied in order, once.

Rules: a migration is never edited once released (its checksum is recorded and checked); a new
table or column is a new file with the next number; versions are contiguous from 0001. Applying is
safe to repeat and to run from several processes at once: a session `pg_advisory_lock` on the schema
name serialises migrators, and each migration commits with its `schema_migrations` row.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

import structlog

from echo.adapters.store import errors, pool, queries

__all__ = ["AppliedMigration", "Migration", "applied", "discover", "migrate"]

log = structlog.get_logger("echo.store")
_FILE = re.compile(r"^(?P<version>\d{4})_(?P<label>[a-z0-9_]+)\.sql$")


def _queries() -> dict[str, queries.Query]:
    return dict(queries.load("echo.adapters.store", "schema_migrations.sql"))


@dataclass(frozen=True)
class Migration:
    """One migration file: `version` from its number, `name` its file stem."""

    version: int
    name: str
    sql: str = field(repr=False)

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class AppliedMigration:
    version: int
    name: str
    checksum: str
    applied_at: datetime


def discover(directory: Traversable | Path | None = None) -> tuple[Migration, ...]:
    """The migrations of a directory (default: the package's own), checked and sorted by version."""
    folder = (
        directory if directory is not None else resources.files("echo.adapters.store").joinpath("migrations")
    )
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE.match(entry.name)
        if match is None:
            raise errors.MigrationError(f"{entry.name}: a migration file is named NNNN_lowercase_label.sql")
        version = int(match["version"])
        if version in found:
            raise errors.MigrationError(f"{entry.name}: version {version} is also {found[version].name}")
        found[version] = Migration(version, entry.name[:-4], entry.read_text(encoding="utf-8"))
    ordered = tuple(found[version] for version in sorted(found))
    for expected, migration in enumerate(ordered, start=1):
        if migration.version != expected:
            raise errors.MigrationError(f"migration {expected:04d} is missing (next is {migration.name})")
    return ordered


async def applied(store: pool.Store) -> list[AppliedMigration]:
    """The migrations recorded in the tenant schema (empty when the schema does not exist yet)."""
    sql = _queries()
    if not await store.fetchval(sql["schema_exists"], store.schema):
        return []
    async with store.connection() as connection:
        exists = await connection.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
        rows = await connection.fetch(sql["applied_migrations"]) if exists else []
    return [AppliedMigration(r["version"], r["name"], r["checksum"], r["applied_at"]) for r in rows]


async def migrate(
    store: pool.Store, *, target: int | None = None, migrations: Sequence[Migration] | None = None
) -> list[Migration]:
    """Apply the pending migrations up to `target` (default: all); return those applied now."""
    known = tuple(migrations) if migrations is not None else discover()
    sql = _queries()
    done: list[Migration] = []
    async with store.dedicated() as connection:
        await connection.fetchval(sql["lock"], store.schema)
        try:
            await connection.execute(sql["create_schema"].format(schema=store.schema))
            await connection.execute(sql["create_schema_migrations"])
            recorded = {row["version"]: row for row in await connection.fetch(sql["applied_migrations"])}
            for migration in known:
                row = recorded.get(migration.version)
                if row is not None and row["checksum"] != migration.checksum:
                    raise errors.MigrationError(
                        f"{migration.name} was changed after it was applied to {store.schema} "
                        "(write a new migration instead of editing a released one)"
                    )
            newer = sorted(set(recorded) - {m.version for m in known})
            if newer:
                log.warning("unknown_migrations", schema=store.schema, versions=newer)
            for migration in known:
                if migration.version in recorded or (target is not None and migration.version > target):
                    continue
                try:
                    async with connection.transaction():
                        await connection.execute(migration.sql)
                        await connection.execute(
                            sql["record_migration"], migration.version, migration.name, migration.checksum
                        )
                except errors.PermanentStoreError as error:
                    raise errors.MigrationError(
                        f"{migration.name} failed on {store.schema}: {error}", sqlstate=error.sqlstate
                    ) from error
                log.info("migration_applied", migration=migration.name, schema=store.schema)
                done.append(migration)
        finally:
            if not connection.raw.is_closed():
                await connection.fetchval(sql["unlock"], store.schema)
    return done
