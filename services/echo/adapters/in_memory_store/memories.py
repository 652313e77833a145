"""The memory store in memory: ``echo.adapters.store.memories`` over ``Tables``.

A memory is keyed by (user, id); an insert of a known one changes nothing, a merge is a
compare-and-set on ``version`` that keeps the replaced version in the history, and deleting a
memory deletes its history (the foreign key's cascade); its window records stay. ``user_lock`` is an
``asyncio.Lock`` per user held until the ``Tables.transaction`` block it was taken in ends (taken
again in the same block, it is already held); with any other ``connection`` it holds nothing. A
write given a ``Transaction`` is undone with the rest of its block when the block raises
(``tables.saving``); ``merge`` takes no connection: it is its own unit, as on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence

from echo.adapters.in_memory_store import tables as tables_module
from echo.domain.memory import records
from echo.ports import store as store_port

__all__ = ["Memories"]

storable_arguments = tables_module.storable_arguments


class Memories(store_port.MemoryStore):
    """The memory store of one tenant (``Tables``). Every write is applied at once; one given a
    ``Transaction`` (``connection``) is undone if its block raises, and ``user_lock`` holds its lock
    until the block ends."""

    def __init__(self, tables: tables_module.Tables) -> None:
        self.tables = tables

    def _row(self, record: tables_module.MemoryRecord, with_history: bool = False) -> store_port.MemoryRow:
        history: builtins.list[records.MemoryVersion] = []
        if with_history:
            history = sorted(
                (
                    version
                    for (user_id, memory, _), version in self.tables.memory_versions.items()
                    if user_id == record.user_id and memory == record.id
                ),
                key=lambda version: version.version,
            )
        provenance = (tables_module.loaded(window) for window in record.provenance)
        return store_port.MemoryRow(
            records.Memory(
                id=record.id,
                user_id=record.user_id,
                memory_id=record.memory_id,
                summary=record.summary,
                importance=record.importance,
                tags=record.tags,
                chat_id=record.chat_id,
                version=record.version,
                created_at=record.created_at,
                updated_at=record.updated_at,
                provenance=tuple(records.WindowRef.from_json(window) for window in provenance),
                history=tuple(history),
            ),
            record.indexed_version,
        )

    def _record_window(
        self,
        user_id: str,
        window: records.WindowRef,
        outcome: str,
        memory: str | None,
        reason: str | None,
        connection: store_port.Connection | None = None,
    ) -> bool:
        key = (user_id, window.key)
        if key in self.tables.memory_windows:
            return False
        tables_module.saving(connection, self.tables.memory_windows, [key])
        self.tables.memory_windows[key] = tables_module.WindowRecord(window.chat_id, outcome, memory, reason)
        return True

    @storable_arguments
    async def user_lock(self, connection: store_port.Connection, user_id: str) -> None:
        if not isinstance(connection, tables_module.Transaction) or user_id in connection.locks:
            return
        lock = self.tables.user_locks.setdefault(user_id, asyncio.Lock())
        await lock.acquire()
        connection.locks[user_id] = lock

    async def job_alive(self, connection: store_port.Connection | None, job_id: int) -> bool:
        return self.tables.jobs is None or job_id in self.tables.jobs

    @storable_arguments
    async def window_outcome(
        self, user_id: str, window_key: str, *, connection: store_port.Connection | None = None
    ) -> tuple[str, str | None] | None:
        found = self.tables.memory_windows.get((user_id, window_key))
        return None if found is None else (found.outcome, found.memory)

    @storable_arguments
    async def record_window(
        self,
        connection: store_port.Connection,
        user_id: str,
        window: records.WindowRef,
        outcome: str,
        memory: str | None = None,
        reason: str | None = None,
    ) -> bool:
        return self._record_window(user_id, window, outcome, memory, reason, connection)

    @storable_arguments
    async def insert(
        self,
        connection: store_port.Connection,
        user_id: str,
        memory_id: str,
        distilled: records.Distilled,
        window: records.WindowRef,
        *,
        provider: str,
        model: str,
    ) -> bool:
        key = (user_id, memory_id)
        if key in self.tables.memories:
            return False
        tables_module.saving(connection, self.tables.memories, [key])
        now = self.tables.now()
        self.tables.memories[key] = tables_module.MemoryRecord(
            id=memory_id,
            user_id=user_id,
            memory_id=distilled.memory_id,
            summary=distilled.summary,
            importance=distilled.importance,
            tags=tuple(distilled.tags),
            chat_id=window.chat_id,
            version=1,
            indexed_version=0,
            provenance=[tables_module.dumped(window.to_json())],
            provider=provider,
            model=model,
            created_at=now,
            updated_at=now,
        )
        return True

    @storable_arguments
    async def get(
        self,
        user_id: str,
        memory_id: str,
        *,
        with_history: bool = False,
        connection: store_port.Connection | None = None,
    ) -> store_port.MemoryRow | None:
        record = self.tables.memories.get((user_id, memory_id))
        return None if record is None else self._row(record, with_history)

    @storable_arguments
    async def list(
        self, user_id: str, *, limit: int = 100, offset: int = 0
    ) -> builtins.list[store_port.MemoryRow]:
        mine = [record for (owner, _), record in self.tables.memories.items() if owner == user_id]
        mine.sort(key=lambda record: (-record.updated_at, record.id))
        return [self._row(record) for record in mine[offset : offset + limit]]

    @storable_arguments
    async def count(self, user_id: str) -> int:
        return sum(1 for owner, _ in self.tables.memories if owner == user_id)

    @storable_arguments
    async def touch(
        self, connection: store_port.Connection, user_id: str, memory_id: str, window: records.WindowRef
    ) -> int | None:
        record = self.tables.memories.get((user_id, memory_id))
        if record is None:
            return None
        tables_module.saving(connection, self.tables.memories, [(user_id, memory_id)])
        record.updated_at = self.tables.now()
        record.provenance.append(tables_module.dumped(window.to_json()))
        return record.version

    @storable_arguments
    async def merge(
        self,
        user_id: str,
        memory_id: str,
        *,
        expected_version: int,
        summary: str,
        importance: int,
        tags: Sequence[str],
        window: records.WindowRef,
    ) -> int | None:
        record = self.tables.memories.get((user_id, memory_id))
        if record is None or record.version != expected_version:
            return None
        now = self.tables.now()
        self.tables.memory_versions.setdefault(
            (user_id, memory_id, record.version),
            records.MemoryVersion(
                version=record.version,
                summary=record.summary,
                importance=record.importance,
                tags=record.tags,
                replaced_at=now,
                window=window.key,
            ),
        )
        record.summary, record.importance, record.tags = summary, importance, tuple(tags)
        record.provenance.append(tables_module.dumped(window.to_json()))
        record.version += 1
        record.updated_at = now
        self._record_window(user_id, window, "merged", memory_id, None)
        return record.version

    @storable_arguments
    async def mark_indexed(
        self, user_id: str, memory_id: str, version: int, *, connection: store_port.Connection | None = None
    ) -> None:
        record = self.tables.memories.get((user_id, memory_id))
        if record is not None and record.indexed_version < version:
            tables_module.saving(connection, self.tables.memories, [(user_id, memory_id)])
            record.indexed_version = version

    def _delete(self, user_id: str, memory_id: str, connection: store_port.Connection | None) -> bool:
        if (user_id, memory_id) not in self.tables.memories:
            return False
        versions = [key for key in self.tables.memory_versions if key[:2] == (user_id, memory_id)]
        tables_module.saving(connection, self.tables.memories, [(user_id, memory_id)])
        tables_module.saving(connection, self.tables.memory_versions, versions)
        del self.tables.memories[(user_id, memory_id)]
        for key in versions:
            del self.tables.memory_versions[key]
        return True

    @storable_arguments
    async def delete(
        self, user_id: str, memory_id: str, *, connection: store_port.Connection | None = None
    ) -> bool:
        return self._delete(user_id, memory_id, connection)

    @storable_arguments
    async def forget(self, user_id: str, *, connection: store_port.Connection | None = None) -> int:
        deleted = tables_module.forget_rows(self.tables.memories, user_id, connection)
        tables_module.forget_rows(self.tables.memory_versions, user_id, connection)
        tables_module.forget_rows(self.tables.memory_windows, user_id, connection)
        return deleted
