"""LoCoMo for the quality benchmarks: the conversations, the QA pairs judged, and answer recall.

Answer recall is how `bench/quality.py` scores a block of text against a QA pair: the pair counts when
at least half of its answer's content words are in the text. Words are compared case-folded, split on
anything that is not a letter or digit, with a final "s" dropped from words of four letters or more
(so "dogs" finds "dog", on both sides alike); content words are the answer's words that are not in
`STOPWORDS` (numbers are content words, and "may" is one: LoCoMo's answers are full of dates). Only
categories 1–4 are judged: category 5 is adversarial and has no answer to find.

Also here, pure and shared by the quality benchmarks: plain truncation (the newest messages that fit a
token budget), filling a budget with ranked texts (the raw-turn retrieval baseline), what of the raw
turns recall's provenance rule lets back into a request (`not_held`), and the messages' timestamps
(`with_timestamps`: LoCoMo dates its sessions, Open WebUI stamps every message; each message gets
its session's time, as the outlet would carry it).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from echo.domain import transcripts
from echo.domain.compression import messages as msgs
from echo.domain.memory import context as memory_context
from echo.domain.memory import recall

__all__ = [
    "CATEGORIES",
    "STOPWORDS",
    "answer_recalled",
    "content_words",
    "data_dir",
    "fill_budget",
    "judged",
    "load",
    "not_held",
    "truncated",
    "with_timestamps",
    "words_of",
]

ROOT = Path(__file__).resolve().parents[1]
SHARED_LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
FIXTURE_LOCOMO = ROOT / "tests" / "fixtures" / "locomo"
CATEGORIES = (1, 2, 3, 4)

_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t d ll m re ve also yes
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[^\W_]+")


def _normal(word: str) -> str:
    return word[:-1] if len(word) >= 4 and word.endswith("s") else word


def words_of(text: str) -> set[str]:
    """Every word of ``text``, normalised as answers are (see the module docstring)."""
    return {_normal(word) for word in _WORD.findall(text.casefold())}


def content_words(answer: str) -> list[str]:
    """The answer's content words, normalised, each once, in order; empty when it has none."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(answer.casefold()):
        if word not in STOPWORDS:
            seen.setdefault(_normal(word), None)
    return list(seen)


def answer_recalled(answer: str, text: str | set[str]) -> bool:
    """At least half of ``answer``'s content words are in ``text`` (a text, or its `words_of`).

    An answer without content words is never recalled (`judged` leaves such pairs out)."""
    wanted = content_words(answer)
    if not wanted:
        return False
    found = text if isinstance(text, set) else words_of(text)
    return 2 * sum(word in found for word in wanted) >= len(wanted)


def data_dir(given: Path | None = None) -> Path:
    """``given``, else the workspace's three conversations, else the one fixture of a clean clone."""
    if given is not None:
        return given
    return SHARED_LOCOMO if SHARED_LOCOMO.is_dir() else FIXTURE_LOCOMO


def load(folder: Path, names: Iterable[str] | None = None) -> list[transcripts.Transcript]:
    """The conversations of ``folder`` (``NAME.json``, LoCoMo's per-conversation form), by name."""
    paths = sorted(folder.glob("*.json")) if names is None else [folder / f"{n}.json" for n in names]
    return [transcripts.parse(json.loads(path.read_text()), path.stem)[0] for path in paths]


def judged(transcript: transcripts.Transcript, turns: int) -> list[transcripts.Question]:
    """The QA pairs of categories 1–4 with an answer of content words whose evidence dialog turns
    are all in the first ``turns`` exchanges."""
    played = {
        source
        for exchange in transcript.exchanges[:turns]
        for message in (*exchange.sent, *exchange.replies)
        for source in message.sources
    }
    return [
        question
        for question in transcript.questions
        if question.category in CATEGORIES
        and question.evidence
        and content_words(question.answer)
        and all(source in played for source in question.evidence)
    ]


def truncated(messages: Sequence[Mapping[str, Any]], budget: int) -> list[Mapping[str, Any]]:
    """Plain truncation to ``budget`` tokens: the system messages and the last message always, then
    the newest of the others while they fit (the first that does not fit ends it)."""
    if not messages:
        return []
    costs = [msgs.message_tokens(message) for message in messages]
    keep = {i for i, message in enumerate(messages) if msgs.role_of(message) in msgs.SYSTEM_ROLES}
    keep.add(len(messages) - 1)
    used = sum(costs[i] for i in keep)
    for index in range(len(messages) - 2, -1, -1):
        if index in keep:
            continue
        if used + costs[index] > budget:
            break
        keep.add(index)
        used += costs[index]
    return [messages[i] for i in sorted(keep)]


def not_held(
    ranked: Sequence[str], texts: Mapping[str, str], sources: Mapping[str, str], request: memory_context.Held
) -> list[str]:
    """The keys of ``ranked`` whose turn recall's provenance rule would let back into ``request``: each
    raw turn is judged as `echo.domain.memory.context.holds` judges a memory, as a memory of one
    source (``sources[key]``, the turn's invariant hash) whose text is the turn's (``texts[key]``).
    So a turn is held back when the request carries it, or when its summary covers it and states all
    of its terms; a turn outside both (dropped, not summarised) may come back."""
    return [
        key
        for key in ranked
        if not memory_context.holds(
            request,
            recall.Candidate(
                id=key,
                summary=texts[key],
                similarity=1.0,
                importance=1,
                updated_at=0.0,
                sources=frozenset({sources[key][: recall.SOURCE_CHARS]}),
            ),
        )
    ]


def fill_budget(ranked: Iterable[str], budget: int, counter: Callable[[str], int]) -> list[str]:
    """The texts, best first, that fit ``budget`` tokens together; one that does not fit what is
    left is skipped, so a long one never crowds out the rest (as ECHO's recall selects)."""
    chosen, used = [], 0
    for text in ranked:
        cost = counter(text)
        if used + cost <= budget:
            chosen.append(text)
            used += cost
    return chosen


_SESSION_HEADER = re.compile(r"^\[session \d+, ([^\]\n]+)\]$", re.MULTILINE)


def _session_time(text: str) -> float | None:
    """A LoCoMo session's date and time ("1:56 pm on 8 May, 2023") in unix seconds (UTC)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def with_timestamps(transcript: transcripts.Transcript) -> transcripts.Transcript:
    """``transcript`` whose messages carry a ``timestamp`` field, as Open WebUI's do: the time of the
    session the message opens in (its own header, else the last one before it), one second apart."""
    current: float | None = None
    exchanges = []
    for exchange in transcript.exchanges:
        parts = []
        for group in (exchange.sent, exchange.replies):
            stamped = []
            for message in group:
                text = msgs.content_text(message.content)
                headers = [_session_time(found) for found in _SESSION_HEADER.findall(text)]
                opening = _SESSION_HEADER.match(text)
                if opening is not None and headers[0] is not None:
                    current = headers[0]
                at = current
                for found in headers:
                    current = found if found is not None else current
                if at is not None:
                    fields = MappingProxyType({**message.fields, "timestamp": int(at)})
                    message = dataclasses.replace(message, fields=fields)
                    current = at + 1 if current == at else current
                stamped.append(message)
            parts.append(tuple(stamped))
        exchanges.append(transcripts.Exchange(sent=parts[0], replies=parts[1]))
    return dataclasses.replace(transcript, exchanges=tuple(exchanges))
