"""Merging two memories of one topic: the LLM prompt, and the offline merge. Pure.

The model is asked to keep every fact of both and to say, where the new memory replaces an old fact
(a moved city, a changed plan), that it replaced it ("previously …"), so the merged text keeps the
history and the earlier version stays in the memory's history too. Without a model the offline
merge keeps every sentence of the old memory and adds the new memory's sentences that are not
already there (near-duplicates by word overlap), within ``MAX_SUMMARY_WORDS`` (oldest sentences of
the old memory go first when over).
"""

from __future__ import annotations

import re
from typing import Any

from echo.domain.memory import distillation

__all__ = ["MERGE_SCHEMA", "merge_prompt", "offline_merge", "parse_merge"]

MERGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "the merged memory, every fact of both kept"},
    },
    "required": ["summary"],
}

_SYSTEM = """You maintain the long-term memory of an assistant about one user.
Merge the two memories below into one text about the same topic. Keep every fact of both:
names, numbers, dates, preferences, decisions. When the new memory contradicts or updates the old
one, keep the new fact and say what it replaced (for example "moved to Lyon in 2026, previously
lived in Paris"). Write in the memories' language, in the third person, as plain prose of at most
1000 words. Answer with one JSON object: {"summary": "..."}."""

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)
_DUPLICATE_OVERLAP = 0.8


def merge_prompt(old: str, new: str) -> tuple[str, str]:
    return _SYSTEM, f"<old_memory>\n{old}\n</old_memory>\n\n<new_memory>\n{new}\n</new_memory>"


def parse_merge(answer: object) -> str:
    """The merged text; ``InvalidDistillation`` naming the field when the answer has none."""
    if not isinstance(answer, dict):
        raise distillation.InvalidDistillation(["(answer): expected a JSON object"])
    summary = answer.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise distillation.InvalidDistillation(["summary: expected a non-empty string"])
    words = len(summary.split())
    if words > distillation.MAX_SUMMARY_WORDS:
        raise distillation.InvalidDistillation(
            [f"summary: {words} words, at most {distillation.MAX_SUMMARY_WORDS}"]
        )
    return summary.strip()


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _words(sentence: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(sentence)}


def _known(sentence: str, kept: list[set[str]]) -> bool:
    words = _words(sentence)
    if not words:
        return True
    return any(len(words & other) >= _DUPLICATE_OVERLAP * len(words) for other in kept)


def offline_merge(old: str, new: str, max_words: int = distillation.MAX_SUMMARY_WORDS) -> str:
    """Every sentence of ``old``, then the sentences of ``new`` it does not already hold."""
    merged = _sentences(old)
    kept = [_words(s) for s in merged]
    for sentence in _sentences(new):
        if not _known(sentence, kept):
            merged.append(sentence)
            kept.append(_words(sentence))
    while len(merged) > 1 and sum(len(s.split()) for s in merged) > max_words:
        merged.pop(0)
    return " ".join(merged)
