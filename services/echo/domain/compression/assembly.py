"""The request the model gets: head, summary, tail, within the budget; pure, no I/O (seed 002 inlet).

The result, in order:

1. every message before the first summarised turn: the system messages and the first
   ``keep_first`` turns (at least the summary's own ``head_count``);
2. the summary, one message fenced as history (``fence.summary_message``);
3. the system and protected messages that stood among the summarised turns, in their order;
4. the uncovered tail: every message from the first turn the summary does not cover, and never
   fewer than the last ``keep_last`` turns nor the last user message and what follows it.

A summary is used only when it costs fewer tokens than the turns it would stand for: otherwise the
turns stay and ``refused_summary`` says so, so the request never grows by being summarised.

Cuts move to group boundaries (``groups``): the head grows to the end of a tool-call group and the
tail starts where one starts, so a tool result is never separated from its call. Injected summaries
that came back are left out. Native tool outputs of earlier turns are trimmed
(``trimming.tool_output_trims``) when ``enable_tool_output_trimming`` is on.

Over ``max_context_tokens`` the request shrinks until it fits: first over-long messages are folded
(oldest first, ``trimming.fold_message``), then whole groups are dropped, the tail's oldest first,
then the head's, then the summary. Never touched: system messages (they stay in place), protected
blocks, the last user message and everything after it (the current turn, tool calls in flight
included). When those alone exceed the budget the result is just them, and ``over_budget`` is set.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.config import valves
from echo.domain import tokens
from echo.domain.compression import budgets, fence, locales, trimming
from echo.domain.compression import groups as grp
from echo.domain.compression import messages as msgs
from echo.domain.compression import selection as sel

__all__ = ["Assembly", "AssemblyPolicy", "assemble"]

_SUMMARY_UNIT = -1


@dataclass(frozen=True)
class AssemblyPolicy:
    """How to assemble: seed 002's valves, plus the size from which a message may be folded.

    ``max_context_tokens`` None means no ceiling. ``fold_threshold_chars``: characters of text from
    which a message is folded under budget pressure (6000, about 1500 tokens: short messages carry
    no skeleton worth keeping, and folding them saves little).
    """

    keep_first: int = 1
    keep_last: int = 6
    max_context_tokens: int | None = 128000
    enable_tool_output_trimming: bool = True
    tool_trim_threshold_chars: int = 600
    fold_threshold_chars: int = 6000

    def __post_init__(self) -> None:
        for name in ("keep_first", "keep_last"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.max_context_tokens is not None and self.max_context_tokens < 0:
            raise ValueError(f"max_context_tokens must be >= 0 or None, got {self.max_context_tokens}")
        for name in ("tool_trim_threshold_chars", "fold_threshold_chars"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")

    @classmethod
    def from_valves(cls, settings: valves.CompressionValves, limits: budgets.Thresholds) -> AssemblyPolicy:
        """The policy of a filter's valves for a model whose thresholds are ``limits``."""
        return cls(
            keep_first=settings.keep_first,
            keep_last=settings.keep_last,
            max_context_tokens=limits.max_context_tokens,
            enable_tool_output_trimming=settings.enable_tool_output_trimming,
            tool_trim_threshold_chars=settings.tool_trim_threshold_chars,
        )


@dataclass(frozen=True)
class Assembly:
    """An assembled request and what it took (token counts are for the metrics and status events).

    ``tokens_assembled`` is the request once the summary stands for the turns it covers and tool
    outputs are trimmed, before the budget: what the outlet compares with the compression threshold.
    """

    messages: tuple[Mapping[str, Any], ...]
    summary: sel.StoredSummary | None
    covered_turns: int
    tokens_before: int
    tokens_assembled: int
    tokens_after: int
    trimmed_tool_outputs: int
    folded: int
    dropped_groups: int
    dropped_summary: bool
    over_budget: bool
    refused_summary: bool = False  # a summary valid here was not used: it cost as much as its turns

    @property
    def summary_injected(self) -> bool:
        return self.summary is not None and not self.dropped_summary


