"""What a request already holds, so that recall does not put it in again. Pure.

A request holds its own messages and, when ``echo_compression`` put a summary in it, the turns that
summary covers. The compression filter runs before ``echo_memory`` (priority 10 before 20) and, when
the request it answers carries a summary, names that summary in the body's ``metadata``
(``SUMMARY_KEY``: the summary's covered hash, its key in the conversation store, whose row lists the
covered turns' invariant hashes). Open WebUI passes ``metadata`` from one filter to the next and
drops it before the model call, so nothing of it reaches the model. ``held`` turns both into what
recall compares a memory with (``holds``).

A memory is held when every one of its source messages is in the request itself, or when they all
lie in the request or the summary's range and the summary's text states the memory too (at least
``STATED_SHARE`` of the memory's terms, ``echo.domain.lexical.tokens``, are in the summary: all of
them). A summary is a quarter of what it covers or less, so most facts of the turns it stands for are
not in it, or only in part: those memories are what recall brings back once their messages have left
the context. On LoCoMo 30 (``bench/quality.py --quick``) the recalled block of the long chat finds
20% of the answers at a share of 0.6, 42% at 0.8 and 52% at 1.0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from echo.domain import lexical
from echo.domain.memory import recall

__all__ = ["STATED_SHARE", "SUMMARY_KEY", "Held", "held", "holds", "summary_of", "with_summary"]

SUMMARY_KEY = "echo_summary_covered_hash"
STATED_SHARE = 1.0  # a lossy summary holds a fact back only when it states all of it
_HASH = re.compile(r"\A[0-9a-f]{64}\Z")


def with_summary(body: Mapping[str, Any], covered_hash: str) -> dict[str, Any]:
    """``body`` (a shallow copy) whose metadata names the summary it carries."""
    metadata = body.get("metadata")
    base = dict(metadata) if isinstance(metadata, Mapping) else {}
    return {**body, "metadata": {**base, SUMMARY_KEY: covered_hash}}


def summary_of(body: Mapping[str, Any]) -> str | None:
    """The covered hash of the summary an earlier ``echo_compression`` put in ``body`` (None: none)."""
    metadata = body.get("metadata")
    value = metadata.get(SUMMARY_KEY) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) and _HASH.match(value) else None


@dataclass(frozen=True)
class Held:
    """What a request holds: its own turns (hash prefixes), the turns its summary covers, and the
    terms of that summary's text."""

    carried: frozenset[str]
    summarised: frozenset[str] = frozenset()
    summary_terms: frozenset[str] = frozenset()


def _prefixes(hashes: Iterable[str]) -> frozenset[str]:
    return frozenset(h[: recall.SOURCE_CHARS] for h in hashes)


def held(invariants: Iterable[str], covered: Iterable[str] = (), summary_text: str = "") -> Held:
    """What a request holds: its own turns' invariant hashes, those its summary covers, and the
    summary's text."""
    return Held(_prefixes(invariants), _prefixes(covered), frozenset(lexical.tokens(summary_text)))


def stated(memory_text: str, terms: frozenset[str]) -> bool:
    """Whether ``terms`` (a summary's) hold at least ``STATED_SHARE`` of ``memory_text``'s terms."""
    own = set(lexical.tokens(memory_text))
    return bool(own) and len(own & terms) >= STATED_SHARE * len(own)


def holds(request: Held, candidate: recall.Candidate) -> bool:
    """Whether ``candidate`` would tell the model what the request already tells it (False when its
    sources are unknown)."""
    sources = candidate.sources
    if sources is None:
        return False
    if sources <= request.carried:
        return True
    in_range = sources <= request.carried | request.summarised
    return in_range and stated(candidate.summary, request.summary_terms)
