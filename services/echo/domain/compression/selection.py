"""Which stored summary the current branch may use; pure, no I/O.

A summary covers the first ``covered_count`` turns of the conversation it was made from and is
keyed by the cumulative hash of the last of them (``messages.Turns``). It is valid for the current
branch exactly when that hash is the current chain's hash at the same position: equal cumulative
hashes mean equal prefixes (DESIGN §4). So a summary made on a sibling branch, or before an edit
of a message it covers, is never valid, while the summaries of the prefix shared before the edit
stay valid: the nearest valid ancestor is reused. The chain is content, not a chat id: a cloned,
imported or forked chat of the same user finds the summaries of its common prefix.

The store answers one indexed lookup: the summaries whose key is any of ``Turns.hashes`` (the
user's rows only); ``select_summary`` then keeps the newest valid one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["StoredSummary", "is_valid_for", "select_summary"]


@dataclass(frozen=True)
class StoredSummary:
    """A stored summary of turns ``head_count`` to ``covered_count - 1`` of some branch.

    The first ``head_count`` turns were kept verbatim (``keep_first``) and are not in ``text``.
    ``created_at`` (seconds since the epoch) breaks ties between summaries of one branch point.
    """

    covered_hash: str
    covered_count: int
    text: str
    head_count: int = 0
    created_at: float = 0.0
    summary_id: str = ""

    def __post_init__(self) -> None:
        if self.covered_count < 1:
            raise ValueError(f"covered_count must be at least 1, got {self.covered_count}")
        if not 0 <= self.head_count <= self.covered_count:
            raise ValueError(
                f"head_count must lie in 0..covered_count ({self.covered_count}), got {self.head_count}"
            )


def is_valid_for(summary: StoredSummary, hashes: Sequence[str]) -> bool:
    """Whether ``summary`` covers a prefix of the branch whose turn hashes are ``hashes``."""
    return summary.covered_count <= len(hashes) and hashes[summary.covered_count - 1] == summary.covered_hash


def select_summary(hashes: Sequence[str], candidates: Iterable[StoredSummary]) -> StoredSummary | None:
    """The valid summary that covers the most turns (the newest on this branch), or None.

    Among valid summaries of one branch point the latest ``created_at`` wins; invalid candidates
    (another branch, a stale position, a count that does not match its key) are ignored.
    """
    best: StoredSummary | None = None
    for candidate in candidates:
        if not is_valid_for(candidate, hashes):
            continue
        if best is None or (candidate.covered_count, candidate.created_at) > (
            best.covered_count,
            best.created_at,
        ):
            best = candidate
    return best
