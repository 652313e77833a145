"""One tenant's rows in dicts (the counterpart of a tenant schema), its clock and its transactions.

``Tables`` holds every table the repositories of this package read and write, keyed as the
PostgreSQL schema keys them (``user_id`` first), so two repositories built on one ``Tables`` see the
same rows, as two built on one ``pool.Store`` do. Its clock never answers the same instant twice
(PostgreSQL's ``now()`` moves on between statements), so orderings by time have no ties. Its
transactions are units of work: a block that raises has what it wrote with its ``Transaction``
undone (``saving``, ``Transaction.rollback``).

``storable_arguments`` makes what a method receives storable as ``pool`` does for every parameter
(``echo.domain.text``: NUL and lone surrogates become U+FFFD), dataclass fields included.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from echo.domain import shadow, text
from echo.domain.memory import records

__all__ = [
    "Tables",
    "Transaction",
    "dumped",
    "forget_rows",
    "loaded",
    "saving",
    "storable",
    "storable_arguments",
]

P = ParamSpec("P")
R = TypeVar("R")


def _frozen(value: Any) -> bool:
    return bool(value.__dataclass_params__.frozen)


def storable(value: Any) -> Any:
    """``value`` with every text in it made storable (strings, lists, tuples, dicts, frozen
    dataclasses: the values a repository is given)."""
    if isinstance(value, str):
        return text.storable(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and _frozen(value):
        changes = {}
        for item in dataclasses.fields(value):
            old = getattr(value, item.name)
            new = storable(old)
            if new is not old:
                changes[item.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, list | tuple):
        fixed = [storable(item) for item in value]
        if all(new is old for new, old in zip(fixed, value, strict=True)):
            return value
        return fixed if isinstance(value, list) else tuple(fixed)
    if isinstance(value, dict):
        return text.storable_value(value)
    return value


def storable_arguments(method: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The method with its arguments made storable first (``storable``)."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        fixed_args = [args[0], *(storable(arg) for arg in args[1:])]  # args[0]: self
        fixed_kwargs = {key: storable(value) for key, value in kwargs.items()}
        return await method(*fixed_args, **fixed_kwargs)

    return wrapper


def dumped(value: Any) -> str:
    """A JSON value as a json or jsonb column keeps it (``loaded`` reads a fresh copy back)."""
    return text.dumps(value)


def loaded(stored: str) -> Any:
    return json.loads(stored)


_ABSENT = object()  # what a key had before the block's first change of it: nothing


class Transaction:
    """What ``Tables.transaction`` yields, the ``Connection`` the repositories take: a unit of work.

    Writes apply at once (the block and everyone else read them straight away); a repository given
    the transaction first saves what each row it changes held (``save``), and when the block raises,
    ``rollback`` puts every saved row back as it was, so the block's writes are undone together as
    PostgreSQL's transaction undoes them. A write made without the transaction is not undone. Locks
    taken with it (``Memories.user_lock``) are held until the block ends, as a transaction-scoped
    advisory lock is."""

    def __init__(self) -> None:
        self.locks: dict[object, asyncio.Lock] = {}
        self._undo: list[tuple[dict[Any, Any], Any, Any]] = []
        self._saved: set[tuple[int, Any]] = set()

    def save(self, table: dict[Any, Any], key: Any) -> None:
        """Keep what ``table[key]`` holds now (a copy, or that it is absent), the first time the
        block is about to change it."""
        marker = (id(table), key)
        if marker in self._saved:
            return
        self._saved.add(marker)
        before = table.get(key, _ABSENT)
        self._undo.append((table, key, before if before is _ABSENT else copy.deepcopy(before)))

    def rollback(self) -> None:
        """Put every saved row back as it was before the block, latest change first."""
        for table, key, before in reversed(self._undo):
            if before is _ABSENT:
                table.pop(key, None)
            else:
                table[key] = before
        self._undo.clear()
        self._saved.clear()

    def release(self) -> None:
        for lock in self.locks.values():
            lock.release()
        self.locks.clear()


def saving(connection: object, table: dict[Any, Any], keys: Iterable[Any]) -> None:
    """Before a repository changes ``keys`` of ``table``: saved for a rollback when ``connection``
    is a ``Transaction``; nothing otherwise (the write is its own transaction)."""
    if isinstance(connection, Transaction):
        for key in keys:
            connection.save(table, key)


@dataclass
class SummaryRecord:
    id: int
    covered_hash: str
    covered_count: int
    head_count: int
    text: str
    locale: str
    model: str
    provider: str
    refs: tuple[str, ...]
    input_tokens: int
    summary_tokens: int
    created_at: float


@dataclass
class ChatHead:
    invariants: tuple[str, ...]
    head_hash: str | None
    updated_at: float


@dataclass
class FailureRecord:
    reason: str
    detail: str
    failures: int


@dataclass
class MemoryRecord:
    id: str
    user_id: str
    memory_id: str
    summary: str
    importance: int
    tags: tuple[str, ...]
    chat_id: str | None
    version: int
    indexed_version: int
    provenance: list[str]  # each window as its JSON text
    provider: str
    model: str
    created_at: float
    updated_at: float


@dataclass
class WindowRecord:
    chat_id: str | None
    outcome: str
    memory: str | None
    reason: str | None


@dataclass
class AttachmentRecord:
    source_id: str
    chat_id: str
    file_id: str | None
    filename: str
    mime_type: str
    mode: str
    status: str
    content_sha256: str | None
    size_bytes: int
    pending_text: str | None
    summary: str | None
    summary_mode: str | None
    chunks: int
    error: str | None
    created_at: float
    updated_at: float
    expires_at: float


@dataclass
class PlanRecord:
    goal: str
    status: str
    model: str | None
    steps: str  # JSON text
    created_at: float
    updated_at: float


@dataclass
class CodeRecord:
    lang: str
    content: str
    lines: int
    last_commit: str
    version: int
    created_at: float
    updated_at: float


@dataclass
class PointRow:
    position: int
    parent: str | None
    invariant: str
    chat_id: str
    role: str
    rich: str | None  # JSON text, as a json column keeps it
    refs: tuple[str, ...]
    model: str | None


@dataclass
class JournalRecord:
    call_id: str
    name: str
    arguments: str  # JSON text
    response: str | None  # JSON text
    executor: str


@dataclass
class Tables:
    """One tenant's rows. ``clock``: seconds since the epoch (inject one to control time);
    ``jobs``: the ids of the jobs that exist (``Memories.job_alive``), None when no queue is known
    (then every job is alive)."""

    clock: Callable[[], float] = time.time
    jobs: set[int] | None = None

    messages: dict[tuple[str, str], str] = field(default_factory=dict)
    summaries: dict[tuple[str, str], SummaryRecord] = field(default_factory=dict)
    chat_heads: dict[tuple[str, str], ChatHead] = field(default_factory=dict)
    summary_failures: dict[tuple[str, str], FailureRecord] = field(default_factory=dict)
    memories: dict[tuple[str, str], MemoryRecord] = field(default_factory=dict)
    memory_versions: dict[tuple[str, str, int], records.MemoryVersion] = field(default_factory=dict)
    memory_windows: dict[tuple[str, str], WindowRecord] = field(default_factory=dict)
    attachments: dict[tuple[str, str], AttachmentRecord] = field(default_factory=dict)
    plans: dict[tuple[str, str, str], PlanRecord] = field(default_factory=dict)
    codex_entries: dict[tuple[str, str, str], CodeRecord] = field(default_factory=dict)
    suture_index: dict[tuple[str, str], PointRow] = field(default_factory=dict)
    rich_payloads: dict[tuple[str, str], shadow.Payload] = field(default_factory=dict)
    cognitive_signatures: dict[tuple[str, str, int, int], bytes] = field(default_factory=dict)
    tool_journal: dict[tuple[str, str, int], JournalRecord] = field(default_factory=dict)

    summary_locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict, repr=False)
    user_locks: dict[str, asyncio.Lock] = field(default_factory=dict, repr=False)
    _last_instant: float = field(default=0.0, repr=False)
    _last_id: int = field(default=0, repr=False)

    def now(self) -> float:
        """The clock's time, always later than the last answer (by a microsecond at least)."""
        instant = max(float(self.clock()), self._last_instant + 1e-6)
        self._last_instant = instant
        return instant

    def next_id(self) -> int:
        """The next value of an identity column."""
        self._last_id += 1
        return self._last_id

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """A ``Transaction`` for the block: what the block wrote with it is undone when the block
        raises (cancelled included), and its locks are released when the block ends."""
        transaction = Transaction()
        try:
            yield transaction
        except BaseException:
            transaction.rollback()
            raise
        finally:
            transaction.release()


def forget_rows(table: dict[Any, Any], user_id: str, connection: object = None) -> int:
    """Delete a user's rows of one table (keys start with the user id), inside ``connection``'s
    transaction when it is one (``saving``); how many."""
    doomed = [key for key in table if key[0] == user_id]
    saving(connection, table, doomed)
    for key in doomed:
        del table[key]
    return len(doomed)