@dataclass
class _Slot:
    message: Mapping[str, Any]
    cost: int
    kind: msgs.Kind
    unit: int | None  # the drop unit: a group index, _SUMMARY_UNIT, or None (never dropped)
    dropped: bool = False


@dataclass(frozen=True)
class _Shape:
    """What a request is made of: kinds, turns, groups, cuts, and ``current``, the last user turn
    (the number of turns when there is none): it and every turn after it are never touched."""

    kinds: tuple[msgs.Kind, ...]
    positions: tuple[int, ...]
    groups: tuple[grp.Group, ...]
    cuts: tuple[bool, ...]
    current: int

    @classmethod
    def of(
        cls,
        messages: Sequence[Mapping[str, Any]],
        kinds: Sequence[msgs.Kind] | None = None,
        groups: Sequence[grp.Group] | None = None,
        positions: Sequence[int] | None = None,
    ) -> _Shape:
        kinds = msgs.kinds_of(messages) if kinds is None else tuple(kinds)
        positions = msgs.turn_positions(kinds) if positions is None else tuple(positions)
        groups = grp.turn_groups(messages, positions) if groups is None else tuple(groups)
        last_user = msgs.last_user_turn(messages, positions)
        current = len(positions) if last_user is None else last_user
        return cls(kinds, positions, groups, grp.boundaries(groups, len(positions)), current)


def _bisect_left(ordered: Sequence[int], value: int) -> int:
    """How many items of ascending ``ordered`` are below ``value``."""
    return bisect.bisect_left(ordered, value)


def _bisect_right(ordered: Sequence[int], value: int) -> int:
    """How many items of ascending ``ordered`` are at most ``value``."""
    return bisect.bisect_right(ordered, value)


def _layout(policy: AssemblyPolicy, summary: sel.StoredSummary | None, shape: _Shape) -> tuple[int, int]:
    """``(head, tail)``: turns before ``head`` are the head, from ``tail`` on the tail; the summary
    stands for the turns between, and is used only when there are some."""
    count = len(shape.positions)
    if summary is None or summary.covered_count > count or not fence.strip_reply_guidance(summary.text):
        head = grp.ceil_boundary(shape.cuts, min(policy.keep_first, count))
        return head, head
    head = grp.ceil_boundary(shape.cuts, min(max(policy.keep_first, summary.head_count), count))
    tail = grp.floor_boundary(shape.cuts, min(summary.covered_count, count - policy.keep_last, shape.current))
    return (head, tail) if tail > head else (head, head)


def _slots(
    messages: Sequence[Mapping[str, Any]],
    shape: _Shape,
    span: tuple[int, int],
    standin: Mapping[str, Any] | None,
    replaced: Mapping[int, Mapping[str, Any]],
    costs: Sequence[int],
    counter: msgs.TokenCounter,
) -> list[_Slot]:
    """The assembled request before the budget: the head, the summary ``standin`` (if any) for the
    turns of ``span`` with the system and protected messages that stood among them, the tail."""
    starts = [group.start for group in shape.groups]
    positions = shape.positions
    slots: list[_Slot] = []

    def add(position: int) -> None:
        kind = shape.kinds[position]
        if kind is msgs.Kind.INJECTED:
            return
        unit = None
        if kind is msgs.Kind.TURN:  # turns are the kind's positions, in order: find its index
            turn = _bisect_left(positions, position)
            if turn < shape.current:
                unit = _bisect_right(starts, turn) - 1  # its group
        message = replaced.get(position, messages[position])
        cost = costs[position] if message is messages[position] else msgs.message_tokens(message, counter)
        slots.append(_Slot(message, cost, kind, unit))

    head_at, tail_at = (shape.positions[t] if t < len(shape.positions) else len(messages) for t in span)
    for position in range(head_at):
        add(position)
    if standin is not None:
        slots.append(_Slot(standin, msgs.message_tokens(standin, counter), msgs.Kind.TURN, _SUMMARY_UNIT))
        covered = _bisect_left(positions, tail_at) - _bisect_left(positions, head_at)
        if covered < tail_at - head_at:  # not only turns stand between: keep what is not one
            for position in range(head_at, tail_at):
                if shape.kinds[position] in (msgs.Kind.SYSTEM, msgs.Kind.PROTECTED):
                    add(position)
    for position in range(tail_at, len(messages)):
        add(position)
    return slots


