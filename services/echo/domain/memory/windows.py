"""The deterministic sliding window of seed 000: which windows of a branch are due. Pure.

Messages of a branch are counted from 1 (system messages and ECHO's injected blocks are not part of
it). Every ``size`` messages a window ends: at message ``n`` with ``n % size == 0``, covering the
``size + overlap`` messages up to ``n`` (fewer at the start). Consecutive windows share ``overlap``
messages, so nothing is lost at a seam. A window is named by the cumulative hash of its last message:
the job's idempotency key, so a replayed outlet, a retry or a second delivery distils it once, and an
edit of an earlier message (a new branch) makes new windows.

An outlet sees the whole branch; it asks for the windows that end among its last ``lookback``
messages (default ``2 * size``), so an outlet that was missed (a failed turn) is caught up by the
next one, without re-listing the whole history on every turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Window", "due_windows", "window_ending_at"]


@dataclass(frozen=True)
class Window:
    """Messages ``start`` (inclusive) to ``stop`` (exclusive) of the branch, 0-based; ``key`` the
    cumulative hash of message ``stop - 1``."""

    start: int
    stop: int
    key: str

    def __len__(self) -> int:
        return self.stop - self.start


def window_ending_at(end: int, hashes: Sequence[str], *, size: int, overlap: int) -> Window:
    """The window whose last message is message ``end`` (1-based count) of a branch."""
    if not 1 <= end <= len(hashes):
        raise ValueError(f"end {end} is outside the branch of {len(hashes)} messages")
    return Window(start=max(0, end - size - overlap), stop=end, key=hashes[end - 1])


def due_windows(
    hashes: Sequence[str], *, size: int, overlap: int, lookback: int | None = None
) -> list[Window]:
    """The windows ending among the last ``lookback`` messages of the branch, oldest first."""
    if size < 1:
        raise ValueError(f"WINDOW_SIZE must be at least 1, got {size}")
    if overlap < 0:
        raise ValueError(f"WINDOW_OVERLAP must be at least 0, got {overlap}")
    count = len(hashes)
    reach = 2 * size if lookback is None else max(1, lookback)
    first = max(1, count - reach + 1)
    ends = [n for n in range(first, count + 1) if n % size == 0]
    return [window_ending_at(n, hashes, size=size, overlap=overlap) for n in ends]
