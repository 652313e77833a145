"""The store: PostgreSQL through asyncpg, everywhere (an embedded server when none is configured).

Rules of this package:
- it is an adapter: the only package that imports asyncpg, and no asyncpg error leaves it
  (`errors` translates them into `StoreError`s that say whether a retry may help);
- SQL lives in `.sql` files as named queries (`queries.load`), never in Python strings beyond
  one-line introspection;
- one tenant = one schema (`tenancy.schema_for`), set as `search_path` on every connection, so
  queries never name a schema;
- the schema only changes through a new numbered file in `migrations/`.

Importing this package is cheap (no asyncpg): names are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo.adapters.store.bootstrap import open_store
    from echo.adapters.store.embedded import EmbeddedPostgres
    from echo.adapters.store.errors import (
        ConstraintViolation,
        DataRefused,
        EmbeddedPostgresError,
        MigrationError,
        PermanentStoreError,
        StoreError,
        TransientStoreError,
    )
    from echo.adapters.store.migrations import Migration, applied, migrate
    from echo.adapters.store.pool import Connection, Listener, Store
    from echo.adapters.store.queries import Query
    from echo.config.tenancy import schema_for

__all__ = [
    "Connection",
    "ConstraintViolation",
    "DataRefused",
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "Listener",
    "Migration",
    "MigrationError",
    "PermanentStoreError",
    "Query",
    "Store",
    "StoreError",
    "TransientStoreError",
    "applied",
    "migrate",
    "open_store",
    "schema_for",
]

_HOMES = {
    "open_store": "bootstrap",
    "EmbeddedPostgres": "embedded",
    "Migration": "migrations",
    "applied": "migrations",
    "migrate": "migrations",
    "Connection": "pool",
    "Listener": "pool",
    "Store": "pool",
    "Query": "queries",
    "schema_for": "echo.config.tenancy",
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name) or ("errors" if name in __all__ else None)
    if module is None:
        raise AttributeError(f"module 'echo.adapters.store' has no attribute {name!r}")
    home = module if "." in module else f"echo.adapters.store.{module}"
    return getattr(importlib.import_module(home), name)
