"""ECHO's additions inside the budget: the room compression leaves to later filters; pure, no I/O.

With ECHO, a request must never cost more than what Open WebUI would have sent without it plus the
AEC block. ``echo_compression`` sees the request after ``echo_context`` (the AEC block and the
smart-context blocks, which stand in for file text Open WebUI would otherwise inject itself) and
before ``echo_memory``. What it sends never costs more than what it was given (``assembly`` uses a
summary only when it costs less than the turns it stands for, and only drops or shrinks otherwise),
so the room left for later additions is what the assembly freed: ``tokens_before - tokens_after``,
never above ``max_context_tokens - tokens_after``, less ``MARGIN`` for the seams of an inserted
block. It travels in the body's ``metadata`` (``ROOM_KEY``), which Open WebUI passes from one filter
to the next and drops before the model call; what ``echo_memory`` recalls of the chat itself fits in
it, and none of it when it is 0 (a chat under the threshold: no summary, so nothing freed). Memories
of the user's other chats are the one exception: the request would not hold them at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MARGIN", "ROOM_KEY", "room", "room_of", "with_room"]

ROOM_KEY = "echo_room_tokens"
MARGIN = 8  # tokens kept back for the separators and tags around an inserted block


def room(tokens_before: int, tokens_after: int, max_context_tokens: int | None) -> int:
    """Tokens later filters may add to a request that cost ``tokens_before`` as it came in and
    ``tokens_after`` as the compression sends it (0 when it freed nothing)."""
    ceiling = tokens_before if max_context_tokens is None else min(tokens_before, max_context_tokens)
    return max(0, ceiling - tokens_after - MARGIN)


def with_room(body: Mapping[str, Any], tokens: int) -> dict[str, Any]:
    """``body`` (a shallow copy) whose metadata says ``tokens`` are left for later additions."""
    metadata = body.get("metadata")
    base = dict(metadata) if isinstance(metadata, Mapping) else {}
    return {**body, "metadata": {**base, ROOM_KEY: tokens}}


def room_of(body: Mapping[str, Any]) -> int | None:
    """The room an earlier ``echo_compression`` left in ``body`` (None: it did not run)."""
    metadata = body.get("metadata")
    value = metadata.get(ROOM_KEY) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
