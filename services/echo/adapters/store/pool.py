"""The store: an asyncpg pool whose every connection has `search_path` set to one tenant schema.

Every call goes through `errors.translate_errors`, so nothing outside this package sees an asyncpg
exception. Queries are `queries.Query` objects (named SQL from `.sql` files) or plain strings.

What is sent is made storable here, for every caller (`echo.domain.text`): NUL and lone surrogates, which
PostgreSQL refuses in text and JSON, become U+FFFD in text parameters (arrays of text included) and
in the JSON codec of json and jsonb (dict keys included). A lookup by a text that held one finds what
was stored with it, since its parameter is made storable the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import asyncpg

from echo.adapters.store import errors, queries
from echo.config import tenancy
from echo.domain import text

__all__ = ["Connection", "Listener", "Record", "Store"]

Record: TypeAlias = asyncpg.Record
SQL = queries.Query | str


def _sql(query: SQL) -> str:
    return query.sql if isinstance(query, queries.Query) else query


def _storable(value: Any) -> Any:
    """A parameter with its text made storable: a str, or a list or tuple of them (an array, a row),
    nested; anything else as it is (dicts go to the JSON codec, which fixes its own text)."""
    if isinstance(value, str):
        return text.storable(value)
    if not isinstance(value, list | tuple) or not value:
        return value
    try:
        joined = "".join(value)
    except TypeError:  # not only str
        if not any(issubclass(kind, str | list | tuple) for kind in set(map(type, value))):
            return value  # e.g. the dicts of a jsonb[]: the codec's
        fixed = [_storable(item) for item in value]
    else:
        if text.is_storable(joined):  # an array of clean text: one scan
            return value
        fixed = [text.storable(item) for item in value]
    return fixed if isinstance(value, list) else tuple(fixed)


def _storable_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    for index, arg in enumerate(args):
        fixed = _storable(arg)
        if fixed is not arg:
            return (*args[:index], fixed, *(_storable(rest) for rest in args[index + 1 :]))
    return args


async def _setup_connection(connection: asyncpg.Connection) -> None:
    # JSON(B) in and out as Python values; the server normalises JSONB anyway. `text.dumps` is
    # json.dumps (characters as they are, not ASCII escapes) with NUL and lone surrogates replaced.
    for type_name in ("jsonb", "json"):
        await connection.set_type_codec(
            type_name, encoder=text.dumps, decoder=json.loads, schema="pg_catalog"
        )


# Pooled connections that took a session advisory lock (Connection.keep_session_state): released
# when the pool takes them back. Weak, so a terminated connection leaves no entry.
_SESSION_STATE: weakref.WeakSet[asyncpg.Connection] = weakref.WeakSet()


async def _reset_connection(connection: asyncpg.Connection) -> None:
    """The pool's reset of a connection it takes back, after asyncpg's own (which rolls back an
    open transaction). asyncpg's default adds a round trip to every release (RESET ALL, CLOSE ALL,
    UNLISTEN *, pg_advisory_unlock_all): about 0.3 ms on each hook's store call. ECHO's pooled
    statements leave no session state (no SET, cursor or LISTEN outside transactions: settings are
    connect options, LISTEN has its own connection) but session advisory locks, and the code that
    takes one says so."""
    if connection in _SESSION_STATE:
        _SESSION_STATE.discard(connection)
        await connection.execute("SELECT pg_advisory_unlock_all()")


class Connection:
    """One connection of the store, possibly inside a transaction; driver errors translated."""

    def __init__(self, raw: asyncpg.Connection) -> None:
        self.raw = raw

    def keep_session_state(self) -> None:
        """Say that this pooled connection takes session advisory locks: the pool releases them all
        when it takes the connection back, whatever happened to the block (a cancelled unlock)."""
        underlying = getattr(self.raw, "_con", None) or self.raw  # a pool proxy's connection
        _SESSION_STATE.add(underlying)

    async def execute(self, query: SQL, *args: Any) -> str:
        with errors.translate_errors():
            return await self.raw.execute(_sql(query), *_storable_args(args))

    async def fetch(self, query: SQL, *args: Any) -> list[Record]:
        with errors.translate_errors():
            return await self.raw.fetch(_sql(query), *_storable_args(args))

    async def fetchrow(self, query: SQL, *args: Any) -> Record | None:
        with errors.translate_errors():
            return await self.raw.fetchrow(_sql(query), *_storable_args(args))

    async def fetchval(self, query: SQL, *args: Any) -> Any:
        with errors.translate_errors():
            return await self.raw.fetchval(_sql(query), *_storable_args(args))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A transaction on this connection (a savepoint when one is already open).

        Only the driver's own errors are translated: what the block raises passes through as is.
        """
        transaction = self.raw.transaction()
        with errors.translate_errors():
            await transaction.start()
        try:
            yield self
        except BaseException:
            if not self.raw.is_closed():
                with errors.translate_errors():
                    await transaction.rollback()
            raise
        with errors.translate_errors():
            await transaction.commit()

    @property
    def in_transaction(self) -> bool:
        return self.raw.is_in_transaction()


