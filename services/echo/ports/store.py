"""The store port: the tenant's repositories, their values and limits (pure, no I/O).

One Protocol per repository, each with the methods the capabilities and entry points call:

- ``ConversationStore``: messages by invariant hash, branch-aware summaries, chat heads, summary
  failures (migrations 0004, 0005, 0007, 0009);
- ``MemoryStore``: memories, their versions and what each distilled window did (0006);
- ``AttachmentStore``: the chat file registry (0011);
- ``RegistryStore``: the model's plans and code entries per chat (0011);
- ``ShadowStore``: the rich shadow's points and payloads (0010);
- ``Transactions``: where a ``Connection`` comes from: a unit of work. The writes a block makes
  with its connection are kept together when it ends and undone together when it raises (the
  distill job's decision, memory row, window record and indexed version).

Every method names the user: a user never reads, changes or forgets another user's rows. A
repository that fails raises ``StoreError`` (an ``EchoError``), whose ``retryable`` says whether
the same call may succeed later; callers read that attribute, never an adapter's subclasses.

Adapters: ``echo.adapters.store`` (PostgreSQL, one schema per tenant) and
``echo.adapters.in_memory_store`` (dicts, one ``Tables`` per tenant); ``tests/contract/store_contract.py``
is the behaviour both pass.
"""

from __future__ import annotations

import builtins
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeAlias

from echo.domain import aec, shadow
from echo.domain.attachments import routing
from echo.domain.compression import selection
from echo.domain.memory import records
from echo.errors import EchoError

__all__ = [
    "FAILURE_DETAIL_CHARS",
    "FILE_LIST_LIMIT",
    "LIST_LIMIT",
    "SNAPSHOT_LIMIT",
    "Attachment",
    "AttachmentStore",
    "CodeEntry",
    "Connection",
    "ConversationStore",
    "InletLookup",
    "MemoryRow",
    "MemoryStore",
    "NewAttachment",
    "NewSummary",
    "Plan",
    "RegistryStore",
    "ShadowStore",
    "StoreError",
    "SummaryFailure",
    "SummaryRow",
    "Transactions",
    "memory_key",
    "new_plan_id",
]

Connection: TypeAlias = Any
"""A connection inside a transaction, as ``Transactions.transaction`` of the same backend yields it
(PostgreSQL: ``echo.adapters.store.pool.Connection``); opaque here, passed back to that backend's
repositories. The in-memory backend accepts any value and ignores it."""

FAILURE_DETAIL_CHARS = 200
"""How much of a summary failure's detail is kept (the status event shows it)."""
FILE_LIST_LIMIT = 100
"""Files listed in one chat's AEC block (``AttachmentStore.of_chat``)."""
SNAPSHOT_LIMIT = 50
"""Most plans and most code entries (each) the AEC block lists: the most recently updated ones."""
LIST_LIMIT = 200
"""Most plans or code entries the tool server's listings answer."""


_MEMORY_NAMESPACE = uuid.UUID("5f0c6b0e-8f1e-4d5c-9a53-4543484f0006")


class StoreError(EchoError):
    """A repository failed. ``retryable`` (the root's attribute): whether the same call may succeed
    later. ``sqlstate``: the backend's own code for the error, when it has one (PostgreSQL's SQLSTATE;
    ``echo.adapters.store.errors`` draws PostgreSQL's subclasses)."""

    refused: ClassVar[str | None] = None
    """What the backend refused, for a status line ("a value", "the write"); None when it refused
    nothing and failed instead."""

    def __init__(self, message: str, *, sqlstate: str | None = None) -> None:
        self.sqlstate = sqlstate
        super().__init__(message)


_TYPE_PREFIX = re.compile(r"^[A-Za-z_]\w*: ")
_MAX_REASON_CHARS = 100


def _reason(error: StoreError) -> str:
    """The error's message without the driver's class name, cut for a status line."""
    reason = _TYPE_PREFIX.sub("", str(error).split("\n", 1)[0], count=1).strip()
    return reason if len(reason) <= _MAX_REASON_CHARS else reason[:_MAX_REASON_CHARS] + "…"


def describe(error: StoreError, what: str = "the store") -> str:
    """What a status line says of a store error (``what``: how it names the store). A value or a
    write the backend refused says so, with its reason; so does another error the server answered
    (a SQLSTATE: a bug or a schema out of date); "… is unavailable" is for the rest, a store that
    could not be used at all (down, unreachable, its pool closed, not started)."""
    if error.refused is not None:
        return f"{what} refused {error.refused} ({_reason(error)})"
    if error.retryable or not error.sqlstate:
        return f"{what} is unavailable"
    return f"{what} failed ({_reason(error)})"


