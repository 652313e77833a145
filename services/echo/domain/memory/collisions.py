"""Semantic collisions (seed 000): what a new memory does to the user's nearest stored one. Pure.

Cosine similarity of the new summary's vector to the nearest memory of the same user:
- at or above ``EXACT_MATCH_THRESHOLD`` (0.95): the same memory; only its date is touched (no LLM);
- at or above ``SIMILARITY_THRESHOLD`` (0.85): the LLM merges the two, keeping every fact of both;
  the importance kept is the max of old and new (a critical memory never degrades);
- below, or no memory yet: a new memory is inserted.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Action", "Decision", "decide", "merged_importance", "merged_tags"]


class Action(enum.StrEnum):
    TOUCH = "touched"
    MERGE = "merged"
    INSERT = "created"


@dataclass(frozen=True)
class Decision:
    action: Action
    target: str | None  # the memory touched or merged into
    score: float | None


def decide(
    nearest: tuple[str, float] | None, *, similarity_threshold: float, exact_match_threshold: float
) -> Decision:
    """The action for a new memory whose nearest stored memory is ``(id, score)`` (None: none)."""
    if similarity_threshold > exact_match_threshold:
        raise ValueError("EXACT_MATCH_THRESHOLD must be >= SIMILARITY_THRESHOLD")
    if nearest is None:
        return Decision(Action.INSERT, None, None)
    target, score = nearest
    if score >= exact_match_threshold:
        return Decision(Action.TOUCH, target, score)
    if score >= similarity_threshold:
        return Decision(Action.MERGE, target, score)
    return Decision(Action.INSERT, None, score)


def merged_importance(old: int, new: int) -> int:
    return max(old, new)


def merged_tags(old: Sequence[str], new: Sequence[str], limit: int = 5) -> tuple[str, ...]:
    """Old tags first, then new ones, without repeats, at most ``limit``."""
    out: list[str] = []
    for tag in (*old, *new):
        if tag not in out:
            out.append(tag)
    return tuple(out[:limit])
