"""The rich shadow's store (migration 0010): points, payloads, signatures and the tool journal.

``stored_points`` is the pipe's one lookup per call (the rows of every point of the history that has
a rich form, with their signatures and journal); ``payloads`` reads the heavy parts they name.
``record`` writes one point in one statement. Every read and write names the user. ``forget``
deletes a user's rows of all four tables (``echo.capabilities.memory.forgetting``).

Both reads go through per-process caches, so a turn served by the replica that served the chat's
previous turn reads (almost) nothing: payloads are content-addressed, so a cached one can never be
stale (``PayloadCache``); a point's rich form is written once and never changed (``PointCache``), and
a point looked up and not found stays absent — a point is stored by the call that produced it, before
that call's answer reaches Open WebUI, so before any later call can look it up. Both are
`cachetools.LRUCache`s, used on the event loop only (so without a lock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import cachetools

from echo.adapters.store import pool, queries
from echo.domain import shadow
from echo.ports import store as store_port

__all__ = ["PROCESS_CACHE", "PROCESS_POINTS", "PayloadCache", "PointCache", "ShadowStore"]


Owner = tuple[str, str]
"""Whose cached rows these are: (tenant schema, user id)."""


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.adapters.store", "shadow.sql")


class PayloadCache:
    """The payloads this process read or wrote lately, per owner, up to ``max_bytes`` of their data
    (LRU). 64 MiB by default: the images and files of the chats a replica is serving now."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: cachetools.LRUCache[tuple[Owner, str], shadow.Payload] = cachetools.LRUCache(
            maxsize=max_bytes, getsizeof=lambda payload: len(payload.data)
        )

    def get(self, owner: Owner, payload_hash: str) -> shadow.Payload | None:
        return self._items.get((owner, payload_hash))

    def put(self, owner: Owner, payload: shadow.Payload) -> None:
        key = (owner, payload.hash)
        if key in self._items or len(payload.data) > self.max_bytes:
            return
        self._items[key] = payload  # the least recently used payloads make room

    def forget(self, owner: Owner) -> None:
        for key in [key for key in self._items if key[0] == owner]:
            del self._items[key]


class PointCache:
    """Stored points (or their absence, None) this process looked up or wrote, per owner (LRU).
    20,000 by default: the histories of some 100 long chats, a few KB each (the rich skeletons)."""

    def __init__(self, max_entries: int = 20_000) -> None:
        self.max_entries = max_entries
        self._items: cachetools.LRUCache[tuple[Owner, str], shadow.StoredPoint | None] = cachetools.LRUCache(
            maxsize=max_entries
        )

    def lookup(self, owner: Owner, hashes: Iterable[str]) -> tuple[dict[str, shadow.StoredPoint], list[str]]:
        """The cached points among ``hashes``, and the hashes not cached."""
        found: dict[str, shadow.StoredPoint] = {}
        unknown: list[str] = []
        for cumulative in hashes:
            key = (owner, cumulative)
            if key not in self._items:
                unknown.append(cumulative)
                continue
            point = self._items[key]  # now the most recently used
            if point is not None:
                found[cumulative] = point
        return found, unknown

    def put(self, owner: Owner, cumulative: str, point: shadow.StoredPoint | None) -> None:
        self._items[(owner, cumulative)] = point

    def forget(self, owner: Owner) -> None:
        for key in [key for key in self._items if key[0] == owner]:
            del self._items[key]


PROCESS_CACHE = PayloadCache()
"""The payload cache every ``ShadowStore`` of this process shares (so forgetting a user empties it)."""
PROCESS_POINTS = PointCache()
"""The point cache every ``ShadowStore`` of this process shares."""


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


class ShadowStore(store_port.ShadowStore):
    """The rich shadow of one tenant (the store's schema)."""

    def __init__(
        self, store: pool.Store, cache: PayloadCache | None = None, points: PointCache | None = None
    ) -> None:
        self.store = store
        self.cache = cache if cache is not None else PROCESS_CACHE
        self.points = points if points is not None else PROCESS_POINTS

    async def stored_points(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.StoredPoint]:
        """The points among ``hashes`` that have a rich form, by cumulative hash."""
        owner = (self.store.schema, user_id)
        found, unknown = self.points.lookup(owner, dict.fromkeys(hashes))
        if not unknown:
            return found
        rows = await self.store.fetch(_sql()["stored_points"], user_id, unknown)
        read = {row["cumulative_hash"]: _stored_point(row) for row in rows}
        for cumulative in unknown:
            self.points.put(owner, cumulative, read.get(cumulative))
        found.update(read)
        return found

    async def payloads(self, user_id: str, hashes: Iterable[str]) -> dict[str, shadow.Payload]:
        """The payloads among ``hashes`` (from the cache, the rest in one query); absent ones are missing."""
        owner = (self.store.schema, user_id)
        found: dict[str, shadow.Payload] = {}
        missing: list[str] = []
        for payload_hash in dict.fromkeys(hashes):
            cached = self.cache.get(owner, payload_hash)
            if cached is not None:
                found[payload_hash] = cached
            else:
                missing.append(payload_hash)
        if missing:
            for row in await self.store.fetch(_sql()["payloads"], user_id, missing):
                payload = shadow.Payload(
                    row["payload_hash"], row["kind"], row["mime_type"], bytes(row["data"])
                )
                self.cache.put(owner, payload)
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
        row = await self.store.fetchrow(_sql()["record_point"], *args)
        owner = (self.store.schema, user_id)
        for payload in payloads:
            self.cache.put(owner, payload)
        if row is not None and row["new_point"]:
            stored = None
            if form is not None:
                stored = shadow.StoredPoint(
                    record.cumulative, record.role, form.skeleton, form.refs, form.signatures, journal
                )
            self.points.put(owner, record.cumulative, stored)  # an index row only: nothing to restore
        return int(row["new_payloads"]) if row is not None else 0

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
        self.cache.forget((self.store.schema, user_id))
        self.points.forget((self.store.schema, user_id))
        return {table: _count(status) for table, status in counts.items()}


def _count(status: str) -> int:
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0
