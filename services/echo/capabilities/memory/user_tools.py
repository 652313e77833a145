"""What a user sees and removes of their own long-term memories (issue 21 part 6).

The tool server's `list_memories`, `forget_memory` and `forget_all_memories`
(`echo.entrypoints.http.tools`) call these for the user Open WebUI names; the admin API's
`DELETE /memories/{id}` deletes through `forget_memory` too, so there is one way to delete a memory:

- `forget_memory`: under the user's memory lock (the one distill jobs write under), the memory's
  row and its history, then its vector point, in one transaction: a vector store that fails rolls
  the row back, so what the recall finds and what the store holds stay the same;
- `forget_all_memories`: the same for every memory of the user, and the record of the windows they
  came from (`MemoryStore.forget`, as `DELETE /users/{id}` forgets them), with every memory point of
  the user. Their conversations, summaries, files and jobs stay: only `DELETE /users/{id}` removes
  those. A distillation already queued for a recent window may still write a memory afterwards.

A memory of another user is never touched: its id is simply not found (False, 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from echo.capabilities.memory.search import BackendsNotReady
from echo.domain.memory import records
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base

__all__ = ["Listed", "forget_all_memories", "forget_memory", "list_memories"]


@dataclass(frozen=True)
class Listed:
    """One page of a user's memories, most recently updated first, and how many they have."""

    memories: tuple[records.Memory, ...]
    total: int


def _store(backends: backends_port.Backends) -> backends_port.Repositories:
    if backends.store is None:
        raise BackendsNotReady("no store: this service runs without backends")
    return backends.store


async def _vectors(backends: backends_port.Backends, *, required: bool) -> vectors_base.VectorStore | None:
    vectors = await backends.index.vectors() if backends.index is not None else None
    if vectors is None and required:
        raise BackendsNotReady("the vector store is not ready yet: nothing was forgotten")
    return vectors


async def list_memories(
    backends: backends_port.Backends, user_id: str, *, limit: int, offset: int = 0
) -> Listed:
    memories = _store(backends).memories
    rows = await memories.list(user_id, limit=limit, offset=offset)
    return Listed(tuple(row.memory for row in rows), await memories.count(user_id))


async def forget_memory(
    backends: backends_port.Backends, user_id: str, memory_id: str, *, vectors_required: bool = True
) -> bool:
    """Delete one memory of the user (row, history, vector point); False when the user has no memory
    with this id. With ``vectors_required`` false (the admin API), a vector store not yet open leaves
    the point to the next `DELETE /users/{id}`; otherwise that is `BackendsNotReady`, nothing deleted."""
    repositories = _store(backends)
    vectors = await _vectors(backends, required=vectors_required)
    async with repositories.transactions.transaction() as connection:
        await repositories.memories.user_lock(connection, user_id)
        deleted = await repositories.memories.delete(user_id, memory_id, connection=connection)
        if deleted and vectors is not None:
            await vectors.delete(vectors_base.Kind.MEMORY, [memory_id], user_id=user_id)
    return deleted


async def forget_all_memories(backends: backends_port.Backends, user_id: str) -> int:
    """Delete every memory of the user, their history, window records and vector points; how many
    memories there were. `BackendsNotReady` (nothing deleted) while the vector store is not open."""
    repositories = _store(backends)
    vectors = await _vectors(backends, required=True)
    assert vectors is not None  # required: _vectors raised otherwise
    async with repositories.transactions.transaction() as connection:
        await repositories.memories.user_lock(connection, user_id)
        deleted = await repositories.memories.forget(user_id, connection=connection)
        await vectors.delete_where(vectors_base.Kind.MEMORY, user_id=user_id)
    return deleted
