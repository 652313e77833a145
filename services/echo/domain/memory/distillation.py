"""Distillation of one window (seed 000): the prompt, the response schema, the answer's validation.

Pure. The answer is one JSON object: ``summary`` (100–1000 words in the prompt; the validation
accepts 1–1000, since a short window may hold one fact), ``memory_importance`` (1–5),
``memory_id`` (a short technical id: lower-case letters, digits, ``_`` and ``-``), ``tags`` (3–5)
and ``worth_remembering`` (false when the window holds nothing worth keeping: greetings, small
talk, questions answered with general knowledge only — then no memory is made). ``validate``
says what is wrong, field by field (a pydantic model of the answer, with the JSON types as they are:
``"4"`` is no integer, ``1`` no boolean); the job asks the model once to repair an invalid answer,
then dead-letters it with the raw text.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Mapping
from typing import Annotated, Any

import pydantic
import pydantic_core

from echo.domain.memory import records
from echo.errors import EchoError

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


def _integral(value: object) -> object:
    """An integral float as the int it is: JSON Schema's integer counts ``4.0`` as one (a model may
    write it so), and the strict check below then takes it; ``True`` stays a boolean (no integer)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Answer(pydantic.BaseModel):
    """A distillation answer as ``validate`` checks it: ``DISTILLATION_SCHEMA`` plus the lengths that
    Gemini's response schema cannot state. Other keys are ignored, as the schema allows them."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True)  # no coercion: "4" is not 4

    worth_remembering: bool
    summary: str
    memory_importance: Annotated[int, pydantic.BeforeValidator(_integral), pydantic.Field(ge=1, le=5)]
    memory_id: Annotated[str, pydantic.Field(min_length=1, max_length=80)]
    tags: Annotated[
        list[Annotated[str, pydantic.Field(min_length=1, max_length=60)]],
        pydantic.Field(min_length=3, max_length=5),
    ]


_SLUG = re.compile(r"[^a-z0-9_-]+")
_SHORT = reprlib.Repr()  # the value quoted in a problem, cut to about a line
_SHORT.maxstring = _SHORT.maxother = 60

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


class InvalidDistillation(EchoError):
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


def _problem(error: pydantic_core.ErrorDetails) -> str:
    """One problem: where (``tags.2``; ``(answer)`` for the whole), what, and the value found."""
    where = ".".join(str(part) for part in error["loc"]) or "(answer)"
    if error["type"] == "missing":
        return f"{where}: {error['msg']}"
    return f"{where}: {error['msg']}, got {_SHORT.repr(error['input'])}"


def _checked(answer: object) -> tuple[_Answer | None, list[str]]:
    """The answer checked (None when it is invalid), and its problems, one per field at fault."""
    if not isinstance(answer, Mapping):
        return None, [f"(answer): expected a JSON object, got {type(answer).__name__}"]
    try:
        checked = _Answer.model_validate(dict(answer))
    except pydantic.ValidationError as error:
        return None, [_problem(e) for e in error.errors(include_url=False)]
    if not checked.worth_remembering:
        return checked, []
    problems = []
    words = len(checked.summary.split())
    if words == 0:
        problems.append("summary: empty")
    elif words > MAX_SUMMARY_WORDS:
        problems.append(f"summary: {words} words, at most {MAX_SUMMARY_WORDS}")
    if not _SLUG.sub("", checked.memory_id.strip().lower().replace(" ", "_")):
        problems.append("memory_id: no letter or digit")
    return (None if problems else checked), problems


def validate(answer: object) -> list[str]:
    """What is wrong with a parsed answer, one entry per problem naming its field (empty: valid)."""
    return _checked(answer)[1]


def _slug(text: str) -> str:
    return _SLUG.sub("", text.strip().lower().replace(" ", "_"))[:64] or "memory"


def parse(answer: object) -> records.Distilled | None:
    """The distilled memory, or None when the window holds nothing worth remembering.

    Raises ``InvalidDistillation`` when ``validate`` finds problems."""
    checked, problems = _checked(answer)
    if checked is None:
        raise InvalidDistillation(problems)
    if not checked.worth_remembering:
        return None
    tags: list[str] = []
    for tag in checked.tags:
        cleaned = " ".join(tag.strip().lower().split())
        if cleaned and cleaned not in tags:
            tags.append(cleaned)
    return records.Distilled(
        summary=checked.summary.strip(),
        importance=checked.memory_importance,
        memory_id=_slug(checked.memory_id),
        tags=tuple(tags),
    )


def raw_text(answer: object) -> str:
    """An answer as text, for the dead letter."""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, default=str)
