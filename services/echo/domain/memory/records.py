"""The values of long-term memory: a memory, its earlier versions, where it came from. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Distilled", "Memory", "MemoryVersion", "WindowRef"]


@dataclass(frozen=True)
class WindowRef:
    """Provenance: one window of a chat branch a memory was distilled from.

    ``key`` is the cumulative hash of the window's last message (the job's idempotency key);
    ``invariants`` the invariant hashes of its messages in order; ``message_ids`` Open WebUI's ids
    of those messages where it sent them (None elsewhere)."""

    chat_id: str | None
    key: str
    invariants: tuple[str, ...]
    message_ids: tuple[str | None, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "chat_id": self.chat_id,
            "window": self.key,
            "invariants": list(self.invariants),
            "message_ids": list(self.message_ids),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WindowRef:
        return cls(
            chat_id=data.get("chat_id"),
            key=str(data["window"]),
            invariants=tuple(str(i) for i in data.get("invariants", ())),
            message_ids=tuple(m if isinstance(m, str) else None for m in data.get("message_ids", ())),
        )


@dataclass(frozen=True)
class Distilled:
    """What one window distils to (seed 000): a summary, its importance (1–5), a short technical
    id and 3–5 tags."""

    summary: str
    importance: int
    memory_id: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Memory:
    """A stored memory. ``id`` is its key (also the vector point's); ``updated_at`` the last time it
    was created, merged or touched (unix seconds); ``version`` counts its merges from 1."""

    id: str
    user_id: str
    memory_id: str
    summary: str
    importance: int
    tags: tuple[str, ...]
    chat_id: str | None
    version: int
    created_at: float
    updated_at: float
    provenance: tuple[WindowRef, ...] = ()
    history: Sequence[MemoryVersion] = field(default=(), compare=False)


@dataclass(frozen=True)
class MemoryVersion:
    """An earlier version of a memory, kept when a merge replaced it; ``window`` is the key of the
    window whose merge replaced it, ``replaced_at`` when (unix seconds)."""

    version: int
    summary: str
    importance: int
    tags: tuple[str, ...]
    replaced_at: float
    window: str | None
