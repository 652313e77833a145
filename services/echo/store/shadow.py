"""The rich shadow's store (migration 0010): points, payloads, signatures and the tool journal.

``stored_points`` is the pipe's one lookup per call (the rows of every point of the history that has
a rich form, with their signatures and journal); ``payloads`` reads the heavy parts they name, and
``PayloadCache`` keeps those already read in this process (they are content-addressed, so a cached
payload can never be stale). ``record`` writes one point in one statement. Every read and write
names the user. ``forget`` deletes a user's rows of all four tables (``echo.jobs.forgetting``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from echo import shadow
from echo.store import pool, queries

__all__ = ["PROCESS_CACHE", "PayloadCache", "ShadowStore"]


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.store", "shadow.sql")


class PayloadCache:
    """The payloads this process read or wrote lately, per user, up to ``max_bytes`` (LRU)."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], shadow.Payload] = OrderedDict()
        self._bytes = 0

    def get(self, user_id: str, payload_hash: str) -> shadow.Payload | None:
        found = self._items.get((user_id, payload_hash))
        if found is not None:
            self._items.move_to_end((user_id, payload_hash))
        return found

    def put(self, user_id: str, payload: shadow.Payload) -> None:
        key = (user_id, payload.hash)
        if key in self._items or len(payload.data) > self.max_bytes:
            return
        self._items[key] = payload
        self._bytes += len(payload.data)
        while self._bytes > self.max_bytes:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= len(dropped.data)

    def forget(self, user_id: str) -> None:
        for key in [key for key in self._items if key[0] == user_id]:
            self._bytes -= len(self._items.pop(key).data)


PROCESS_CACHE = PayloadCache()
"""The payload cache every ``ShadowStore`` of this process shares (so forgetting a user empties it)."""


def _stored_point(row: pool.Record) -> shadow.StoredPoint:
    signatures = tuple(
        shadow.Signature(ci, pi, bytes(sig))
        for ci, pi, sig in zip(
            row["content_indexes"] or (), row["part_indexes"] or (), row["signatures"] or (), strict=True
        )
    )
    journal = tuple(
        shadow.JournalEntry(
            call_index=int(call["call_index"]),
            call_id=str(call["call_id"]),
            name=str(call["name"]),
            arguments=call["arguments"] if isinstance(call["arguments"], dict) else {},
            executor="echo" if call["executor"] == "echo" else "openwebui",
            response=call["response"] if isinstance(call["response"], dict) else None,
        )
        for call in (row["calls"] or ())
    )
    return shadow.StoredPoint(
        cumulative=row["cumulative_hash"],
        role=row["role"],
        skeleton=row["rich"],
        refs=tuple(row["refs"] or ()),
        signatures=signatures,
        journal=journal,
    )


class ShadowStore:
    """The rich shadow of one tenant (the store's schema)."""

    def __init__(self, store: pool.Store, cache: PayloadCache | None = None) -> None:
        self.store = store
        self.cache = cache if cache is not None else PROCESS_CACHE

    async def stored_points(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.StoredPoint]:
        """The points among ``hashes`` that have a rich form, by cumulative hash."""
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = await self.store.fetch(_sql()["stored_points"], user_id, wanted)
        return {row["cumulative_hash"]: _stored_point(row) for row in rows}

    async def payloads(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.Payload]:
        """The payloads among ``hashes`` (from the cache, the rest in one query); absent ones are missing."""
        found: dict[str, shadow.Payload] = {}
        missing: list[str] = []
        for payload_hash in dict.fromkeys(hashes):
            cached = self.cache.get(user_id, payload_hash)
            if cached is not None:
                found[payload_hash] = cached
            else:
                missing.append(payload_hash)
        if missing:
            for row in await self.store.fetch(_sql()["payloads"], user_id, missing):
                payload = shadow.Payload(
                    row["payload_hash"], row["kind"], row["mime_type"], bytes(row["data"])
                )
                self.cache.put(user_id, payload)
                found[payload.hash] = payload
        return found

    async def record(self, user_id: str, record: shadow.PointRecord) -> int:
        """Store one point; how many of its payloads were new."""
        form = record.form
        payloads: Sequence[shadow.Payload] = form.payloads if form is not None else ()
        signatures: Sequence[shadow.Signature] = form.signatures if form is not None else ()
        journal = record.journal
        args: list[Any] = [
            user_id,
            record.cumulative,
            record.position,
            record.parent,
            record.invariant,
            record.chat_id,
            record.role,
            form.skeleton if form is not None else None,
            list(form.refs) if form is not None else [],
            record.model,
            [p.hash for p in payloads],
            [p.kind for p in payloads],
            [p.mime_type for p in payloads],
            [p.data for p in payloads],
            [s.content_index for s in signatures],
            [s.part_index for s in signatures],
            [s.signature for s in signatures],
            [j.call_index for j in journal],
            [j.call_id for j in journal],
            [j.name for j in journal],
            [dict(j.arguments) for j in journal],
            [dict(j.response) if j.response is not None else None for j in journal],
            [j.executor for j in journal],
        ]
        new = await self.store.fetchval(_sql()["record_point"], *args)
        for payload in payloads:
            self.cache.put(user_id, payload)
        return int(new or 0)

    async def forget(self, user_id: str) -> dict[str, int]:
        """Delete every shadow row of a user; the counts deleted, by table."""
        sql = _sql()
        async with self.store.transaction() as connection:
            counts = {
                "suture_index": await connection.execute(sql["forget_points"], user_id),
                "rich_payloads": await connection.execute(sql["forget_payloads"], user_id),
                "cognitive_signatures": await connection.execute(sql["forget_signatures"], user_id),
                "tool_journal": await connection.execute(sql["forget_journal"], user_id),
            }
        self.cache.forget(user_id)
        return {table: _count(status) for table, status in counts.items()}


def _count(status: str) -> int:
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0
