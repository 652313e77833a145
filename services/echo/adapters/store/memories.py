"""The memory store (migration 0006): memories, their earlier versions, and what each window did.

PostgreSQL is where a memory's text, version and history live; the vector index (the tenant's
``echo_memory`` collection) is kept in step by the distill job (``echo.capabilities.memory.distill``), which
writes
under ``user_lock`` so two workers never interleave their decisions for one user. A merge is a
compare-and-set on ``version`` (``merge``): two workers merging into one memory at once cannot lose
an update: the second finds the version moved, and merges again into the new text.

Forgetting: ``forget`` deletes a user's memories (their versions go with them) and window records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from echo.adapters.store import pool, queries
from echo.domain.memory import records
from echo.ports import store as store_port

__all__ = ["Memories", "MemoryRow", "memory_from_row", "memory_key", "to_json"]


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.adapters.store", "memories.sql")


memory_key = store_port.memory_key
"""The id of the memory a window creates (the port's, re-exported)."""


MemoryRow = store_port.MemoryRow
"""A memory and its indexed version (the port's value, re-exported)."""


def memory_from_row(row: pool.Record, history: Sequence[records.MemoryVersion] = ()) -> MemoryRow:
    provenance = row["provenance"] or []
    return MemoryRow(
        records.Memory(
            id=row["id"],
            user_id=row["user_id"],
            memory_id=row["memory_id"],
            summary=row["summary"],
            importance=int(row["importance"]),
            tags=tuple(row["tags"] or ()),
            chat_id=row["chat_id"],
            version=int(row["version"]),
            created_at=float(row["created_at"]),
            updated_at=float(row["updated_at"]),
            provenance=tuple(records.WindowRef.from_json(p) for p in provenance if isinstance(p, Mapping)),
            history=tuple(history),
        ),
        int(row["indexed_version"]),
    )


def _count(status: str) -> int:
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class Memories(store_port.MemoryStore):
    """The memory store of one tenant (the store's schema)."""

    def __init__(self, store: pool.Store) -> None:
        self.store = store

    async def user_lock(self, connection: pool.Connection, user_id: str) -> None:
        """Hold the user's memory lock until ``connection``'s transaction ends."""
        await connection.execute(_sql()["lock_user"], user_id)

    async def job_alive(self, connection: pool.Connection | None, job_id: int) -> bool:
        """False when a job's row is gone: its user was forgotten meanwhile, so it writes nothing."""
        return bool(await (connection or self.store).fetchval(_sql()["job_alive"], job_id))

    async def window_outcome(
        self, user_id: str, window_key: str, *, connection: pool.Connection | None = None
    ) -> tuple[str, str | None] | None:
        """``(outcome, memory id)`` of a window already distilled, else None."""
        query = _sql()["window_outcome"]
        row = await (connection or self.store).fetchrow(query, user_id, window_key)
        return None if row is None else (row["outcome"], row["memory"])

    async def record_window(
        self,
        connection: pool.Connection,
        user_id: str,
        window: records.WindowRef,
        outcome: str,
        memory: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """Record what a window did; False when it was recorded already (nothing changes)."""
        key = await connection.fetchval(
            _sql()["record_window"], user_id, window.key, window.chat_id, outcome, memory, reason
        )
        return key is not None

    async def insert(
        self,
        connection: pool.Connection,
        user_id: str,
        memory_id: str,
        distilled: records.Distilled,
        window: records.WindowRef,
        *,
        provider: str,
        model: str,
    ) -> bool:
        found = await connection.fetchval(
            _sql()["insert_memory"],
            user_id,
            memory_id,
            distilled.memory_id,
            distilled.summary,
            distilled.importance,
            list(distilled.tags),
            window.chat_id,
            [window.to_json()],
            provider,
            model,
        )
        return found is not None

    async def get(
        self,
        user_id: str,
        memory_id: str,
        *,
        with_history: bool = False,
        connection: pool.Connection | None = None,
    ) -> MemoryRow | None:
        """The memory, read on ``connection`` when given (a caller inside a transaction must not take
        a second pooled connection: enough such callers at once would wait on each other's)."""
        executor = connection or self.store
        row = await executor.fetchrow(_sql()["get_memory"], user_id, memory_id)
        if row is None:
            return None
        history: list[records.MemoryVersion] = []
        if with_history:
            history = [
                records.MemoryVersion(
                    version=int(v["version"]),
                    summary=v["summary"],
                    importance=int(v["importance"]),
                    tags=tuple(v["tags"] or ()),
                    replaced_at=float(v["replaced_at"]),
                    window=v["replaced_by"],
                )
                for v in await executor.fetch(_sql()["versions"], user_id, memory_id)
            ]
        return memory_from_row(row, history)

    async def many(self, user_id: str, ids: Sequence[str]) -> dict[str, MemoryRow]:
        if not ids:
            return {}
        rows = await self.store.fetch(_sql()["memories_by_ids"], user_id, list(ids))
        return {row["id"]: memory_from_row(row) for row in rows}

    async def list(self, user_id: str, *, limit: int = 100, offset: int = 0) -> list[MemoryRow]:
        rows = await self.store.fetch(_sql()["list_memories"], user_id, limit, offset)
        return [memory_from_row(row) for row in rows]

    async def count(self, user_id: str) -> int:
        return int(await self.store.fetchval(_sql()["count_memories"], user_id))

    async def touch(
        self, connection: pool.Connection, user_id: str, memory_id: str, window: records.WindowRef
    ) -> int | None:
        """Touch a memory's date and add the window to its provenance; its version, None when gone."""
        version = await connection.fetchval(_sql()["touch_memory"], user_id, memory_id, [window.to_json()])
        return None if version is None else int(version)

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
        """Replace the text of version ``expected_version`` (kept in the history) with the merge of
        ``window``; the new version, or None when the memory moved on or is gone (merge again)."""
        sql = _sql()
        async with self.store.transaction() as connection:
            current = await connection.fetchrow(
                sql["get_memory_for_update"], user_id, memory_id, expected_version
            )
            if current is None:
                return None
            await connection.execute(sql["save_version"], user_id, memory_id, window.key)
            version = await connection.fetchval(
                sql["merge_memory"],
                user_id,
                memory_id,
                expected_version,
                summary,
                importance,
                list(tags),
                [window.to_json()],
            )
            await self.record_window(connection, user_id, window, "merged", memory_id)
        return None if version is None else int(version)

    async def mark_indexed(
        self, user_id: str, memory_id: str, version: int, *, connection: pool.Connection | None = None
    ) -> None:
        await (connection or self.store).execute(_sql()["mark_indexed"], user_id, memory_id, version)

    async def delete(
        self, user_id: str, memory_id: str, *, connection: pool.Connection | None = None
    ) -> bool:
        query = _sql()["delete_memory"]
        return await (connection or self.store).fetchval(query, user_id, memory_id) is not None

    async def forget(self, user_id: str, *, connection: pool.Connection | None = None) -> int:
        """Delete every memory (with its history) and window record of a user; the memories deleted.
        With ``connection``, inside the caller's transaction."""
        if connection is None:
            async with self.store.transaction() as own:
                return await self.forget(user_id, connection=own)
        sql = _sql()
        deleted = await connection.execute(sql["forget_memories"], user_id)
        await connection.execute(sql["forget_windows"], user_id)
        return _count(deleted)


def to_json(memory: records.Memory) -> dict[str, Any]:
    """A memory as the API answers it."""
    return {
        "id": memory.id,
        "user_id": memory.user_id,
        "memory_id": memory.memory_id,
        "summary": memory.summary,
        "memory_importance": memory.importance,
        "tags": list(memory.tags),
        "chat_id": memory.chat_id,
        "version": memory.version,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "provenance": [w.to_json() for w in memory.provenance],
    }
