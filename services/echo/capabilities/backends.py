"""The backends port over the service's own adapters: one tenant's PostgreSQL store as ``Repositories``.

``on_store`` is how the entry points (the hook service's runtime, the worker, the replay driver)
hand a ``pool.Store`` to the capabilities and to the job handlers' registry
(``echo.capabilities.handlers.builtin_registry``): its repositories (``echo.adapters.store``) and
its job queue (``echo.queue.queue``), typed by the port (``echo.ports.backends``), so a capability
never builds an adapter itself.
"""

from __future__ import annotations

from echo.adapters.store import attachments, conversations, memories, pool, registries, shadow
from echo.ports import backends
from echo.queue import queue

__all__ = ["on_store"]


def on_store(store: pool.Store) -> backends.Repositories:
    """The repositories and the job queue of ``store``'s tenant (its schema)."""
    return backends.Repositories(
        tenant=store.schema,
        conversations=conversations.Conversations(store),
        memories=memories.Memories(store),
        attachments=attachments.Attachments(store),
        registries=registries.Registries(store),
        shadow=shadow.ShadowStore(store),
        transactions=store,
        jobs=queue.JobQueue(store),
    )
