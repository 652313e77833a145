"""The backends port: everything a capability reaches beyond its own process, as one value (pure, no I/O).

Every filter, job handler and route receives a ``Backends``. What is absent, or not ready yet, is
said by the value itself, never found out with ``getattr``:

- ``store`` (``Repositories``): the tenant's repositories (``echo.ports.store``), where their
  transactions come from, and the job queue; None where the service runs without a store (an app
  built without backends: the filters still do what needs none, such as trimming to the budget);
- ``index`` (``Index``): the embedder and the vector store; None where the service has none, and its
  methods answer None while they are not ready yet (the hook service's warm-up still loading the
  model) — ``Index.embedder`` and ``Index.vectors`` both, or neither;
- ``openwebui`` (``OpenWebUI``): Open WebUI's API (referenced chats, attached files); None unless
  ``ECHO_OPENWEBUI_URL`` and ``ECHO_OPENWEBUI_API_KEY`` are set.

The entry points build it from the adapters: ``echo.capabilities.backends.on_store`` (PostgreSQL
repositories and queue of one tenant), ``echo.entrypoints.runtime.Runtime.backends`` (the hook
service: its store, and its embedder and vectors once warmed up); a test builds one over the
in-memory store (``echo.adapters.in_memory_store``). The methods raise ``EchoError`` subclasses that
say whether a retry may help (``retryable``), as each port's adapters do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from echo.domain import jobs as domain
from echo.ports import embeddings, store, vectors

__all__ = ["NONE", "Backends", "Index", "JobStatus", "Jobs", "OpenWebUI", "Repositories"]


class JobStatus(Protocol):
    """What a caller reads of a job it enqueued (``echo.queue.queue.JobInfo``)."""

    @property
    def state(self) -> domain.JobState: ...


class Jobs(Protocol):
    """The tenant's job queue as capabilities use it: enqueue, look a job up, forget a user's jobs
    (``echo.queue.queue.JobQueue``; the worker's side, claiming and finishing, is the queue's own)."""

    async def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        connection: store.Connection | None = None,
    ) -> int:
        """Add a job (inside ``connection``'s transaction when given); its id, or the id of the job
        already enqueued under (``kind``, ``idempotency_key``)."""
        ...

    async def get(self, job_id: int) -> JobStatus | None:
        """The job, None when it is gone (swept by retention, so finished)."""
        ...

    async def forget_user(self, user_id: str, *, connection: store.Connection | None = None) -> int:
        """Delete every job whose payload names ``user_id`` (any state); how many."""
        ...


@dataclass(frozen=True)
class Repositories:
    """One tenant's store: its repositories, their transactions and its job queue.

    ``tenant`` names it (PostgreSQL: the schema), so per-process caches of several tenants never mix.
    """

    tenant: str
    conversations: store.ConversationStore
    memories: store.MemoryStore
    attachments: store.AttachmentStore
    registries: store.RegistryStore
    shadow: store.ShadowStore
    transactions: store.Transactions
    jobs: Jobs


class Index(Protocol):
    """The embedder and the vector store, opened by the hook service's warm-up
    (``echo.capabilities.memory.backends.RuntimeBackends``) or by a worker on its first job
    (``SettingsBackends``). Both None while not ready yet; an ``EchoError`` when opening failed."""

    def embedder(self) -> embeddings.Embedder | None: ...

    async def vectors(self) -> vectors.VectorStore | None: ...


class OpenWebUI(Protocol):
    """Open WebUI's API, read with an admin key (``echo.adapters.openwebui.client.OpenWebUI``).

    ``None`` answers: Open WebUI does not know the chat or file. Failures raise ``OpenWebUIError``
    (retryable or not; ``FilesForbidden`` when the key may not read files)."""

    async def chat(self, chat_id: str, *, timeout_s: float | None = None) -> dict[str, Any] | None: ...

    async def file(self, file_id: str, *, timeout_s: float | None = None) -> dict[str, Any] | None: ...

    async def file_bytes(
        self, file_id: str, *, max_bytes: int, timeout_s: float | None = None
    ) -> bytes | None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Backends:
    """What a capability reaches beyond its process (see the module docstring); a part that is
    None is absent."""

    store: Repositories | None = None
    index: Index | None = None
    openwebui: OpenWebUI | None = None


NONE = Backends()
"""No backends at all: a filter given these does what it can without any."""