class Listener:
    """A dedicated connection LISTENing on one channel; `alive` turns false when it is lost."""

    def __init__(self, raw: asyncpg.Connection, channel: str) -> None:
        self._raw = raw
        self.channel = channel
        self._closed = False

    @property
    def alive(self) -> bool:
        return not self._closed and not self._raw.is_closed()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._raw.close(timeout=2)
        except Exception:
            self._raw.terminate()


class Store:
    """The asyncpg pool of one tenant schema. Build it with `await Store.open(...)`."""

    def __init__(self, pool: asyncpg.Pool, *, dsn: str, schema: str, connect_options: dict[str, Any]) -> None:
        self._pool = pool
        self.dsn = dsn
        self.schema = schema
        self._connect_options = connect_options

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        schema: str,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
        command_timeout: float | None = 60.0,
        application_name: str = "echo",
    ) -> Store:
        """Connect a pool to `dsn` whose connections all resolve names in `schema` (and pg_catalog)."""
        tenancy.quote_identifier(schema)  # refuse anything but a plain identifier
        options: dict[str, Any] = {
            "server_settings": {"search_path": schema, "application_name": application_name},
            "timeout": connect_timeout,
            "command_timeout": command_timeout,
        }
        with errors.translate_errors():
            pool = await asyncpg.create_pool(
                dsn,
                min_size=min_size,
                max_size=max_size,
                init=_setup_connection,
                reset=_reset_connection,
                **options,
            )
        return cls(pool, dsn=dsn, schema=schema, connect_options=options)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """A connection from the pool for several statements (autocommit unless you open a transaction)."""
        async with contextlib.AsyncExitStack() as stack:
            with errors.translate_errors():
                acquiring = self._pool.acquire(timeout=self._connect_options["timeout"])
                raw = await stack.enter_async_context(acquiring)
            yield Connection(raw)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A connection in a transaction: committed when the block ends, rolled back on an exception."""
        async with self.connection() as connection, connection.transaction():
            yield connection

    async def execute(self, query: SQL, *args: Any) -> str:
        async with self.connection() as connection:
            return await connection.execute(query, *args)

    async def fetch(self, query: SQL, *args: Any) -> list[Record]:
        async with self.connection() as connection:
            return await connection.fetch(query, *args)

    async def fetchrow(self, query: SQL, *args: Any) -> Record | None:
        async with self.connection() as connection:
            return await connection.fetchrow(query, *args)

    async def fetchval(self, query: SQL, *args: Any) -> Any:
        async with self.connection() as connection:
            return await connection.fetchval(query, *args)

    @asynccontextmanager
    async def dedicated(self) -> AsyncIterator[Connection]:
        """A connection of its own, outside the pool and without statement timeout (migrations)."""
        options = {**self._connect_options, "command_timeout": None}
        with errors.translate_errors():
            raw = await asyncpg.connect(self.dsn, **options)
        try:
            with errors.translate_errors():
                await _setup_connection(raw)
            yield Connection(raw)
        finally:
            with contextlib.suppress(Exception):
                await raw.close(timeout=2)
            if not raw.is_closed():
                raw.terminate()

    async def listen(self, channel: str, on_notify: Callable[[str], None]) -> Listener:
        """LISTEN on `channel` on a dedicated connection; `on_notify(payload)` runs in the event loop."""
        with errors.translate_errors():
            raw = await asyncpg.connect(self.dsn, **self._connect_options)
            try:
                await raw.add_listener(channel, lambda _conn, _pid, _channel, payload: on_notify(payload))
            except BaseException:
                raw.terminate()
                raise
        return Listener(raw, channel)

    @property
    def closed(self) -> bool:
        return self._pool.is_closing()

    async def close(self, wait_seconds: float = 10.0) -> None:
        """Close the pool, waiting up to `wait_seconds` for connections in use; idempotent."""
        if self._pool.is_closing():
            return
        try:
            with errors.translate_errors():
                await asyncio.wait_for(self._pool.close(), wait_seconds)
        except errors.TransientStoreError:
            self._pool.terminate()
