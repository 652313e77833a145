"""The points of the pipe's history on the hash chain (DESIGN §4); pure.

System messages are not on the chain (a daily system prompt must not make every stored row stale,
as for summaries). The current user message is hashed as the pipe's own inlet saw it when it says so
(``CurrentMessage``): Open WebUI rewrites that message after the inlets (its RAG template puts the
file texts around it) and replays the plain one in later turns, and the chain must be the one later
turns compute.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.domain import chain

__all__ = [
    "SYSTEM_ROLES",
    "CurrentMessage",
    "Point",
    "PointsMemo",
    "conversation_points",
    "message_invariant",
]

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
    """``echo.domain.chain``'s invariant hash of one message (cached per process: a chat's history is hashed
    again on every call)."""
    content = message.get("content")
    if (
        type(content) is str
        and message.get("files") is None
        and message.get("tool_calls") is None
        and message.get("tool_call_id") is None
    ):  # the common case: its text is its content, and it has no files nor tools
        return _invariant(_role(message), content, (), "")
    return _invariant(
        _role(message),
        chain.message_text(message.get("content")),
        chain.message_file_ids(message),
        chain.message_tools(message),
    )


def conversation_points(
    messages: Sequence[Mapping[str, Any]],
    *,
    current: CurrentMessage | None = None,
    known: tuple[int, Sequence[Point]] = (0, ()),
) -> tuple[Point, ...]:
    """The chain of the non-system messages; ``current`` replaces the hash of the user message at its
    position (when the message there is a user message). ``known``: the points of the first n
    messages, already computed (``PointsMemo``)."""
    start, done = known
    points: list[Point] = list(done)
    parent: str | None = points[-1].cumulative if points else None
    for index, message in enumerate(messages):
        if index < start:
            continue
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


def _size(message: Mapping[str, Any]) -> int:
    """About how many characters a message holds (its texts and image URLs)."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if not isinstance(content, list):
        return 0
    size = 0
    for part in content:
        if isinstance(part, Mapping):
            text, image = part.get("text"), part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            size += (len(text) if isinstance(text, str) else 0) + (len(url) if isinstance(url, str) else 0)
    return size


class PointsMemo:
    """The messages and points of each chat's previous call (LRU, at most ``max_chats`` chats and about
    ``max_chars`` characters of their messages: pasted images make histories big), so that a call whose
    history starts with the previous one's hashes only the messages it adds. Messages are compared,
    not trusted: an edited history is hashed again from the start."""

    def __init__(self, max_chats: int = 1024, max_chars: int = 64 * 1024 * 1024) -> None:
        self.max_chats = max_chats
        self.max_chars = max_chars
        self._chats: OrderedDict[Hashable, tuple[list[Mapping[str, Any]], tuple[Point, ...], int]] = (
            OrderedDict()
        )
        self._chars = 0

    def points(
        self, key: Hashable, messages: Sequence[Mapping[str, Any]], *, current: CurrentMessage | None = None
    ) -> tuple[Point, ...]:
        known: tuple[int, Sequence[Point]] = (0, ())
        previous = self._chats.pop(key, None)
        if previous is not None:
            seen, seen_points, chars = previous
            self._chars -= chars
            if len(seen) <= len(messages) and list(messages[: len(seen)]) == seen:
                known = (len(seen), seen_points)
        found = conversation_points(messages, current=current, known=known)
        chars = sum(_size(m) for m in messages if isinstance(m, Mapping))
        if chars <= self.max_chars:
            self._chats[key] = (list(messages), found, chars)
            self._chars += chars
        while self._chats and (len(self._chats) > self.max_chats or self._chars > self.max_chars):
            _, (_, _, dropped) = self._chats.popitem(last=False)
            self._chars -= dropped
        return found