def new_plan_id() -> str:
    """A fresh plan id, ``plan_`` and 12 hex digits."""
    return f"plan_{uuid.uuid4().hex[:12]}"


def memory_key(user_id: str, window_key: str) -> str:
    """The id of the memory a window (or a window's fact) creates: a UUID stable per user and key,
    so a retried insert is the same row and the same vector point on every backend."""
    return str(uuid.uuid5(_MEMORY_NAMESPACE, f"{user_id}\x00{window_key}"))


# Conversations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryRow:
    """A stored summary: the domain's view (``summary``) and what else the row holds."""

    summary: selection.StoredSummary
    locale: str
    model: str
    provider: str
    refs: tuple[str, ...]


@dataclass(frozen=True)
class NewSummary:
    """A summary to store. ``refs``: the invariant hashes of the summarised turns, in order."""

    user_id: str
    covered_hash: str
    covered_count: int
    head_count: int
    text: str
    locale: str
    model: str
    provider: str
    refs: Sequence[str]
    input_tokens: int = 0
    summary_tokens: int = 0


@dataclass(frozen=True)
class SummaryFailure:
    """A summary job of a chat that gave up, not shown yet: the latest ``reason`` and ``detail``, and
    how many ``failures`` since the chat's last inlet."""

    reason: str
    detail: str
    failures: int = 1


@dataclass(frozen=True)
class InletLookup:
    """What the inlet's one statement found: the summary valid for the branch, and a failure to show."""

    summary: SummaryRow | None
    failure: SummaryFailure | None


