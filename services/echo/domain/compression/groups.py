"""Atomic groups: the turns that are kept or dropped together so a request stays valid; pure, no I/O.

OpenAI-compatible APIs refuse a ``tool`` message that does not follow the assistant message whose
``tool_calls`` it answers, and an assistant message whose calls have no results; Gemini pairs every
function call with its response. So an assistant message with tool calls and the tool results that
follow it form one group, never split. Every other turn is a group of its own; so is a tool result
with no call before it (bad input, kept as it came: compression does not make it worse).

Groups are ranges of turn indices (``messages.Turns``): system, protected and injected messages
that stand between an assistant message and its results are not members and do not break the
group. A boundary is a turn index no group straddles; a cut (the head's end, the start of the tail,
the end of what a summary covers) is always moved to one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.domain.compression import messages as msgs

__all__ = ["Group", "boundaries", "ceil_boundary", "floor_boundary", "turn_groups"]


@dataclass(frozen=True)
class Group:
    """Turns ``start`` to ``stop - 1``, kept or dropped together."""

    start: int
    stop: int

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.stop:
            raise ValueError(f"a group spans at least one turn, got [{self.start}, {self.stop})")

    def __len__(self) -> int:
        return self.stop - self.start

    def __contains__(self, turn: object) -> bool:
        return isinstance(turn, int) and self.start <= turn < self.stop


def turn_groups(
    messages: Sequence[Mapping[str, Any]], positions: Sequence[int], first: int = 0
) -> tuple[Group, ...]:
    """The atomic groups of the turns at ``positions`` (``Turns.positions``) in ``messages``, in
    order; together they cover every turn once. With ``first``, the groups of the turns from
    ``first`` on, which must start a group (a caller that knows the groups before it)."""
    groups: list[Group] = []
    start: int | None = None  # first turn of the open tool-call group
    for turn in range(first, len(positions)):
        message = messages[positions[turn]]
        if start is not None:
            if msgs.role_of(message) == "tool":
                continue
            groups.append(Group(start, turn))
            start = None
        if message.get("tool_calls") and msgs.tool_calls_of(message):
            start = turn
        else:
            groups.append(_single(turn))
    if start is not None:
        groups.append(Group(start, len(positions)))
    return tuple(groups)


_SINGLES: dict[int, Group] = {}  # groups are immutable: one instance of each serves every request
_MOST_SINGLES = 100_000


def _single(turn: int) -> Group:
    """The group of turn ``turn`` alone (racing threads store equal groups: harmless)."""
    found = _SINGLES.get(turn)
    if found is None:
        found = Group(turn, turn + 1)
        if turn < _MOST_SINGLES:
            _SINGLES[turn] = found
    return found


def boundaries(groups: Sequence[Group], count: int) -> tuple[bool, ...]:
    """``result[b]`` says whether a cut before turn ``b`` splits no group, for ``b`` in ``0..count``."""
    cuts = [False] * (count + 1)
    cuts[0] = cuts[count] = True
    for group in groups:
        cuts[group.start] = True
    return tuple(cuts)


def floor_boundary(cuts: Sequence[bool], index: int) -> int:
    """The last boundary at or before ``index`` (clamped to ``0..count``)."""
    index = max(0, min(index, len(cuts) - 1))
    while not cuts[index]:
        index -= 1
    return index


def ceil_boundary(cuts: Sequence[bool], index: int) -> int:
    """The first boundary at or after ``index`` (clamped to ``0..count``)."""
    index = max(0, min(index, len(cuts) - 1))
    while not cuts[index]:
        index += 1
    return index
