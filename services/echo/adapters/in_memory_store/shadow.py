"""The rich shadow in memory: ``echo.adapters.store.shadow`` over ``Tables``.

A point is keyed by (user, cumulative hash) and keeps what it has, except that an index row without a
rich form gets one; its signatures and tool journal are written with it (only when the point is
written), payloads once per user and hash whatever the point. No caches: the rows are at hand.
"""

from __future__ import annotations

from collections.abc import Iterable

from echo.adapters.in_memory_store import tables as tables_module
from echo.domain import shadow
from echo.ports import store as store_port

__all__ = ["ShadowStore"]

storable_arguments = tables_module.storable_arguments


class ShadowStore(store_port.ShadowStore):
    """The rich shadow of one tenant (``Tables``)."""

    def __init__(self, tables: tables_module.Tables) -> None:
        self.tables = tables

    def _point(self, user_id: str, cumulative: str, row: tables_module.PointRow) -> shadow.StoredPoint:
        signatures = sorted(
            (ci, pi, signature)
            for (owner, point, ci, pi), signature in self.tables.cognitive_signatures.items()
            if (owner, point) == (user_id, cumulative)
        )
        calls = sorted(
            (index, call)
            for (owner, point, index), call in self.tables.tool_journal.items()
            if (owner, point) == (user_id, cumulative)
        )
        journal = []
        for index, call in calls:
            arguments = tables_module.loaded(call.arguments)
            response = None if call.response is None else tables_module.loaded(call.response)
            journal.append(
                shadow.JournalEntry(
                    call_index=index,
                    call_id=call.call_id,
                    name=call.name,
                    arguments=arguments if isinstance(arguments, dict) else {},
                    executor="echo" if call.executor == "echo" else "openwebui",
                    response=response if isinstance(response, dict) else None,
                )
            )
        return shadow.StoredPoint(
            cumulative=cumulative,
            role=row.role,
            skeleton=None if row.rich is None else tables_module.loaded(row.rich),
            refs=row.refs,
            signatures=tuple(shadow.Signature(ci, pi, signature) for ci, pi, signature in signatures),
            journal=tuple(journal),
        )

    @storable_arguments
    async def stored_points(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.StoredPoint]:
        found: dict[str, shadow.StoredPoint] = {}
        for cumulative in dict.fromkeys(hashes):
            row = self.tables.suture_index.get((user_id, cumulative))
            if row is not None and row.rich is not None:
                found[cumulative] = self._point(user_id, cumulative, row)
        return found

    @storable_arguments
    async def payloads(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.Payload]:
        found: dict[str, shadow.Payload] = {}
        for payload_hash in dict.fromkeys(hashes):
            payload = self.tables.rich_payloads.get((user_id, payload_hash))
            if payload is not None:
                found[payload_hash] = payload
        return found

    @storable_arguments
    async def record(self, user_id: str, record: shadow.PointRecord) -> int:
        form = record.form
        key = (user_id, record.cumulative)
        rich = None if form is None else tables_module.dumped(form.skeleton)
        refs = () if form is None else tuple(form.refs)
        known = self.tables.suture_index.get(key)
        written = False
        if known is None:
            self.tables.suture_index[key] = tables_module.PointRow(
                position=record.position,
                parent=record.parent,
                invariant=record.invariant,
                chat_id=record.chat_id,
                role=record.role,
                rich=rich,
                refs=refs,
                model=record.model,
            )
            written = True
        elif known.rich is None and rich is not None:
            known.rich, known.refs = rich, refs
            written = True
        new_payloads = 0
        for payload in form.payloads if form is not None else ():
            if (user_id, payload.hash) not in self.tables.rich_payloads:
                self.tables.rich_payloads[(user_id, payload.hash)] = payload
                new_payloads += 1
        if written:
            for signature in form.signatures if form is not None else ():
                self.tables.cognitive_signatures.setdefault(
                    (user_id, record.cumulative, signature.content_index, signature.part_index),
                    bytes(signature.signature),
                )
            for entry in record.journal:
                self.tables.tool_journal.setdefault(
                    (user_id, record.cumulative, entry.call_index),
                    tables_module.JournalRecord(
                        call_id=entry.call_id,
                        name=entry.name,
                        arguments=tables_module.dumped(dict(entry.arguments)),
                        response=None
                        if entry.response is None
                        else tables_module.dumped(dict(entry.response)),
                        executor=entry.executor,
                    ),
                )
        return new_payloads

    @storable_arguments
    async def forget(self, user_id: str) -> dict[str, int]:
        return {
            "suture_index": tables_module.forget_rows(self.tables.suture_index, user_id),
            "rich_payloads": tables_module.forget_rows(self.tables.rich_payloads, user_id),
            "cognitive_signatures": tables_module.forget_rows(self.tables.cognitive_signatures, user_id),
            "tool_journal": tables_module.forget_rows(self.tables.tool_journal, user_id),
        }
