"""What the next summary of a branch covers; pure, no I/O (seed 002 outlet, branch-aware).

When a branch reached its compression threshold (``budgets.needs_summary`` on the assembled
request's tokens, so that a fresh summary resets the count), the outlet plans a summary and
enqueues one ``summary`` job per branch point (``summary_job_key``). The new summary folds the
previous one (the branch-valid summary the inlet used, if any) with the turns after it, up to the
``keep_last`` tail; the first ``keep_first`` turns stay verbatim and out of it. Only turns are
summarised: system messages and protected blocks (referenced chats) are not on the chain and never
enter a summary. The end is moved back to a group boundary so a tool call and its results are
summarised together.

The job payload holds references, not transcripts: the invariant hashes of the planned turns
(content-addressed messages) and the cumulative hash of each, from which the key of the stored
summary follows once ``fitting.fit_summary_input`` decides how many of them the window holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.domain.compression import groups as grp
from echo.domain.compression import messages as msgs
from echo.domain.compression import selection as sel

__all__ = ["SummaryPlan", "plan_summary", "summary_job_key"]


@dataclass(frozen=True)
class SummaryPlan:
    """Turns ``start`` to ``stop - 1`` to fold into ``previous`` (turns before ``head_count`` stay
    verbatim). ``positions``, ``invariants`` and ``hashes`` describe those turns, in order."""

    head_count: int
    start: int
    stop: int
    positions: tuple[int, ...]
    invariants: tuple[str, ...]
    hashes: tuple[str, ...]
    previous: sel.StoredSummary | None

    @property
    def covered_hash(self) -> str:
        """The key of the summary once it covers every planned turn."""
        return self.hashes[-1]

    def covered_after(self, taken: int) -> tuple[int, str]:
        """``(covered_count, covered_hash)`` of a summary that holds the first ``taken`` planned turns."""
        if not 1 <= taken <= len(self.hashes):
            raise ValueError(f"taken must lie in 1..{len(self.hashes)}, got {taken}")
        return self.start + taken, self.hashes[taken - 1]


def plan_summary(
    messages: Sequence[Mapping[str, Any]],
    turns: msgs.Turns,
    *,
    keep_first: int,
    keep_last: int,
    previous: sel.StoredSummary | None = None,
) -> SummaryPlan | None:
    """The next summary of the branch ``turns`` of ``messages``, or None when no turn is left to fold.

    ``previous`` must be valid for this branch (``selection.select_summary``); one that is not is
    ignored, so the plan starts over from the head.
    """
    if previous is not None and not sel.is_valid_for(previous, turns.hashes):
        previous = None
    count = len(turns)
    cuts = grp.boundaries(grp.turn_groups(messages, turns.positions), count)
    head = grp.ceil_boundary(cuts, min(max(keep_first, previous.head_count if previous else 0), count))
    start = max(head, grp.floor_boundary(cuts, previous.covered_count) if previous else 0)
    stop = grp.floor_boundary(cuts, max(0, count - keep_last))
    if stop <= start:
        return None
    links = turns.links[start:stop]
    return SummaryPlan(
        head_count=head,
        start=start,
        stop=stop,
        positions=turns.positions[start:stop],
        invariants=tuple(link.invariant for link in links),
        hashes=tuple(link.cumulative for link in links),
        previous=previous,
    )


def summary_job_key(user_id: str, covered_hash: str) -> str:
    """The idempotency key of the summary job of one branch point of one user's conversations."""
    return f"summary:{user_id}:{covered_hash}"
