"""The store on a real PostgreSQL: tenant schemas on every connection, error translation, named queries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import echo.adapters.store
from echo.adapters.store import errors, queries, testing
from echo.adapters.store.pool import Store
from echo.config import tenancy
from echo.config.settings import Settings
from echo.errors import ConfigError, EchoError


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[Store]:
    async with testing.temporary_store(dsn) as store:
        yield store


async def test_every_pooled_connection_resolves_names_in_the_tenant_schema(store: Store) -> None:
    async def probe() -> tuple[str, str]:
        async with store.connection() as connection:
            await asyncio.sleep(0.05)  # hold it so that the pool opens more connections
            path = await connection.fetchval("SHOW search_path")
            where = await connection.fetchval("SELECT to_regclass('jobs')::text")
            return path, where

    seen = await asyncio.gather(*(probe() for _ in range(8)))
    assert set(seen) == {(store.schema, "jobs")}
    async with store.connection() as connection:  # a RESET by the pool does not lose it
        await connection.execute("RESET ALL")
        assert await connection.fetchval("SHOW search_path") == store.schema


async def test_tenants_never_see_each_other(dsn: str) -> None:
    async with testing.temporary_store(dsn) as first, testing.temporary_store(dsn) as second:
        await first.execute("INSERT INTO jobs (kind) VALUES ('summary')")
        assert await first.fetchval("SELECT count(*) FROM jobs") == 1
        assert await second.fetchval("SELECT count(*) FROM jobs") == 0
        assert first.schema != second.schema


async def test_jsonb_round_trips_as_python_values(store: Store) -> None:
    payload = {"chat_id": "c1", "hashes": ["a", "b"], "n": 3, "nested": {"ok": True}, "text": "été 夏"}
    job_id = await store.fetchval(
        "INSERT INTO jobs (kind, payload) VALUES ('summary', $1) RETURNING id", payload
    )
    assert await store.fetchval("SELECT payload FROM jobs WHERE id = $1", job_id) == payload


async def test_constraint_violations_are_permanent(store: Store) -> None:
    await store.execute("INSERT INTO jobs (kind, idempotency_key) VALUES ('summary', 'k')")
    with pytest.raises(errors.ConstraintViolation) as caught:
        await store.execute("INSERT INTO jobs (kind, idempotency_key) VALUES ('summary', 'k')")
    assert caught.value.sqlstate == "23505"
    assert not caught.value.retryable
    assert isinstance(caught.value, EchoError)
    with pytest.raises(errors.ConstraintViolation):
        await store.execute("INSERT INTO jobs (kind) VALUES ('Not A Kind')")


async def test_bad_sql_is_permanent_and_a_transaction_rolls_back(store: Store) -> None:
    with pytest.raises(errors.PermanentStoreError, match="syntax"):
        await store.execute("SELEC 1")

    async def insert_then_fail() -> None:
        async with store.transaction() as connection:
            await connection.execute("INSERT INTO jobs (kind) VALUES ('summary')")
            await connection.execute("SELECT * FROM no_such_table")

    with pytest.raises(errors.PermanentStoreError, match="no_such_table"):
        await insert_then_fail()
    assert await store.fetchval("SELECT count(*) FROM jobs") == 0


async def test_lock_timeouts_are_transient(store: Store) -> None:
    await store.execute("INSERT INTO jobs (kind) VALUES ('summary')")
    async with store.transaction() as holder:
        await holder.execute("SELECT * FROM jobs FOR UPDATE")
        async with store.transaction() as waiter:
            await waiter.execute("SET LOCAL lock_timeout = '50ms'")
            with pytest.raises(errors.TransientStoreError) as caught:
                await waiter.execute("SELECT * FROM jobs FOR UPDATE")
    assert caught.value.sqlstate == "55P03"
    assert caught.value.retryable


async def test_an_unreachable_server_is_transient() -> None:
    with pytest.raises(errors.TransientStoreError):
        await Store.open("postgresql://postgres@127.0.0.1:1/test", schema="echo_x", connect_timeout=2)


async def test_a_missing_database_is_permanent(dsn: str) -> None:
    missing = dsn.rsplit("/", 1)[0] + "/no_such_database_echo"
    with pytest.raises(errors.PermanentStoreError) as caught:
        await Store.open(missing, schema="echo_x", connect_timeout=2)
    assert caught.value.sqlstate == "3D000"


async def test_store_refuses_an_unsafe_schema_and_closes_twice(dsn: str) -> None:
    with pytest.raises(ValueError, match="safe SQL identifier"):
        await Store.open(dsn, schema='x"; DROP SCHEMA public; --')
    store = await Store.open(dsn, schema="echo_unused", max_size=1)
    await store.close()
    await store.close()
    assert store.closed


async def test_listen_delivers_notifications_after_commit(store: Store) -> None:
    received: asyncio.Queue[str] = asyncio.Queue()
    listener = await store.listen("echo_test_channel", received.put_nowait)
    try:
        async with store.transaction() as connection:
            await connection.execute("SELECT pg_notify('echo_test_channel', 'hello')")
            await asyncio.sleep(0.1)
            assert received.empty()  # not before commit
        assert await asyncio.wait_for(received.get(), 2) == "hello"
        assert listener.alive
    finally:
        await listener.close()
    assert not listener.alive


def test_named_queries_are_parsed_from_blocks() -> None:
    parsed = queries.parse(
        "-- file comment\n\n-- name: first\n-- Does a thing.\nSELECT 1;\n\n-- name: second\nSELECT\n  2;\n"
    )
    assert list(parsed) == ["first", "second"]
    assert parsed["first"].sql == "SELECT 1;"
    assert parsed["first"].description == "Does a thing."
    assert parsed["second"].sql == "SELECT\n  2;"
    formatted = queries.Query("q", "CREATE SCHEMA {schema}").format(schema="echo_a")
    assert formatted.sql == 'CREATE SCHEMA "echo_a"'
    with pytest.raises(ValueError, match="safe SQL identifier"):
        queries.Query("q", "{schema}").format(schema="a;b")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT 1;", "no `-- name"),
        ("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;", "defined twice"),
        ("-- name: a\n-- only a comment\n", "has no SQL"),
    ],
)
def test_bad_query_files_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        queries.parse(text)


def test_shipped_query_files_load() -> None:
    assert {"enqueue", "claim", "release", "next_due"} <= set(queries.load("echo.queue", "queries.sql"))
    assert {"lock", "unlock", "create_schema"} <= set(
        queries.load("echo.adapters.store", "schema_migrations.sql")
    )


@pytest.mark.parametrize(
    ("tenant", "schema"), [("echo", "echo_echo"), ("team-a", "echo_team_a"), ("a1", "echo_a1")]
)
def test_tenant_schema_names(tenant: str, schema: str) -> None:
    assert tenancy.schema_for(tenant) == schema


@pytest.mark.parametrize("tenant", ["", "Echo", "a_b", "-a", "a-", "1a", "a;b", "x" * 41, 'a"b'])
def test_unsafe_tenants_are_refused(tenant: str) -> None:
    with pytest.raises(ConfigError, match="not a tenant name"):
        tenancy.schema_for(tenant)
    with pytest.raises(ValueError, match="not a tenant name"):
        Settings(tenant=tenant)


def test_store_public_api_is_pinned() -> None:
    assert echo.adapters.store.__all__ == sorted(
        echo.adapters.store.__all__, key=lambda name: (name[0].islower(), name)
    )
    for name in echo.adapters.store.__all__:
        assert getattr(echo.adapters.store, name) is not None
    assert echo.adapters.store.TransientStoreError.retryable
    assert not echo.adapters.store.PermanentStoreError.retryable


async def test_errors_of_the_callers_block_pass_through_untranslated(store: Store) -> None:
    async def fail_inside(error: Exception) -> None:
        async with store.transaction() as connection:
            await connection.execute("INSERT INTO jobs (kind) VALUES ('summary')")
            raise error

    with pytest.raises(TimeoutError, match="the caller's own"):
        await fail_inside(TimeoutError("the caller's own"))
    with pytest.raises(ConnectionResetError):
        await fail_inside(ConnectionResetError())
    assert await store.fetchval("SELECT count(*) FROM jobs") == 0  # both rolled back
    async with store.connection() as connection, connection.transaction():
        async with connection.transaction():  # a savepoint
            await connection.execute("INSERT INTO jobs (kind) VALUES ('merge')")
        assert connection.in_transaction
    assert await store.fetchval("SELECT count(*) FROM jobs") == 1


async def test_the_pool_releases_the_session_locks_a_connection_declared(store: Store) -> None:
    # The pool's reset skips asyncpg's round trip of RESET ALL, UNLISTEN and friends (nothing of ECHO
    # leaves such state on a pooled connection) but releases advisory locks where code took some.
    one = await Store.open(store.dsn, schema=store.schema, min_size=1, max_size=1)  # the same connection
    try:
        async with one.connection() as connection:
            connection.keep_session_state()
            assert await connection.fetchval("SELECT pg_try_advisory_lock(424242)")
            await connection.execute("BEGIN")  # left open
        async with one.dedicated() as other:
            assert await other.fetchval("SELECT pg_try_advisory_lock(424242)")  # released on the way back
            assert await other.fetchval("SELECT pg_advisory_unlock(424242)")
        async with one.connection() as connection:
            assert not connection.raw.is_in_transaction()  # rolled back
            assert await connection.fetchval("SELECT pg_try_advisory_lock(424243)")
        async with one.connection() as connection:  # undeclared: the lock stays with the connection
            assert await connection.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            )
    finally:
        await one.close()


# -- text PostgreSQL cannot hold: NUL and lone surrogates (issue 18, part 6) ------------------------

UNSTORABLE = "before\x00after \ud800 lone \udc00 low, pair \ud83d\ude00 and 😀"
STORED = "before\ufffdafter \ufffd lone \ufffd low, pair 😀 and 😀"


@pytest.fixture
async def texts(store: Store) -> Store:
    await store.execute("CREATE TABLE texts (id serial, t text, ts text[], j jsonb, js jsonb[], plain json)")
    return store


async def test_text_parameters_are_stored_with_the_replacement_character(texts: Store) -> None:
    await texts.execute(
        "INSERT INTO texts (t, ts) VALUES ($1, $2), ($3, $4)",
        UNSTORABLE,
        ["ok", UNSTORABLE, "\x00"],
        "clean",
        ["été", "夏"],
    )
    rows = await texts.fetch("SELECT t, ts FROM texts ORDER BY id")
    assert [tuple(row) for row in rows] == [(STORED, ["ok", STORED, "\ufffd"]), ("clean", ["été", "夏"])]
    # A lookup by the same text finds it: every parameter is made storable, not only the written ones.
    assert await texts.fetchval("SELECT id FROM texts WHERE t = $1", UNSTORABLE) == 1
    assert await texts.fetchval("SELECT count(*) FROM texts WHERE t = ANY($1::text[])", [UNSTORABLE]) == 1
    async with texts.transaction() as connection:
        assert await connection.fetchrow("SELECT t FROM texts WHERE t = $1", UNSTORABLE) == (STORED,)


async def test_json_values_are_stored_with_the_replacement_character_keys_included(texts: Store) -> None:
    value = {"text": UNSTORABLE, "key\x00": [1, "\udbff", {"deep\ud800": None}], "n": 2.5}
    stored = {"text": STORED, "key\ufffd": [1, "\ufffd", {"deep\ufffd": None}], "n": 2.5}
    await texts.execute(
        "INSERT INTO texts (j, js, plain) VALUES ($1, $2, $3::json)", value, [value, {"a": "\x00"}], value
    )
    row = await texts.fetchrow("SELECT j, js, plain FROM texts")
    assert row is not None
    assert row["j"] == stored
    assert row["js"] == [stored, {"a": "\ufffd"}]
    assert row["plain"] == stored
    # Escapes typed as text (a backslash, then "u0000") are text, kept as they are.
    typed = {"code": "print('\\u0000', '\\ud800')", "path": "C:\\\\u0000"}
    await texts.execute("UPDATE texts SET j = $1", typed)
    assert await texts.fetchval("SELECT j FROM texts") == typed


async def test_a_refused_value_is_a_data_error_that_says_so(texts: Store) -> None:
    with pytest.raises(errors.DataRefused) as server_side:
        await texts.fetchval("SELECT $1::text::integer", "twelve")
    assert server_side.value.sqlstate == "22P02"
    with pytest.raises(errors.DataRefused) as client_side:
        await texts.execute("INSERT INTO texts (id) VALUES ($1)", "not a number")
    for caught in (server_side.value, client_side.value):
        assert isinstance(caught, errors.PermanentStoreError)
        assert not caught.retryable
        assert errors.describe(caught).startswith("the store refused a value")
    with pytest.raises(errors.DataRefused):
        await texts.execute("INSERT INTO texts (j) VALUES ($1)", {"n": float("nan")})
    assert await texts.fetchval("SELECT count(*) FROM texts") == 0


def test_status_lines_tell_the_real_reason_of_a_store_error() -> None:
    assert (
        errors.describe(errors.TransientStoreError("ConnectionRefusedError: …")) == "the store is unavailable"
    )
    refused = errors.DataRefused(
        'CharacterNotInRepertoireError: invalid byte sequence for encoding "UTF8": 0x00', sqlstate="22021"
    )
    assert errors.describe(refused) == (
        'the store refused a value (invalid byte sequence for encoding "UTF8": 0x00)'
    )
    assert errors.describe(errors.DataRefused("x" * 500)).endswith("…)")
    assert len(errors.describe(errors.DataRefused("x" * 500))) < 160
    assert errors.describe(errors.ConstraintViolation("UniqueViolationError: dup", sqlstate="23505")) == (
        "the store refused the write (dup)"
    )
    assert errors.describe(errors.PermanentStoreError("UndefinedTableError: no jobs", sqlstate="42P01")) == (
        "the store failed (no jobs)"
    )
    # Not used at all (a closed pool, an embedded server that did not start): unavailable.
    assert errors.describe(errors.PermanentStoreError("InterfaceError: pool is closed")) == (
        "the store is unavailable"
    )
    assert errors.describe(errors.DataRefused("DataError: x"), "the summary store") == (
        "the summary store refused a value (x)"
    )