def assemble(
    messages: Sequence[Mapping[str, Any]],
    *,
    policy: AssemblyPolicy,
    summary: sel.StoredSummary | None = None,
    locale: str = locales.DEFAULT_LOCALE,
    counter: msgs.TokenCounter = tokens.estimate_tokens,
    kinds: Sequence[msgs.Kind] | None = None,
    costs: Sequence[int] | None = None,
    groups: Sequence[grp.Group] | None = None,
    positions: Sequence[int] | None = None,
) -> Assembly:
    """The request to send for ``messages`` with ``summary`` (already selected for this branch).

    ``kinds``, ``costs``, ``groups`` and ``positions``, when given, are ``messages.kinds_of(messages)``,
    every message's ``messages.message_tokens`` priced by ``counter``, ``groups.turn_groups`` of the
    turns and ``messages.turn_positions``, computed (and cached) by the caller.
    """
    if kinds is not None and len(kinds) != len(messages):
        raise ValueError(f"kinds has {len(kinds)} entries for {len(messages)} messages")
    if costs is not None and len(costs) != len(messages):
        raise ValueError(f"costs has {len(costs)} entries for {len(messages)} messages")
    shape = _Shape.of(messages, kinds, groups, positions)
    head, tail = _layout(policy, summary, shape)
    used = summary if tail > head else None
    if costs is None:
        costs = [msgs.message_tokens(message, counter) for message in messages]
    standin = None
    refused = False
    if used is not None:
        standin = fence.summary_message(used.text, locale=locale, covered_count=used.covered_count)
        replaced = sum(costs[position] for position in shape.positions[head:tail])
        if msgs.message_tokens(standin, counter) >= replaced:  # it would add, not save: the turns stay
            used, standin, refused = None, None, True
            head, tail = _layout(policy, None, shape)
    trims: dict[int, dict[str, Any]] = {}
    if policy.enable_tool_output_trimming:
        trims = trimming.tool_output_trims(
            messages,
            shape.positions,
            shape.groups,
            threshold_chars=policy.tool_trim_threshold_chars,
            before_turn=shape.current,
            locale=locale,
            skip=range(head, tail),  # summarised turns: their trims would be left out below
        )
    summarised = set(shape.positions[head:tail])
    trims = {position: message for position, message in trims.items() if position not in summarised}
    if used is None and not trims and msgs.Kind.INJECTED not in shape.kinds:
        untouched = _untouched(messages, costs, policy)
        if untouched is not None:
            return dataclasses.replace(untouched, refused_summary=refused)
    result = _assembled(messages, shape, (head, tail), used, standin, trims, costs, policy, locale, counter)
    return dataclasses.replace(result, refused_summary=refused) if refused else result


def _untouched(
    messages: Sequence[Mapping[str, Any]], costs: Sequence[int], policy: AssemblyPolicy
) -> Assembly | None:
    """The request as it came, when nothing stands for a part of it and it fits (most chats below
    the threshold): what ``_assembled`` makes of it, without building it message by message."""
    total = sum(costs)
    if policy.max_context_tokens is not None and total > policy.max_context_tokens:
        return None
    return Assembly(
        messages=tuple(messages),
        summary=None,
        covered_turns=0,
        tokens_before=total,
        tokens_assembled=total,
        tokens_after=total,
        trimmed_tool_outputs=0,
        folded=0,
        dropped_groups=0,
        dropped_summary=False,
        over_budget=False,
    )


