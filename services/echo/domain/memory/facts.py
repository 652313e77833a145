"""The heuristic distiller: a window's facts without a language model (the offline provider). Pure.

It answers what the distillation prompt asks an LLM for (``distillation.DISTILLATION_SCHEMA``): a
list of memories, each one statement of the window, with its importance, id and tags. It reads the
window as ``cleaning.render`` wrote it (``User: …`` / ``Assistant (8 May 2023): …`` paragraphs) and
keeps, per message, its informative sentences — no questions, no small talk (``worth.content_words``),
at least ``MIN_FACT_WORDS`` content words, or ``MIN_FACT_WORDS - 1`` when the sentence names
something (a number, a date, a relative day, a capitalised name) — in their order, cut into
statements of at most ``distillation.MAX_MEMORY_TOKENS`` tokens and ``distillation.MAX_FACT_WORDS``
words (a long message makes several, none is dropped for want of room), each after who said it and
when: ``[8 May 2023] Caroline: …``. Who: the name a message opens with (``Caroline: …``), else
``User`` or ``Assistant``. When: the day the message was sent (its timestamp, as the rendering
gives it), else the last date the window states (``8 May, 2023``, ``2026-05-31``), else none. A
relative day is resolved against the day the message was sent: ``yesterday (7 May 2023)``, ``last
week (the week before 8 May 2023)``, ``last year (2022)``. An assistant's sentence is kept only
when it speaks of itself (``I``, ``my``, ``we``…: a participant, not general knowledge). At most
``MAX_FACTS`` per window, the richest, in their order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from echo.domain import extractive, tokens
from echo.domain.memory import cleaning, distillation, worth

__all__ = ["MAX_FACTS", "MIN_FACT_WORDS", "heuristic_answer", "statements"]

MAX_FACTS = 8
MIN_FACT_WORDS = 3

_PARAGRAPH = re.compile(r"^(User|Assistant)(?: \((\d{1,2} [A-Z][a-z]+ \d{4})\))?: ", re.MULTILINE)
_SPEAKER = re.compile(r"^([A-Z][\w'’.-]{1,30}(?: [A-Z][\w'’.-]{1,30})?):\s+")
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre"
)
_DATE = re.compile(
    rf"\b(\d{{1,2}} (?:{_MONTHS}),? \d{{4}}|(?:{_MONTHS}) \d{{1,2}},? \d{{4}}|\d{{4}}-\d{{2}}-\d{{2}})\b",
    re.IGNORECASE,
)
_HEADER_LINE = re.compile(r"^\[[^\]\n]{0,120}\]$")  # "[session 1, 1:56 pm on 8 May, 2023]"
_SELF = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|we|we're|our|us)\b|\b(?:je|j'|mon|ma|mes|nous)\b")
_FILES = re.compile(r"^\[files: (.*)\]$", re.MULTILINE)
_NAMED = re.compile(r"\d|(?<=[\w,;:] )[A-Z][a-z]")  # a number, or a capitalised word past the first
_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|last night|this morning|last week|next week|last weekend"
    r"|last month|next month|last year|next year|this year)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Statement:
    text: str
    weight: float
    order: int


def _messages(conversation: str) -> list[tuple[str, str, datetime | None]]:
    """``(role, text, day sent)`` of each rendered paragraph."""
    found = list(_PARAGRAPH.finditer(conversation))
    out = []
    for index, match in enumerate(found):
        end = found[index + 1].start() if index + 1 < len(found) else len(conversation)
        out.append((match.group(1).lower(), conversation[match.end() : end].strip(), _day(match.group(2))))
    return out


def _day(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.strptime(text, "%d %B %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def _written(day: datetime) -> str:
    return cleaning.day_of(day.timestamp())


def _month(day: datetime, months: int) -> str:
    index = day.year * 12 + day.month - 1 + months
    return f"{datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC):%B %Y}"


def _resolved(sentence: str, day: datetime | None) -> str:
    """``sentence`` with each relative day followed by the day it means (``day``: when it was said)."""
    if day is None:
        return sentence

    def meaning(match: re.Match[str]) -> str:
        word = match.group(1).lower()
        moved = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(word)
        if moved is not None:
            found = _written(day + timedelta(days=moved))
        elif word in ("today", "tonight", "this morning"):
            found = _written(day)
        elif word in ("last week", "last weekend"):
            found = f"the {word.split()[1]} before {_written(day)}"
        elif word == "next week":
            found = f"the week after {_written(day)}"
        elif word.endswith("month"):
            found = _month(day, -1 if word.startswith("last") else 1)
        else:
            found = str(day.year + {"last year": -1, "next year": 1}.get(word, 0))
        return f"{match.group(0)} ({found})"

    return _RELATIVE.sub(meaning, sentence)


def _content(sentence: str) -> set[str]:
    return worth.content_words([cleaning.CleanMessage("user", sentence)])


def _fits(text: str, limit: int, words: int) -> bool:
    return len(text.split()) <= words and tokens.estimate_tokens(text) <= limit


def _fit(text: str, limit: int, most: int) -> str:
    """``text`` within ``limit`` tokens and ``most`` words: whole words and "…" when it is longer."""
    if _fits(text, limit, most):
        return text
    words = text.split()[:most]
    while words and tokens.estimate_tokens(" ".join(words) + "…") > limit:
        words.pop()
    return " ".join(words) + "…" if words else ""


def _kept(sentence: str, role: str) -> bool:
    """Whether a sentence states something: no question, enough content words, an assistant's only
    when it speaks of itself."""
    if sentence.rstrip().endswith("?"):
        return False
    wanted = MIN_FACT_WORDS - 1 if _NAMED.search(sentence) or _RELATIVE.search(sentence) else MIN_FACT_WORDS
    if len(_content(sentence)) < wanted:
        return False
    return role != "assistant" or _SELF.search(sentence) is not None


def _chunks(sentences: list[str], room: int, most: int) -> list[str]:
    """The sentences in order, joined into statements within ``room`` tokens and ``most`` words (a
    sentence longer than that alone is cut)."""
    out: list[str] = []
    body = ""
    for sentence in sentences:
        joined = f"{body} {sentence}".strip()
        if _fits(joined, room, most):
            body = joined
            continue
        if body:
            out.append(body)
        body = sentence if _fits(sentence, room, most) else _fit(sentence, room, most)
    if body:
        out.append(body)
    return out


def statements(conversation: str) -> list[str]:
    """The window's statements worth keeping, each within ``MAX_MEMORY_TOKENS``, in their order."""
    found: list[_Statement] = []
    date = ""
    for role, text, sent in _messages(conversation):
        text = _FILES.sub(lambda m: f"(shared {m.group(1)})", text)
        speaker = "User" if role == "user" else "Assistant"
        runs: list[tuple[str, str, list[str]]] = []  # (speaker, date, sentences) in order
        if sent is not None:
            date = _written(sent)
        for line in text.splitlines():
            line = line.strip()
            dated = _DATE.search(line)
            if dated and sent is None:
                date = dated.group(1).replace(",", "")
            if not line or _HEADER_LINE.match(line):
                continue
            named = _SPEAKER.match(line)
            if named:
                speaker, line = named.group(1), line[named.end() :]
            kept = [_resolved(s, sent) for s in extractive.sentences(line) if _kept(s, role)]
            if not kept:
                continue
            if runs and runs[-1][:2] == (speaker, date):
                runs[-1][2].extend(kept)
            else:
                runs.append((speaker, date, kept))
        for who, when, kept in runs:
            prefix = f"[{when}] {who}:" if when else f"{who}:"
            room = distillation.MAX_MEMORY_TOKENS - tokens.estimate_tokens(prefix) - 1
            most = distillation.MAX_FACT_WORDS - len(prefix.split())
            for body in _chunks(kept, room, most):
                weight = len(_content(body)) + 2 * bool(re.search(r"\d", body))
                found.append(_Statement(f"{prefix} {body}", weight, len(found)))
    richest = sorted(found, key=lambda s: (-s.weight, s.order))[:MAX_FACTS]
    return [s.text for s in sorted(richest, key=lambda s: s.order)]


def _tags(text: str) -> list[str]:
    tags = [t for t in extractive.keywords(text, 5) if len(t) <= 60]
    for filler in ("conversation", "user", "fact"):
        if len(tags) >= 3:
            break
        if filler not in tags:
            tags.append(filler)
    return tags[:5]


def heuristic_answer(conversation: str) -> dict[str, Any]:
    """The distillation answer for a rendered window, as an LLM would give it (the JSON object)."""
    found = statements(conversation)
    return {
        "worth_remembering": bool(found),
        "memories": [
            {
                "fact": fact,
                "memory_importance": extractive.importance(fact),
                "memory_id": extractive.slug(fact),
                "tags": _tags(fact),
            }
            for fact in found
        ],
    }
