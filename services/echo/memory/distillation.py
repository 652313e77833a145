"""Distillation of one window (seed 000): the prompt, the response schema, the answer's validation.

Pure. The answer is one JSON object: ``summary`` (100–1000 words in the prompt; the validation
accepts 1–1000, since a short window may hold one fact), ``memory_importance`` (1–5),
``memory_id`` (a short technical id: lower-case letters, digits, ``_`` and ``-``), ``tags`` (3–5)
and ``worth_remembering`` (false when the window holds nothing worth keeping: greetings, small
talk, questions answered with general knowledge only — then no memory is made). ``validate``
says what is wrong, field by field; the job asks the model once to repair an invalid answer, then
dead-letters it with the raw text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from echo.memory import records

__all__ = [
    "DISTILLATION_SCHEMA",
    "MAX_SUMMARY_WORDS",
    "InvalidDistillation",
    "distillation_prompt",
    "parse",
    "raw_text",
    "repair_prompt",
    "validate",
]

MAX_SUMMARY_WORDS = 1000

DISTILLATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "worth_remembering": {
            "type": "boolean",
            "default": True,
            "description": "false when the conversation holds nothing worth remembering about the user",
        },
        "summary": {
            "type": "string",
            "description": "100-1000 words: lasting facts, preferences, decisions and projects of the user",
        },
        "memory_importance": {"type": "integer", "minimum": 1, "maximum": 5},
        "memory_id": {"type": "string", "description": "short technical id, e.g. user_trip_japan_2026"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 5},
    },
    "required": ["worth_remembering", "summary", "memory_importance", "memory_id", "tags"],
}

# What validation checks beyond the schema sent to the model (Gemini's schema has no pattern).
_VALIDATION_SCHEMA: dict[str, Any] = {
    **DISTILLATION_SCHEMA,
    "properties": {
        **DISTILLATION_SCHEMA["properties"],
        "memory_id": {"type": "string", "minLength": 1, "maxLength": 80},
        "tags": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 60},
            "minItems": 3,
            "maxItems": 5,
        },
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(_VALIDATION_SCHEMA)
_SLUG = re.compile(r"[^a-z0-9_-]+")

_SYSTEM = """You maintain the long-term memory of an assistant about one user.
Read the conversation excerpt and write what is worth remembering about the user for future,
unrelated conversations: durable facts (identity, relations, places, dates, events), preferences,
decisions, goals, projects and their state, constraints. Keep names, numbers and dates exactly.
Write in the conversation's language, in the third person, as plain prose (100 to 1000 words;
fewer when there is little to keep). Do not record the assistant's general knowledge, jokes,
greetings or small talk.
If nothing is worth remembering, answer worth_remembering=false (the other fields may then be
short placeholders).
memory_importance: 1 trivia, 2 minor preference, 3 useful fact, 4 important fact or project,
5 critical (health, safety, commitments, identity).
memory_id: a short technical id in snake_case that names the topic.
tags: 3 to 5 short lower-case keywords.
Answer with one JSON object only."""


class InvalidDistillation(ValueError):
    """The answer does not match the schema; ``problems`` name each field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def distillation_prompt(conversation: str) -> tuple[str, str]:
    """``(system, user)`` texts of the distillation request for a cleaned window."""
    return _SYSTEM, f"<conversation>\n{conversation}\n</conversation>"


def repair_prompt(conversation: str, answer: str, problems: list[str]) -> tuple[str, str]:
    """The one repair request: the same task, the invalid answer, and what is wrong with it."""
    system, user = distillation_prompt(conversation)
    listed = "\n".join(f"- {p}" for p in problems)
    return system, (
        f"{user}\n\nYour previous answer was invalid:\n<answer>\n{answer[:4000]}\n</answer>\n"
        f"Problems:\n{listed}\nAnswer again with one valid JSON object."
    )


def _location(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    return path or "(answer)"


def validate(answer: object) -> list[str]:
    """What is wrong with a parsed answer, one entry per problem naming its field (empty: valid)."""
    if not isinstance(answer, Mapping):
        return [f"(answer): expected a JSON object, got {type(answer).__name__}"]
    problems = [f"{_location(e)}: {e.message}" for e in _VALIDATOR.iter_errors(dict(answer))]
    if problems or not answer.get("worth_remembering"):
        return problems
    summary = answer["summary"]
    words = len(summary.split())
    if words == 0:
        problems.append("summary: empty")
    elif words > MAX_SUMMARY_WORDS:
        problems.append(f"summary: {words} words, at most {MAX_SUMMARY_WORDS}")
    if not _SLUG.sub("", answer["memory_id"].strip().lower().replace(" ", "_")):
        problems.append("memory_id: no letter or digit")
    return problems


def _slug(text: str) -> str:
    return _SLUG.sub("", text.strip().lower().replace(" ", "_"))[:64] or "memory"


def parse(answer: object) -> records.Distilled | None:
    """The distilled memory, or None when the window holds nothing worth remembering.

    Raises ``InvalidDistillation`` when ``validate`` finds problems."""
    problems = validate(answer)
    if problems:
        raise InvalidDistillation(problems)
    assert isinstance(answer, Mapping)
    if not answer["worth_remembering"]:
        return None
    tags: list[str] = []
    for tag in answer["tags"]:
        cleaned = " ".join(tag.strip().lower().split())
        if cleaned and cleaned not in tags:
            tags.append(cleaned)
    return records.Distilled(
        summary=answer["summary"].strip(),
        importance=int(answer["memory_importance"]),
        memory_id=_slug(answer["memory_id"]),
        tags=tuple(tags),
    )


def raw_text(answer: object) -> str:
    """An answer as text, for the dead letter."""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, default=str)
