"""The heuristic distiller: a window's facts without a language model (the offline provider). Pure.

It answers what the distillation prompt asks an LLM for (``distillation.DISTILLATION_SCHEMA``): a
list of memories, each one statement of the window, with its importance, id and tags. It reads the
window as ``cleaning.render`` wrote it (``User: …`` / ``Assistant: …`` paragraphs) and keeps, per
message, its informative sentences — no questions, no small talk (``worth.content_words``), at
least ``MIN_FACT_WORDS`` content words — joined while they fit ``distillation.MAX_MEMORY_TOKENS``,
after who said them: the name a message opens with (``Caroline: …``) or ``User``. An assistant's
sentence is kept only when it speaks of itself (``I``, ``my``, ``we``…: a participant, not general
knowledge). A date the window states (``8 May, 2023``, ``2026-05-31``) is put before the statements
that follow it, so "yesterday" keeps its day. At most ``MAX_FACTS`` per window, the richest, in
their order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from echo.domain import extractive, tokens
from echo.domain.memory import cleaning, distillation, worth

__all__ = ["MAX_FACTS", "MIN_FACT_WORDS", "heuristic_answer", "statements"]

MAX_FACTS = 6
MIN_FACT_WORDS = 3

_PARAGRAPH = re.compile(r"^(User|Assistant): ", re.MULTILINE)
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


@dataclass(frozen=True)
class _Statement:
    text: str
    weight: float
    order: int


def _messages(conversation: str) -> list[tuple[str, str]]:
    """``(role, text)`` of each rendered paragraph."""
    found = list(_PARAGRAPH.finditer(conversation))
    out = []
    for index, match in enumerate(found):
        end = found[index + 1].start() if index + 1 < len(found) else len(conversation)
        out.append((match.group(1).lower(), conversation[match.end() : end].strip()))
    return out


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


def statements(conversation: str) -> list[str]:
    """The window's statements worth keeping, each within ``MAX_MEMORY_TOKENS``, in their order."""
    found: list[_Statement] = []
    date = ""
    for role, text in _messages(conversation):
        text = _FILES.sub(lambda m: f"(shared {m.group(1)})", text)
        kept: list[str] = []
        speaker = "User" if role == "user" else "Assistant"
        weight = 0.0
        for line in text.splitlines():
            line = line.strip()
            dated = _DATE.search(line)
            if dated:
                date = dated.group(1)
            if not line or _HEADER_LINE.match(line):
                continue
            named = _SPEAKER.match(line)
            if named:
                speaker, line = named.group(1), line[named.end() :]
            for sentence in extractive.sentences(line):
                words = _content(sentence)
                if sentence.rstrip().endswith("?") or len(words) < MIN_FACT_WORDS:
                    continue
                if role == "assistant" and not _SELF.search(sentence):
                    continue
                kept.append(sentence)
                weight += len(words) + 2 * bool(re.search(r"\d", sentence))
        if not kept:
            continue
        prefix = f"[{date}] {speaker}:" if date else f"{speaker}:"
        room = distillation.MAX_MEMORY_TOKENS - tokens.estimate_tokens(prefix) - 1
        most = distillation.MAX_FACT_WORDS - len(prefix.split())
        body = ""
        for sentence in kept:  # the message's sentences while they fit, the first one cut if need be
            joined = f"{body} {sentence}".strip()
            if _fits(joined, room, most):
                body = joined
            elif not body:
                body = _fit(sentence, room, most)
        if body:
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
