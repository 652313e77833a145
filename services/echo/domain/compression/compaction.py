"""Manual compaction: what "summarise this chat now" covers; pure, no I/O.

The outlet plans a summary when a branch reaches ``compression_threshold_tokens``
(``planning.plan_summary``); a manual compaction (``POST /chats/{chat_id}/compact``, ``echoctl
compact``) plans the same summary at once, whatever the threshold: everything but the ``keep_last``
tail (moved back to a group boundary), the first ``keep_first`` turns staying verbatim, folded into
the newest summary valid for the branch. ``plan_summary`` has no threshold of its own, so it is the
plan used here unchanged; this module adds what the outlet does not need:

- ``rebuild_branch``: a chat's latest branch as the store keeps it (the ordered invariant hashes of
  its turns, ``Conversations.latest_branch``, and the content-addressed messages) made back into a
  message list and its ``messages.Turns``, cumulative hashes recomputed from the invariants;
- ``plan_compaction``: the plan, or why there is none: the branch point already has its summary
  (``summarised``), or the branch is too short for anything to leave the verbatim head and tail
  (``nothing``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from echo.domain import chain
from echo.domain.compression import groups as grp
from echo.domain.compression import messages as msgs
from echo.domain.compression import planning
from echo.domain.compression import selection as sel
from echo.errors import EchoError

__all__ = ["Branch", "Compaction", "MissingMessages", "Outcome", "plan_compaction", "rebuild_branch"]

Outcome = Literal["planned", "summarised", "nothing"]


class MissingMessages(EchoError):
    """The branch names messages the store no longer holds; ``missing``: their invariant hashes."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(f"{len(missing)} of the branch's messages are not stored")
        self.missing = tuple(missing)


@dataclass(frozen=True)
class Branch:
    """A chat's latest branch: its turns as messages (every message is a turn) and their chain."""

    messages: tuple[Mapping[str, Any], ...]
    turns: msgs.Turns


def rebuild_branch(invariants: Sequence[str], stored: Mapping[str, Mapping[str, Any]]) -> Branch:
    """The branch whose turns are ``invariants`` (in order), their messages taken from ``stored``
    (invariant hash -> stored message); ``MissingMessages`` when any is absent."""
    missing = sorted({key for key in invariants if key not in stored})
    if missing:
        raise MissingMessages(missing)
    messages = tuple(stored[key] for key in invariants)
    links: list[chain.ChainLink] = []
    parent: str | None = None
    for index, (invariant, message) in enumerate(zip(invariants, messages, strict=True)):
        parent = chain.cumulative_hash(invariant, parent)
        links.append(chain.ChainLink(index, msgs.role_of(message), invariant, parent, None))
    return Branch(messages, msgs.Turns(tuple(range(len(messages))), tuple(links)))


@dataclass(frozen=True)
class Compaction:
    """What a manual compaction of one branch does.

    ``planned``: ``plan`` is the summary to make now. ``summarised``: ``previous``, the newest valid
    summary, already covers everything but the tail. ``nothing``: the branch's ``turns`` all stay
    verbatim (``keep_first`` head and ``keep_last`` tail). ``reason`` says which, in words.
    """

    outcome: Outcome
    turns: int
    reason: str
    plan: planning.SummaryPlan | None = None
    previous: sel.StoredSummary | None = None


def plan_compaction(
    messages: Sequence[Mapping[str, Any]],
    turns: msgs.Turns,
    *,
    keep_first: int,
    keep_last: int,
    previous: sel.StoredSummary | None = None,
) -> Compaction:
    """The compaction of the branch ``turns`` of ``messages`` now, whatever its size in tokens.

    ``previous`` is the newest summary stored for the branch (one that is not valid for it is
    ignored, as ``plan_summary`` does).
    """
    if previous is not None and not sel.is_valid_for(previous, turns.hashes):
        previous = None
    count = len(turns)
    plan = planning.plan_summary(
        messages, turns, keep_first=keep_first, keep_last=keep_last, previous=previous
    )
    if plan is not None:
        return Compaction(
            "planned",
            count,
            f"summarise turns {plan.start + 1}-{plan.stop} of {count}"
            + (f" into the summary of the first {previous.covered_count}" if previous is not None else ""),
            plan=plan,
            previous=previous,
        )
    cuts = grp.boundaries(grp.turn_groups(messages, turns.positions), count)
    stop = grp.floor_boundary(cuts, max(0, count - keep_last))
    if previous is not None and previous.covered_count >= stop:
        return Compaction(
            "summarised",
            count,
            f"the summary of the first {previous.covered_count} of {count} turns already covers "
            f"everything before the last {count - previous.covered_count}",
            previous=previous,
        )
    return Compaction(
        "nothing",
        count,
        f"all {count} turns stay verbatim (keep_first={keep_first}, keep_last={keep_last}, "
        "tool calls kept with their results): nothing to summarise yet",
        previous=previous,
    )
