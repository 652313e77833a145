"""Forgetting a user (`DELETE /users/{user_id}`, the right to be forgotten; DESIGN §9).

Every store that keeps rows about a user registers how to delete them; `Forgetting.forget` runs them
all and says what each deleted. The built-in parts, in this order:

1. `jobs` and `memories`, in one transaction under the user's memory lock (the one distill jobs
   write under): the user's queued, running, done and dead jobs, their memories with every earlier
   version, and the record of their distilled windows. A distill job already running finds its row
   gone when it takes the lock and writes nothing (`echo.capabilities.memory.distill`).
2. `conversations`: summaries, content-addressed messages and chat heads
(`echo.adapters.store.conversations`).
   `shadow`: the rich shadow's points, payloads, signatures and tool journal (`echo.adapters.store.shadow`).
   `registries`: the model's plans and code entries in every chat (`echo.adapters.store.registries`).
3. `vectors`: the user's points in every collection of the tenant (memories, ephemeral files).

A part that fails does not stop the others; the answer names it, and calling again finishes the job
(every part is idempotent).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from echo.errors import EchoError
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base

__all__ = ["Forgetting", "Forgotten", "builtin_forgetting"]

log = structlog.get_logger("echo.forgetting")

Forget = Callable[[str], Awaitable[dict[str, int]]]


@dataclass
class Forgotten:
    """What was deleted, by part and kind of row; `failed`: part -> error, for parts that failed."""

    deleted: dict[str, dict[str, int]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class Forgetting:
    """The parts that can forget a user, in registration order."""

    def __init__(self) -> None:
        self._parts: dict[str, Forget] = {}

    def register(self, name: str, forget: Forget) -> None:
        if name in self._parts:
            raise ValueError(f"a forgetting part named {name!r} is already registered")
        self._parts[name] = forget

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self._parts)

    async def forget(self, user_id: str) -> Forgotten:
        if not user_id:
            raise ValueError("user_id: expected a non-empty string")
        done = Forgotten()
        for name, forget in self._parts.items():
            try:
                done.deleted[name] = await forget(user_id)
            except EchoError as error:
                done.failed[name] = str(error)
                log.error("forget_failed", part=name, user_id=user_id, error=str(error))
        log.info("user_forgotten", user_id=user_id, deleted=done.deleted, failed=sorted(done.failed))
        return done


def builtin_forgetting(
    store: backends_port.Repositories, vectors: Callable[[], vectors_base.VectorStore | None]
) -> Forgetting:
    """Jobs and memories, conversations, then vectors (see the module docstring); ``vectors`` gives
    the vector store, None while it is not ready (that part fails, saying so)."""
    memory_store = store.memories
    jobs = store.jobs
    conversation_store = store.conversations

    async def jobs_and_memories(user_id: str) -> dict[str, int]:
        async with store.transactions.transaction() as connection:
            await memory_store.user_lock(connection, user_id)
            dropped = await jobs.forget_user(user_id, connection=connection)
            deleted = await memory_store.forget(user_id, connection=connection)
        return {"jobs": dropped, "memories": deleted}

    async def conversation_rows(user_id: str) -> dict[str, int]:
        summaries, messages = await conversation_store.forget(user_id)
        return {"summaries": summaries, "messages": messages}

    async def attachment_rows(user_id: str) -> dict[str, int]:
        return {"attachments": await store.attachments.forget(user_id)}

    async def shadow_rows(user_id: str) -> dict[str, int]:
        return await store.shadow.forget(user_id)

    async def registry_rows(user_id: str) -> dict[str, int]:
        return await store.registries.forget(user_id)

    async def vector_points(user_id: str) -> dict[str, int]:
        found = vectors()
        if found is None:
            raise vectors_base.VectorStoreError("the vector store is not ready: its points were not deleted")
        counts = {kind.value: await found.count(kind, user_id=user_id) for kind in vectors_base.Kind}
        await found.delete_user(user_id)
        return counts

    forgetting = Forgetting()
    forgetting.register("jobs_and_memories", jobs_and_memories)
    forgetting.register("conversations", conversation_rows)
    forgetting.register("attachments", attachment_rows)
    forgetting.register("shadow", shadow_rows)
    forgetting.register("registries", registry_rows)
    forgetting.register("vectors", vector_points)
    return forgetting
