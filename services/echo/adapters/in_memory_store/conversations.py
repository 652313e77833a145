"""The conversation store in memory: ``echo.adapters.store.conversations`` over ``Tables``.

Messages once per user by invariant hash (a known one stays as it was), one summary per user and
branch point (``covered_hash``), the branch-valid lookup of migration 0009 (the summary whose key is
the branch's hash at the position it covers, the most turns covered winning), chat heads rewritten
only when their head hash changes, summary failures taken by the next inlet. ``summary_lock`` is an
``asyncio.Lock`` per user and scope: one holder at a time within this process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from echo.adapters.in_memory_store import tables as tables_module
from echo.domain import chain
from echo.domain.compression import selection
from echo.ports import store as store_port

__all__ = ["Conversations"]

storable_arguments = tables_module.storable_arguments


def _branch(hashes: Sequence[str]) -> list[str]:
    """The branch's hashes as the lookups take them; each must be 64 characters (as PostgreSQL's
    adapter checks the joined text)."""
    joined = ",".join(hashes)
    if hashes and len(joined) != 65 * len(hashes) - 1:
        raise ValueError("turn hashes are 64 hex digits each")
    return joined.split(",") if joined else []


def _row(record: tables_module.SummaryRecord) -> store_port.SummaryRow:
    return store_port.SummaryRow(
        summary=selection.StoredSummary(
            covered_hash=record.covered_hash,
            covered_count=record.covered_count,
            text=record.text,
            head_count=record.head_count,
            created_at=record.created_at,
            summary_id=str(record.id),
        ),
        locale=record.locale,
        model=record.model,
        provider=record.provider,
        refs=record.refs,
    )


class Conversations(store_port.ConversationStore):
    """The conversation store of one tenant (``Tables``). Every write is applied at once; one given
    a ``Transaction`` (``connection``) is undone if its block raises."""

    def __init__(self, tables: tables_module.Tables) -> None:
        self.tables = tables

    def _remember(
        self,
        user_id: str,
        messages: Mapping[str, Mapping[str, Any]],
        connection: store_port.Connection | None = None,
    ) -> None:
        known = self.tables.messages
        tables_module.saving(connection, known, [(user_id, i) for i in messages if (user_id, i) not in known])
        for invariant, message in messages.items():
            known.setdefault((user_id, invariant), tables_module.dumped(dict(message)))

    def _best(self, user_id: str, hashes: Sequence[str]) -> store_port.SummaryRow | None:
        summaries = self.tables.summaries
        for position in range(len(hashes), 0, -1):
            found = summaries.get((user_id, hashes[position - 1]))
            if found is not None and found.covered_count == position:
                return _row(found)
        return None

    def _record_head(
        self,
        user_id: str,
        chat_id: str,
        invariants: Sequence[str],
        head_hash: str | None,
        connection: store_port.Connection | None = None,
    ) -> None:
        key = (user_id, chat_id)
        known = self.tables.chat_heads.get(key)
        if known is not None and known.head_hash == head_hash:
            return  # an unchanged head is not rewritten
        tables_module.saving(connection, self.tables.chat_heads, [key])
        self.tables.chat_heads[key] = tables_module.ChatHead(tuple(invariants), head_hash, self.tables.now())

    @storable_arguments
    async def remember(
        self,
        user_id: str,
        messages: Mapping[str, Mapping[str, Any]],
        *,
        connection: store_port.Connection | None = None,
    ) -> None:
        self._remember(user_id, messages, connection)

    @storable_arguments
    async def messages(self, user_id: str, invariants: Iterable[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for invariant in sorted(set(invariants)):
            stored = self.tables.messages.get((user_id, invariant))
            if stored is not None:
                found[invariant] = tables_module.loaded(stored)
        return found

    @storable_arguments
    async def best_summary(self, user_id: str, hashes: Sequence[str]) -> store_port.SummaryRow | None:
        if not hashes:
            return None
        return self._best(user_id, _branch(hashes))

    @storable_arguments
    async def inlet_lookup(
        self, user_id: str, hashes: Sequence[str], chat_id: str | None
    ) -> store_port.InletLookup:
        best = self._best(user_id, _branch(hashes))
        taken = self.tables.summary_failures.pop((user_id, chat_id), None) if chat_id else None
        failure = None
        if taken is not None:
            failure = store_port.SummaryFailure(taken.reason, taken.detail, taken.failures)
        return store_port.InletLookup(best, failure)

    @storable_arguments
    async def record_summary_failure(self, user_id: str, chat_id: str, reason: str, detail: str) -> None:
        if not chat_id:
            return
        detail = detail[: store_port.FAILURE_DETAIL_CHARS]
        known = self.tables.summary_failures.get((user_id, chat_id))
        if known is None:
            self.tables.summary_failures[(user_id, chat_id)] = tables_module.FailureRecord(reason, detail, 1)
        else:
            known.reason, known.detail, known.failures = reason, detail, known.failures + 1

    @storable_arguments
    async def clear_summary_failure(self, user_id: str, chat_id: str) -> None:
        if chat_id:
            self.tables.summary_failures.pop((user_id, chat_id), None)

    @storable_arguments
    async def summaries_at(self, user_id: str, hashes: Iterable[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for covered_hash in sorted(set(hashes)):
            record = self.tables.summaries.get((user_id, covered_hash))
            if record is not None:
                found[covered_hash] = record.covered_count
        return found

    @storable_arguments
    async def summary(self, user_id: str, covered_hash: str) -> store_port.SummaryRow | None:
        record = self.tables.summaries.get((user_id, covered_hash))
        return None if record is None else _row(record)

    @storable_arguments
    async def save_summary(self, new: store_port.NewSummary) -> bool:
        key = (new.user_id, new.covered_hash)
        if key in self.tables.summaries:
            return False
        selection.StoredSummary(new.covered_hash, new.covered_count, new.text, new.head_count)  # the checks
        self.tables.summaries[key] = tables_module.SummaryRecord(
            id=self.tables.next_id(),
            covered_hash=new.covered_hash,
            covered_count=new.covered_count,
            head_count=new.head_count,
            text=new.text,
            locale=new.locale,
            model=new.model,
            provider=new.provider,
            refs=tuple(new.refs),
            input_tokens=new.input_tokens,
            summary_tokens=new.summary_tokens,
            created_at=self.tables.now(),
        )
        return True

    @contextlib.asynccontextmanager
    async def summary_lock(self, user_id: str, scope: str) -> AsyncIterator[None]:
        lock = self.tables.summary_locks.setdefault((user_id, scope), asyncio.Lock())
        async with lock:
            yield

    @storable_arguments
    async def forget(self, user_id: str) -> tuple[int, int]:
        summaries = tables_module.forget_rows(self.tables.summaries, user_id)
        messages = tables_module.forget_rows(self.tables.messages, user_id)
        tables_module.forget_rows(self.tables.chat_heads, user_id)
        tables_module.forget_rows(self.tables.summary_failures, user_id)
        return summaries, messages

    @storable_arguments
    async def record_head(
        self,
        user_id: str,
        chat_id: str,
        invariants: Sequence[str],
        *,
        head_hash: str | None = None,
        connection: store_port.Connection | None = None,
    ) -> None:
        if not chat_id:
            return
        if head_hash is None:
            for invariant in invariants:
                head_hash = chain.cumulative_hash(invariant, head_hash)
        self._record_head(user_id, chat_id, invariants, head_hash, connection)

    @storable_arguments
    async def outlet_statement(
        self,
        user_id: str,
        messages: Mapping[str, Mapping[str, Any]],
        *,
        chat_id: str | None,
        invariants: Sequence[str],
        head_hash: str | None,
        lookup: Sequence[str],
    ) -> store_port.SummaryRow | None:
        branch = _branch(lookup)
        self._remember(user_id, messages)
        if chat_id:
            self._record_head(user_id, chat_id, invariants, head_hash)
        return self._best(user_id, branch)

    @storable_arguments
    async def latest_branch(self, user_id: str, chat_id: str) -> list[str] | None:
        head = self.tables.chat_heads.get((user_id, chat_id)) if chat_id else None
        return None if head is None else list(head.invariants)
