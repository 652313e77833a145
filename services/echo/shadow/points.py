"""The points of the pipe's history on the hash chain (DESIGN §4); pure.

System messages are not on the chain (a daily system prompt must not make every stored row stale,
as for summaries). The current user message is hashed as the pipe's own inlet saw it when it says so
(``CurrentMessage``): Open WebUI rewrites that message after the inlets (its RAG template puts the
file texts around it) and replays the plain one in later turns, and the chain must be the one later
turns compute.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo import chain

__all__ = ["SYSTEM_ROLES", "CurrentMessage", "Point", "conversation_points", "message_invariant"]

SYSTEM_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class CurrentMessage:
    """The current user message as the pipe's inlet hashed it: its position among non-system
    messages and its invariant hash."""

    position: int
    invariant: str


@dataclass(frozen=True)
class Point:
    """One non-system message of the history, placed on the chain. ``index``: in ``messages``."""

    index: int
    position: int
    role: str
    invariant: str
    cumulative: str
    parent: str | None


@functools.lru_cache(maxsize=65536)
def _invariant(role: str, text: str, files: tuple[str, ...], tools: str) -> str:
    return chain.invariant_hash(role, text, files, tools=tools)


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    return role.strip().lower() if isinstance(role, str) else ""


def message_invariant(message: Mapping[str, Any]) -> str:
    """``echo.chain``'s invariant hash of one message (cached per process: a chat's history is hashed
    again on every call)."""
    return _invariant(
        _role(message),
        chain.message_text(message.get("content")),
        chain.message_file_ids(message),
        chain.message_tools(message),
    )


def conversation_points(
    messages: Sequence[Mapping[str, Any]], *, current: CurrentMessage | None = None
) -> tuple[Point, ...]:
    """The chain of the non-system messages; ``current`` replaces the hash of the user message at its
    position (when the message there is a user message)."""
    points: list[Point] = []
    parent: str | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = _role(message)
        if role in SYSTEM_ROLES:
            continue
        position = len(points)
        if current is not None and position == current.position and role == "user":
            invariant = current.invariant
        else:
            invariant = message_invariant(message)
        cumulative = chain.cumulative_hash(invariant, parent)
        points.append(Point(index, position, role, invariant, cumulative, parent))
        parent = cumulative
    return tuple(points)
