"""The conversation store: messages once per user by invariant hash, and branch-aware summaries.

Migration 0004. Messages are content-addressed (DESIGN §9): a message is stored once per user under
its ``echo.domain.chain`` invariant hash, in the form ``stored_message`` gives it (what a reader needs to
rebuild the turn, pasted images as their digest instead of their bytes), so that job payloads carry
hashes, not transcripts. A summary is keyed by ``(user_id, covered_hash)``: the cumulative hash of
the last turn it covers (``echo.domain.compression.selection``); ``best_summary`` is the inlet's one indexed
lookup. Every read and write names the user: a user never reads another user's rows.

Chat heads (migration 0005): ``record_head`` keeps, per user and Open WebUI chat id, the latest branch
ECHO has seen (the ordered invariant hashes of its turns; echo_compression's outlet writes it on every
completed turn) and ``latest_branch`` reads it back. Referenced chats
(``echo.capabilities.compression.references``)
rebuild a chat's transcript from it, and manual compaction (``POST /chats/{chat_id}/compact``)
summarises "the chat's latest branch" from it: one table for both.

Summary jobs of one chat branch run one at a time (``summary_lock``), so a later job folds the
summary an earlier one made instead of both folding the same previous one.

Summary failures (migration 0007): a summary job that gives up writes ``record_summary_failure``
for its chat; the chat's next inlet reads and removes it in its one statement (``inlet_lookup``) and
tells the user, once; a later success of the chat clears it.

Forgetting: ``forget`` deletes a user's summaries, messages, chat heads and summary failures;
``DELETE /users/{id}`` runs it among the parts of ``echo.capabilities.memory.forgetting``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from echo.adapters.store import errors, pool, queries
from echo.domain import chain
from echo.domain.compression import selection
from echo.ports import store as store_port

__all__ = ["Conversations", "InletLookup", "NewSummary", "SummaryFailure", "SummaryRow", "stored_message"]

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.adapters.store", "conversations.sql")


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    return role.strip().lower() if isinstance(role, str) else ""


def _content(content: object) -> str | list[dict[str, Any]]:
    """A content as stored: a string as is; a list as its text parts and image digests."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            digest = chain.message_text([part])  # "[image sha256:…]", or "" for a part without a URL
            if digest:
                parts.append({"type": "image_url", "image_url": {"url": digest}})
    return parts


def stored_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """What is stored of one message: role, content, tool calls, tool call id, name, file ids and
    Open WebUI's ``timestamp`` (when it was sent: a distilled fact keeps its day). The first form
    stored under a hash stays, so a message said again later keeps the day it was first said."""
    stored: dict[str, Any] = {"role": _role(message), "content": _content(message.get("content"))}
    sent = message.get("timestamp")
    if isinstance(sent, int | float) and not isinstance(sent, bool) and math.isfinite(sent):
        stored["timestamp"] = sent
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        kept = []
        for call in calls:
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            kept.append(
                {
                    "id": call.get("id") if isinstance(call.get("id"), str) else "",
                    "type": "function",
                    "function": {"name": function.get("name"), "arguments": function.get("arguments")},
                }
            )
        if kept:
            stored["tool_calls"] = kept
    for key in ("tool_call_id", "name"):
        if isinstance(message.get(key), str):
            stored[key] = message[key]
    files = chain.message_file_ids(message)
    if files:
        stored["files"] = sorted(set(files))
    return stored


# The values live in the port (re-exported here, so `conversations.SummaryRow` and the rest still work).
SummaryRow = store_port.SummaryRow
NewSummary = store_port.NewSummary
SummaryFailure = store_port.SummaryFailure
InletLookup = store_port.InletLookup
FAILURE_DETAIL_CHARS = store_port.FAILURE_DETAIL_CHARS