class ConversationStore(Protocol):
    """Messages stored once per user by invariant hash, summaries keyed by the cumulative hash of the
    last turn they cover, the latest branch of each chat, and summary failures not shown yet.

    Branch hashes (``hashes``, ``lookup``) are 64 hex digits each; anything else is a ``ValueError``.
    """

    async def remember(
        self,
        user_id: str,
        messages: Mapping[str, Mapping[str, Any]],
        *,
        connection: Connection | None = None,
    ) -> None:
        """Store ``messages`` (invariant hash -> stored message); known ones stay as they are."""
        ...

    async def messages(self, user_id: str, invariants: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored messages among ``invariants`` (absent ones are missing from the answer)."""
        ...

    async def best_summary(self, user_id: str, hashes: Sequence[str]) -> SummaryRow | None:
        """The summary valid for the branch whose turn hashes are ``hashes`` that covers the most."""
        ...

    async def inlet_lookup(self, user_id: str, hashes: Sequence[str], chat_id: str | None) -> InletLookup:
        """``best_summary`` and the chat's summary failure not shown yet, taken (shown once)."""
        ...

    async def record_summary_failure(self, user_id: str, chat_id: str, reason: str, detail: str) -> None:
        """A summary job of this chat gave up (the latest reason and detail kept, the count up one);
        nothing for an empty ``chat_id``; ``detail`` cut to ``FAILURE_DETAIL_CHARS``."""
        ...

    async def clear_summary_failure(self, user_id: str, chat_id: str) -> None:
        """A summary of this chat succeeded: an earlier failure is no longer news."""
        ...

    async def summaries_at(self, user_id: str, hashes: Iterable[str]) -> dict[str, int]:
        """Covered hash -> covered count of the user's summaries keyed by any of ``hashes``."""
        ...

    async def summary(self, user_id: str, covered_hash: str) -> SummaryRow | None:
        """The user's summary keyed by ``covered_hash``."""
        ...

    async def save_summary(self, new: NewSummary) -> bool:
        """Store a summary; False when its branch point already had one (that one stays)."""
        ...

    def summary_lock(self, user_id: str, scope: str) -> AbstractAsyncContextManager[None]:
        """Hold the summary lock of one chat branch of a user while the block runs; a second holder
        waits for the first."""
        ...

    async def forget(self, user_id: str) -> tuple[int, int]:
        """Delete the user's summaries, messages, chat heads and summary failures; the counts
        (summaries, messages) deleted."""
        ...

    async def record_head(
        self,
        user_id: str,
        chat_id: str,
        invariants: Sequence[str],
        *,
        head_hash: str | None = None,
        connection: Connection | None = None,
    ) -> None:
        """Record the latest branch of a chat (its turns' invariant hashes, in order); nothing for an
        empty ``chat_id``."""
        ...

    async def outlet_statement(
        self,
        user_id: str,
        messages: Mapping[str, Mapping[str, Any]],
        *,
        chat_id: str | None,
        invariants: Sequence[str],
        head_hash: str | None,
        lookup: Sequence[str],
    ) -> SummaryRow | None:
        """``remember`` the ``messages``, ``record_head`` of ``chat_id`` (None or empty: none) and
        ``best_summary`` for the branch ``lookup`` (empty: None), at once."""
        ...

    async def latest_branch(self, user_id: str, chat_id: str) -> list[str] | None:
        """The invariant hashes of the chat's latest recorded branch, in order; None when this user
        has no such chat."""
        ...


# Memories -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryRow:
    """A stored memory and the version of it the vector index holds (0: none yet)."""

    memory: records.Memory
    indexed_version: int


class MemoryStore(Protocol):
    """Memories, their earlier versions and what each distilled window did."""

    async def user_lock(self, connection: Connection, user_id: str) -> None:
        """Hold the user's memory lock until ``connection``'s transaction ends."""
        ...

    async def job_alive(self, connection: Connection | None, job_id: int) -> bool:
        """False when a job is gone (its user was forgotten meanwhile): it writes nothing."""
        ...

    async def window_outcome(
        self, user_id: str, window_key: str, *, connection: Connection | None = None
    ) -> tuple[str, str | None] | None:
        """``(outcome, memory id)`` of a window already distilled, else None."""
        ...

    async def record_window(
        self,
        connection: Connection,
        user_id: str,
        window: records.WindowRef,
        outcome: str,
        memory: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """Record what a window did; False when it was recorded already (nothing changes)."""
        ...

    async def insert(
        self,
        connection: Connection,
        user_id: str,
        memory_id: str,
        distilled: records.Distilled,
        window: records.WindowRef,
        *,
        provider: str,
        model: str,
    ) -> bool:
        """Create memory ``memory_id`` (version 1); False when the user has it already (unchanged)."""
        ...

    async def get(
        self,
        user_id: str,
        memory_id: str,
        *,
        with_history: bool = False,
        connection: Connection | None = None,
    ) -> MemoryRow | None:
        """The memory, with its earlier versions (oldest first) when ``with_history``."""
        ...

    async def list(self, user_id: str, *, limit: int = 100, offset: int = 0) -> builtins.list[MemoryRow]:
        """The user's memories, most recently updated first (then by id)."""
        ...

    async def count(self, user_id: str) -> int: ...

    async def touch(
        self, connection: Connection, user_id: str, memory_id: str, window: records.WindowRef
    ) -> int | None:
        """Touch a memory's date and add the window to its provenance; its version, None when gone."""
        ...

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
        """Replace version ``expected_version`` (kept in the history) with the merge of ``window``
        (recorded as ``merged``); the new version, or None when the memory moved on or is gone."""
        ...

    async def mark_indexed(
        self, user_id: str, memory_id: str, version: int, *, connection: Connection | None = None
    ) -> None:
        """The vector index holds ``version`` (never moves back)."""
        ...

    async def delete(self, user_id: str, memory_id: str, *, connection: Connection | None = None) -> bool:
        """Delete one memory with its history; False when the user has no such memory."""
        ...

    async def forget(self, user_id: str, *, connection: Connection | None = None) -> int:
        """Delete every memory (with its history) and window record of a user; the memories deleted."""
        ...


# Attachments ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attachment:
    source_id: str
    chat_id: str
    file_id: str | None
    filename: str
    mime_type: str
    mode: str
    status: str  # pending | ready | failed
    content_sha256: str | None = None
    size_bytes: int = 0
    summary: str | None = None
    summary_mode: str | None = None
    chunks: int = 0
    error: str | None = None
    created_at: float = 0.0


@dataclass(frozen=True)
class NewAttachment:
    chat_id: str
    file_id: str | None
    filename: str
    mime_type: str
    mode: routing.Mode
    status: str
    content_sha256: str | None
    size_bytes: int
    pending_text: str | None = None
    summary: str | None = None


class AttachmentStore(Protocol):
    """The chat file registry: one row per file content and chat, until it expires."""

    async def by_file(self, user_id: str, chat_id: str, file_id: str) -> Attachment | None:
        """The chat's oldest row registered under Open WebUI's ``file_id``."""
        ...

    async def get(self, user_id: str, source_id: str) -> Attachment | None: ...

    async def of_chat(self, user_id: str, chat_id: str, *, limit: int = FILE_LIST_LIMIT) -> list[Attachment]:
        """The chat's files, oldest first (then by source id), at most ``limit``."""
        ...

    async def register(
        self,
        connection: Connection,
        user_id: str,
        new: NewAttachment,
        *,
        now: float,
        retention_seconds: float,
    ) -> tuple[str, bool]:
        """``(source_id, created)``: the new row's id (``routing.source_id`` at ``now``, or a second
        later per id taken), or the id of the row holding the same content in the chat already
        (``created`` False). The row expires ``retention_seconds`` from now."""
        ...

    async def pending_text(self, user_id: str, source_id: str) -> str | None: ...

    async def mark_indexed(self, user_id: str, source_id: str, chunks: int) -> None: ...

    async def mark_ready(self, user_id: str, source_id: str, summary: str, summary_mode: str) -> bool:
        """Ready with its summary (pending text and error cleared); False when there is no such row."""
        ...

    async def mark_failed(self, user_id: str, source_id: str, error: str) -> bool:
        """Failed with the reason (pending text cleared); False when there is no such row."""
        ...

    async def expired(self, limit: int = 500) -> list[tuple[str, str]]:
        """``(user_id, source_id)`` of the rows past their expiry, of every user, soonest first."""
        ...

    async def delete(self, user_id: str, source_id: str) -> None: ...

    async def forget(self, user_id: str) -> int:
        """Delete every row of a user; how many."""
        ...


# Registries -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    id: str
    goal: str
    status: str
    model: str | None
    steps: tuple[str, ...]
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class CodeEntry:
    """A code entry; `content` is None where a listing left it out."""

    id: str
    lang: str
    lines: int
    last_commit: str
    version: int
    created_at: float
    updated_at: float
    content: str | None = None


class RegistryStore(Protocol):
    """The model's plans and code entries, per user and chat: another user's or another chat's entry
    is not found."""

    async def save_plan(
        self,
        user_id: str,
        chat_id: str,
        *,
        goal: str,
        status: str,
        plan_id: str | None = None,
        steps: Sequence[str] | None = None,
        model: str | None = None,
    ) -> Plan:
        """Create a plan (a new id when none is given) or replace the one with this id; steps and
        model are kept when not given."""
        ...

    async def update_plan(
        self,
        user_id: str,
        chat_id: str,
        plan_id: str,
        *,
        goal: str | None = None,
        status: str | None = None,
        steps: Sequence[str] | None = None,
    ) -> Plan | None:
        """Change what is given; None when this user has no such plan in this chat."""
        ...

    async def list_plans(self, user_id: str, chat_id: str, *, limit: int = LIST_LIMIT) -> list[Plan]:
        """The ``limit`` most recently updated plans of the chat, in the order they were made."""
        ...

    async def commit_code(
        self, user_id: str, chat_id: str, entry_id: str, *, lang: str, content: str, message: str
    ) -> CodeEntry:
        """Store a code entry's new content (version 1, or one up); its lines counted."""
        ...

    async def read_code(self, user_id: str, chat_id: str, entry_id: str) -> CodeEntry | None: ...

    async def list_code(self, user_id: str, chat_id: str, *, limit: int = LIST_LIMIT) -> list[CodeEntry]:
        """The ``limit`` most recently committed entries of the chat (no content), oldest first."""
        ...

    async def snapshot(
        self, user_id: str, chat_id: str, *, limit: int = SNAPSHOT_LIMIT
    ) -> tuple[list[aec.PlanEntry], list[aec.CodexEntry]]:
        """What the AEC block lists: the ``limit`` most recently updated plans and code entries."""
        ...

    async def forget(self, user_id: str) -> dict[str, int]:
        """Delete every plan and code entry of a user; how many of each (``plans``, ``codex_entries``)."""
        ...


# Shadow ---------------------------------------------------------------------------------------


class ShadowStore(Protocol):
    """The rich shadow: per user and point of a conversation, the rich form of its message."""

    async def stored_points(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.StoredPoint]:
        """The points among ``hashes`` that have a rich form, by cumulative hash."""
        ...

    async def payloads(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.Payload]:
        """The payloads among ``hashes``; absent ones are missing."""
        ...

    async def record(self, user_id: str, record: shadow.PointRecord) -> int:
        """Store one point (a stored one keeps what it has, except that an index row without a rich
        form gets one); how many of its payloads were new."""
        ...

    async def forget(self, user_id: str) -> dict[str, int]:
        """Delete every shadow row of a user; the counts deleted, by table (``suture_index``,
        ``rich_payloads``, ``cognitive_signatures``, ``tool_journal``)."""
        ...


# Transactions ---------------------------------------------------------------------------------


class Transactions(Protocol):
    """Where a ``Connection`` comes from: a transaction, committed when the block ends and rolled
    back when it raises. What rolls back is what the block wrote with its connection; a write made
    without it (``connection=None``, or a method that takes none) is its own transaction. Locks taken
    with it (``MemoryStore.user_lock``) are held until the block ends."""

    def transaction(self) -> AbstractAsyncContextManager[Connection]: ...
