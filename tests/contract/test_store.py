"""The store port's contract on both adapters: the in-memory store and PostgreSQL.

PostgreSQL runs on the ``store`` fixture (a fresh migrated tenant schema on the test server, skipped
when the server is unreachable); the in-memory store on a fresh ``Tables``. The assignments below are
typed by the port's Protocols, and every repository class subclasses its Protocol, so mypy checks
both adapters against the port (``echo.adapters.store`` and ``echo.adapters.in_memory_store``).
"""

from __future__ import annotations

import pytest
from contract.store_contract import ALICE, Backend, StoreContract, digest

from echo.adapters import in_memory_store
from echo.adapters.store import attachments, conversations, memories, registries, shadow
from echo.adapters.store import errors as store_errors
from echo.adapters.store.pool import Store
from echo.ports import store as store_port


class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def tables(self) -> in_memory_store.Tables:
        return in_memory_store.Tables(jobs=set())

    @pytest.fixture
    def backend(self, tables: in_memory_store.Tables) -> Backend:
        jobs = tables.jobs
        assert jobs is not None

        async def add_job() -> int:
            job = tables.next_id()
            jobs.add(job)
            return job

        async def drop_job(job: int) -> None:
            jobs.discard(job)

        return Backend(
            conversations=in_memory_store.Conversations(tables),
            memories=in_memory_store.Memories(tables),
            attachments=in_memory_store.Attachments(tables),
            registries=in_memory_store.Registries(tables),
            shadow=in_memory_store.ShadowStore(tables),
            transactions=tables,
            add_job=add_job,
            drop_job=drop_job,
            other_shadow=lambda: in_memory_store.ShadowStore(tables),
        )

    async def test_without_a_queue_every_job_is_alive(self) -> None:
        assert await in_memory_store.Memories(in_memory_store.Tables()).job_alive(None, 42) is True

    async def test_an_injected_clock_dates_rows_and_never_repeats(self) -> None:
        tables = in_memory_store.Tables(clock=lambda: 1000.0)
        registry = in_memory_store.Registries(tables)
        first = await registry.save_plan(ALICE, "chat-1", goal="g", status="todo")
        second = await registry.save_plan(ALICE, "chat-1", goal="g", status="todo", plan_id=first.id)
        assert first.created_at == 1000.0
        assert second.updated_at == pytest.approx(1000.0)
        assert second.updated_at > first.updated_at

    async def test_a_transaction_releases_the_user_lock_when_the_block_raises(
        self, backend: Backend, tables: in_memory_store.Tables
    ) -> None:
        async def failing() -> None:
            async with tables.transaction() as connection:
                await backend.memories.user_lock(connection, ALICE)
                raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            await failing()
        assert not tables.user_locks[ALICE].locked()
        await backend.memories.user_lock(object(), ALICE)  # not a Transaction: holds nothing
        assert not tables.user_locks[ALICE].locked()

    async def test_the_tables_are_the_tenant(self, tables: in_memory_store.Tables) -> None:
        (one,) = [digest(1)]
        await in_memory_store.Conversations(tables).remember(ALICE, {one: {"role": "user", "content": "m"}})
        assert await in_memory_store.Conversations(tables).messages(ALICE, [one]) != {}
        other = in_memory_store.Tables()
        assert await in_memory_store.Conversations(other).messages(ALICE, [one]) == {}


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def backend(self, store: Store) -> Backend:
        async def add_job() -> int:
            return int(await store.fetchval("INSERT INTO jobs (kind) VALUES ('contract') RETURNING id"))

        async def drop_job(job: int) -> None:
            await store.execute("DELETE FROM jobs WHERE id = $1", job)

        conversation_store: store_port.ConversationStore = conversations.Conversations(store)
        memory_store: store_port.MemoryStore = memories.Memories(store)
        attachment_store: store_port.AttachmentStore = attachments.Attachments(store)
        registry_store: store_port.RegistryStore = registries.Registries(store)
        shadow_store: store_port.ShadowStore = shadow.ShadowStore(store)
        transactions: store_port.Transactions = store
        return Backend(
            conversations=conversation_store,
            memories=memory_store,
            attachments=attachment_store,
            registries=registry_store,
            shadow=shadow_store,
            transactions=transactions,
            add_job=add_job,
            drop_job=drop_job,
            other_shadow=lambda: shadow.ShadowStore(store, shadow.PayloadCache(), shadow.PointCache()),
        )


def test_postgresqls_store_errors_are_the_ports_and_say_how_to_retry() -> None:
    """A capability catches the port's `StoreError` and reads `retryable`; PostgreSQL's errors are it."""
    assert store_errors.StoreError is store_port.StoreError
    transient = store_errors.TransientStoreError("connection lost", sqlstate="08006")
    refused = store_errors.ConstraintViolation("duplicate key", sqlstate="23505")
    assert isinstance(transient, store_port.StoreError)
    assert isinstance(refused, store_port.StoreError)
    assert (transient.retryable, transient.sqlstate) == (True, "08006")
    assert (refused.retryable, refused.sqlstate) == (False, "23505")
    assert store_port.StoreError("down").sqlstate is None
