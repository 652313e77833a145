"""Merging two memories of one topic: the LLM prompt, and the offline merge. Pure.

The model is asked to keep the facts of both and to say, where the new memory replaces an old fact
(a moved city, a changed plan), that it replaced it ("previously …"), so the merged text keeps the
history and the earlier version stays in the memory's history too — within the size of one memory
(``distillation.MAX_FACT_WORDS`` words, ``MAX_MEMORY_TOKENS`` tokens): a merged memory is still a
fact, not a growing narrative. Without a model the offline merge keeps every sentence of the old
memory and adds the new memory's sentences that are not already there (near-duplicates by word
overlap); over the size, the old memory's sentences go first, oldest first, then the new text is
cut (the replaced version stays in the memory's history). The distiller merges offline only where the
two fit together (`offline_merge_fits`); a new fact that would push the old one out is kept as a
memory of its own, so no fact leaves recall for want of room.
"""

from __future__ import annotations

import re
from typing import Any

from echo.domain import tokens
from echo.domain.memory import distillation

__all__ = ["MERGE_SCHEMA", "merge_prompt", "offline_merge", "offline_merge_fits", "parse_merge"]

MERGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "the merged memory, every fact of both kept"},
    },
    "required": ["summary"],
}

_SYSTEM = """You maintain the long-term memory of an assistant about one user.
Merge the two memories below into one memory about the same fact. Keep names, numbers, dates,
preferences and decisions of both. When the new memory contradicts or updates the old one, keep the
new fact and say what it replaced (for example "moved to Lyon in 2026, previously lived in Paris").
Write in the memories' language, in the third person, one or two sentences of at most
%d words. Answer with one JSON object: {"summary": "..."}."""

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)
_DUPLICATE_OVERLAP = 0.8


def merge_prompt(old: str, new: str) -> tuple[str, str]:
    system = _SYSTEM % distillation.MAX_FACT_WORDS
    return system, f"<old_memory>\n{old}\n</old_memory>\n\n<new_memory>\n{new}\n</new_memory>"


def parse_merge(answer: object) -> str:
    """The merged text; ``InvalidDistillation`` naming the field when the answer has none."""
    if not isinstance(answer, dict):
        raise distillation.InvalidDistillation(["(answer): expected a JSON object"])
    summary = answer.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise distillation.InvalidDistillation(["summary: expected a non-empty string"])
    words = len(summary.split())
    too_long = tokens.estimate_tokens(summary) > distillation.MAX_MEMORY_TOKENS
    if words > distillation.MAX_FACT_WORDS or too_long:
        raise distillation.InvalidDistillation(
            [f"summary: {words} words, at most {distillation.MAX_FACT_WORDS} (one memory)"]
        )
    return " ".join(summary.split())


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _words(sentence: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(sentence)}


def _known(sentence: str, kept: list[set[str]]) -> bool:
    words = _words(sentence)
    if not words:
        return True
    return any(len(words & other) >= _DUPLICATE_OVERLAP * len(words) for other in kept)


def _union(old: str, new: str) -> tuple[list[str], int]:
    """The sentences of ``old``, then those of ``new`` it does not already hold; how many are new."""
    merged = _sentences(old)
    kept = [_words(s) for s in merged]
    added = 0
    for sentence in _sentences(new):
        if not _known(sentence, kept):
            merged.append(sentence)
            kept.append(_words(sentence))
            added += 1
    return merged, added


def offline_merge_fits(old: str, new: str, max_tokens: int = distillation.MAX_MEMORY_TOKENS) -> bool:
    """Whether ``offline_merge`` keeps every sentence of both: their union fits in one memory."""
    merged, _ = _union(old, new)
    return tokens.estimate_tokens(" ".join(merged)) <= max_tokens


def offline_merge(old: str, new: str, max_tokens: int = distillation.MAX_MEMORY_TOKENS) -> str:
    """The sentences of ``old``, then those of ``new`` it does not already hold, within
    ``max_tokens`` (the old ones go first, oldest first; a new text still too long is cut)."""
    merged, added = _union(old, new)
    olds = len(merged) - added
    while olds > 0 and added and tokens.estimate_tokens(" ".join(merged)) > max_tokens:
        merged.pop(0)
        olds -= 1
    text = " ".join(merged)
    if tokens.estimate_tokens(text) <= max_tokens:
        return text
    words = text.split()
    while len(words) > 1 and tokens.estimate_tokens(" ".join(words) + "…") > max_tokens:
        words.pop()
    return " ".join(words) + "…"
