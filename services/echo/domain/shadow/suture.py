"""The suture plan: which stored rich forms go where in the history the pipe received; pure.

For every non-system message of the history but the current user message, the point's cumulative
hash is looked up among the stored points. A point found with a rich form is restored: its contents
replace the message's plain conversion (an assistant message gets its steps back with their thought
signatures and the function calls with the arguments Gemini wrote, ECHO's own tool calls and
results included; a user message gets the attachments and injected texts Open WebUI dropped).
A point of another branch has another cumulative hash, so it is never found here.

Counted, per kind: ``signatures`` (an assistant message restored with signatures, or not found),
``tool_calls`` (an assistant message with tool calls restored, or not found), ``payloads`` (stored
payloads restored, or missing). A stored form that cannot be rebuilt is ``unreadable``: that message
is converted plainly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from echo.domain.shadow import parts as parts_module
from echo.domain.shadow.parts import ContentDict, JournalEntry, Payload, Signature
from echo.domain.shadow.points import Point

__all__ = ["KINDS", "StoredPoint", "Suture", "plan_suture"]

KINDS = ("signatures", "tool_calls", "payloads")


@dataclass(frozen=True)
class StoredPoint:
    """One stored point with a rich form (a ``suture_index`` row and what it names)."""

    cumulative: str
    role: str
    skeleton: Any
    refs: tuple[str, ...] = ()
    signatures: tuple[Signature, ...] = ()
    journal: tuple[JournalEntry, ...] = ()


@dataclass(frozen=True)
class Suture:
    """``restored``: message index -> the contents that stand in its place."""

    restored: Mapping[int, list[ContentDict]] = field(default_factory=dict)
    hits: Mapping[str, int] = field(default_factory=dict)
    misses: Mapping[str, int] = field(default_factory=dict)
    unreadable: int = 0
    restored_bytes: int = 0


def _restored_bytes(contents: Sequence[ContentDict]) -> int:
    total = 0
    for content in contents:
        for part in content["parts"]:
            total += len(part.get("thought_signature", b""))
            if "inline_data" in part:
                total += len(part["inline_data"]["data"])
            elif "text" in part:
                total += len(part["text"].encode("utf-8", "surrogatepass"))
    return total


def plan_suture(
    messages: Sequence[Mapping[str, Any]],
    points: Sequence[Point],
    found: Mapping[str, StoredPoint],
    payloads: Mapping[str, Payload],
    *,
    current_index: int | None,
) -> Suture:
    """The suture of ``messages`` (``points``: their chain) from the ``found`` points and ``payloads``.
    ``current_index``: the current user message, sent as received (its per-turn blocks are fresh)."""
    restored: dict[int, list[ContentDict]] = {}
    hits: Counter[str] = Counter()
    misses: Counter[str] = Counter()
    unreadable = 0
    size = 0
    for point in points:
        if point.index == current_index or point.role not in ("user", "assistant"):
            continue
        message = messages[point.index]
        has_calls = point.role == "assistant" and bool(message.get("tool_calls"))
        stored = found.get(point.cumulative)
        contents = None
        if stored is not None:
            try:
                contents = parts_module.hydrate(
                    stored.skeleton, payloads=payloads, signatures=stored.signatures, journal=stored.journal
                )
            except parts_module.UnreadableShadow:
                unreadable += 1
                missing = [ref for ref in stored.refs if ref not in payloads]
                misses["payloads"] += len(missing)
        if contents is None:
            if point.role == "assistant":
                misses["signatures"] += 1
                misses["tool_calls"] += int(has_calls)
            continue
        restored[point.index] = contents
        size += _restored_bytes(contents)
        hits["payloads"] += len(stored.refs) if stored is not None else 0
        if point.role == "assistant":
            if stored is not None and stored.signatures:
                hits["signatures"] += 1
            else:
                misses["signatures"] += 1
            hits["tool_calls"] += int(has_calls)
    kept_hits = {kind: n for kind, n in hits.items() if n}
    kept_misses = {kind: n for kind, n in misses.items() if n}
    return Suture(restored, kept_hits, kept_misses, unreadable, size)