def _assembled(
    messages: Sequence[Mapping[str, Any]],
    shape: _Shape,
    span: tuple[int, int],
    used: sel.StoredSummary | None,
    standin: Mapping[str, Any] | None,
    trims: Mapping[int, Mapping[str, Any]],
    costs: Sequence[int],
    policy: AssemblyPolicy,
    locale: str,
    counter: msgs.TokenCounter,
) -> Assembly:
    """The general case: the request built slot by slot, then fitted to the budget."""
    head, tail = span
    slots = _slots(messages, shape, span, standin, trims, costs, counter)
    assembled = sum(slot.cost for slot in slots)
    starts = [group.start for group in shape.groups]  # ascending: groups come in turn order
    tail_units = list(range(_bisect_left(starts, tail), max(0, _bisect_left(starts, shape.current))))
    head_units = list(range(_bisect_left(starts, min(head, shape.current))))
    order = [*tail_units, *head_units, *([_SUMMARY_UNIT] if used is not None else [])]
    folded, dropped_groups, total = _fit(slots, order, assembled, policy, locale, counter)
    kept = [slot for slot in slots if not slot.dropped]
    dropped_summary = used is not None and not any(slot.unit == _SUMMARY_UNIT for slot in kept)
    return Assembly(
        messages=tuple(_with_summary_role(kept)),
        summary=used,
        covered_turns=tail - head if used is not None else 0,
        tokens_before=sum(costs),
        tokens_assembled=assembled,
        tokens_after=total,
        trimmed_tool_outputs=len(trims),
        folded=folded,
        dropped_groups=dropped_groups,
        dropped_summary=dropped_summary,
        over_budget=policy.max_context_tokens is not None and total > policy.max_context_tokens,
    )


def _fit(
    slots: list[_Slot],
    order: Sequence[int],
    total: int,
    policy: AssemblyPolicy,
    locale: str,
    counter: msgs.TokenCounter,
) -> tuple[int, int, int]:
    """Fold, then drop, in ``order``, until ``total`` fits; returns (folded, dropped groups, total)."""
    budget = policy.max_context_tokens
    if budget is None or total <= budget:
        return 0, 0, total
    members: dict[int, list[_Slot]] = {unit: [] for unit in order}
    for slot in slots:
        if slot.unit is not None:
            members[slot.unit].append(slot)
    folded = dropped = 0
    for unit in order:
        for slot in members[unit] if unit != _SUMMARY_UNIT else ():
            if total <= budget:
                return folded, dropped, total
            smaller = trimming.fold_message(
                slot.message, threshold_chars=policy.fold_threshold_chars, locale=locale
            )
            cost = msgs.message_tokens(smaller, counter) if smaller is not None else slot.cost
            if smaller is not None and cost < slot.cost:  # a fold that saves nothing failed
                total -= slot.cost - cost
                slot.message, slot.cost = smaller, cost
                folded += 1
    for unit in order:
        if total <= budget:
            break
        for slot in members[unit]:
            slot.dropped = True
            total -= slot.cost
        dropped += unit != _SUMMARY_UNIT
    return folded, dropped, total


def _with_summary_role(slots: Sequence[_Slot]) -> list[Mapping[str, Any]]:
    """The messages; the summary speaks as the assistant unless nothing but system messages
    precedes it, where it is a user turn (some providers want a user turn first)."""
    result: list[Mapping[str, Any]] = []
    conversation_started = False
    for slot in slots:
        if slot.unit == _SUMMARY_UNIT and not conversation_started:
            result.append({**slot.message, "role": "user"})
        else:
            result.append(slot.message)
        conversation_started = conversation_started or slot.kind is not msgs.Kind.SYSTEM
    return result