def _summary_row(row: pool.Record) -> SummaryRow:
    return SummaryRow(
        summary=selection.StoredSummary(
            covered_hash=row["covered_hash"],
            covered_count=row["covered_count"],
            text=row["text"],
            head_count=row["head_count"],
            created_at=float(row["created_at"]),
            summary_id=str(row["id"]),
        ),
        locale=row["locale"],
        model=row["model"],
        provider=row["provider"],
        refs=tuple(row["refs"]),
    )


class Conversations(store_port.ConversationStore):
    """The conversation store of one tenant (the store's schema)."""

    def __init__(self, store: pool.Store) -> None:
        self.store = store

    async def remember(
        self,
        user_id: str,
        messages: Mapping[str, Mapping[str, Any]],
        *,
        connection: pool.Connection | None = None,
    ) -> None:
        """Store ``messages`` (invariant hash -> ``stored_message``) in one statement; known ones stay."""
        if not messages:
            return
        invariants = list(messages)
        args = (
            user_id,
            invariants,
            [str(messages[key].get("role", "")) for key in invariants],
            [dict(messages[key]) for key in invariants],
        )
        if connection is not None:
            await connection.execute(_sql()["remember_messages"], *args)
        else:
            await self.store.execute(_sql()["remember_messages"], *args)

    async def messages(self, user_id: str, invariants: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored messages among ``invariants`` (absent ones are missing from the answer)."""
        wanted = sorted(set(invariants))
        if not wanted:
            return {}
        rows = await self.store.fetch(_sql()["messages_by_hash"], user_id, wanted)
        return {row["invariant"]: row["message"] for row in rows}

    async def best_summary(self, user_id: str, hashes: Sequence[str]) -> SummaryRow | None:
        """The summary valid for the branch whose turn hashes are ``hashes`` that covers the most."""
        if not hashes:
            return None
        row = await self.store.fetchrow(_sql()["best_summary"], user_id, _joined(hashes))
        return None if row is None else _summary_row(row)

    async def inlet_lookup(self, user_id: str, hashes: Sequence[str], chat_id: str | None) -> InletLookup:
        """``best_summary`` and the chat's summary failure not shown yet (taken: shown once), in one
        statement."""
        row = await self.store.fetchrow(_sql()["inlet_lookup"], user_id, _joined(hashes), chat_id or "")
        if row is None:  # the statement always answers one row
            return InletLookup(None, None)
        failure = None
        if row["failure_reason"] is not None:
            failure = SummaryFailure(row["failure_reason"], row["failure_detail"], row["failure_count"])
        return InletLookup(None if row["id"] is None else _summary_row(row), failure)

    async def record_summary_failure(self, user_id: str, chat_id: str, reason: str, detail: str) -> None:
        """A summary job of this chat gave up; its next inlet says so (``inlet_lookup``)."""
        if chat_id:
            await self.store.execute(
                _sql()["record_summary_failure"], user_id, chat_id, reason, detail[:FAILURE_DETAIL_CHARS]
            )

    async def clear_summary_failure(self, user_id: str, chat_id: str) -> None:
        """A summary of this chat succeeded: an earlier failure is no longer news."""
        if chat_id:
            await self.store.execute(_sql()["clear_summary_failure"], user_id, chat_id)

    async def summaries_at(self, user_id: str, hashes: Iterable[str]) -> dict[str, int]:
        """Covered hash -> covered count of the user's summaries keyed by any of ``hashes``."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        rows = await self.store.fetch(_sql()["summaries_at"], user_id, wanted)
        return {row["covered_hash"]: row["covered_count"] for row in rows}

    async def summary(self, user_id: str, covered_hash: str) -> SummaryRow | None:
        row = await self.store.fetchrow(_sql()["summary_at"], user_id, covered_hash)
        return None if row is None else _summary_row(row)

    async def save_summary(self, new: NewSummary) -> bool:
        """Store a summary; False when its branch point already had one (that one stays)."""
        summary_id = await self.store.fetchval(
            _sql()["save_summary"],
            new.user_id,
            new.covered_hash,
            new.covered_count,
            new.head_count,
            new.text,
            new.locale,
            new.model,
            new.provider,
            list(new.refs),
            new.input_tokens,
            new.summary_tokens,
        )
        return summary_id is not None

    @contextlib.asynccontextmanager
    async def summary_lock(self, user_id: str, scope: str) -> AsyncIterator[None]:
        """Hold the summary lock of one chat branch of a user (``scope``, e.g. ``chat:<id>``) while the
        block runs; a second holder waits for the first.

        A session advisory lock on a connection of its own (no statement timeout: the wait is bounded
        by the job's own timeout, which cancels the block), closed when the block ends, so a cancelled
        block leaves no lock and a long wait holds no pooled connection."""
        sql = _sql()
        async with self.store.dedicated() as connection:
            await connection.fetchval(sql["lock_summaries"], self.store.schema, user_id, scope)
            try:
                yield
            finally:
                with contextlib.suppress(errors.StoreError):
                    await connection.fetchval(sql["unlock_summaries"], self.store.schema, user_id, scope)

    async def forget(self, user_id: str) -> tuple[int, int]:
        """Delete every summary, message and chat head of a user; the counts (summaries, messages) deleted."""
        sql = _sql()
        async with self.store.transaction() as connection:
            summaries = await connection.execute(sql["forget_summaries"], user_id)
            messages = await connection.execute(sql["forget_messages"], user_id)
            await connection.execute(sql["forget_heads"], user_id)
            await connection.execute(sql["forget_summary_failures"], user_id)
        return _count(summaries), _count(messages)

    async def record_head(
        self,
        user_id: str,
        chat_id: str,
        invariants: Sequence[str],
        *,
        head_hash: str | None = None,
        connection: pool.Connection | None = None,
    ) -> None:
        """Record the latest branch of a chat: its turns' invariant hashes, in order (system messages
        excluded). ``head_hash``, the cumulative hash of the last turn, is computed when not given."""
        if not chat_id:
            return
        ordered = list(invariants)
        if head_hash is None:
            for invariant in ordered:
                head_hash = chain.cumulative_hash(invariant, head_hash)
        args = (user_id, chat_id, ordered, head_hash)
        if connection is not None:
            await connection.execute(_sql()["record_head"], *args)
        else:
            await self.store.execute(_sql()["record_head"], *args)

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
        """``remember`` the ``messages``, ``record_head`` of ``chat_id`` (None: none recorded) and
        ``best_summary`` for the branch ``lookup`` (empty: none looked up), in one statement."""
        keys = list(messages)
        row = await self.store.fetchrow(
            _sql()["outlet_statement"],
            user_id,
            keys,
            [str(messages[key].get("role", "")) for key in keys],
            [dict(messages[key]) for key in keys],
            chat_id or "",
            list(invariants) if chat_id else [],
            head_hash if chat_id else None,
            _joined(lookup),
        )
        return None if row is None else _summary_row(row)

    async def latest_branch(self, user_id: str, chat_id: str) -> list[str] | None:
        """The invariant hashes of the latest branch recorded for a chat of this user, in order; None
        when ECHO has not seen the chat (or it belongs to another user)."""
        if not chat_id:
            return None
        found = await self.store.fetchval(_sql()["latest_branch"], user_id, chat_id)
        return None if found is None else list(found)


def _joined(hashes: Sequence[str]) -> str:
    """A branch's turn hashes as the summary lookups take them: one text, 64 hex digits each,
    comma-separated. Anything but such digests would shift every later position, so the total
    length is checked."""
    joined = ",".join(hashes)
    if hashes and len(joined) != 65 * len(hashes) - 1:
        raise ValueError("turn hashes are 64 hex digits each")
    return joined


def _count(status: str) -> int:
    """The row count of a command status such as ``DELETE 3``."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0
