"""Distillation of one window (seed 000): the prompt, the response schema, the answer's validation.

Pure. The answer is one JSON object: ``worth_remembering`` (false when the window holds nothing worth
keeping: greetings, small talk, questions answered with general knowledge only — then no memory is
made) and ``memories``, at most ``MAX_FACTS`` of them, each one fact about the user (or another
participant) in one or two sentences that say who and when (the window renders each message with
the day it was sent: ``cleaning.render``) — ``fact`` (at most ``MAX_FACT_WORDS`` words and
``MAX_MEMORY_TOKENS`` tokens, so that ten memories fit the default recall budget), and the seed's
fields: ``memory_importance`` (1–5), ``memory_id`` (a short technical id: lower-case letters,
digits, ``_`` and ``-``) and ``tags`` (3–5). Each becomes its own memory (the seed's merge policy
applies to each). ``validate`` says what is wrong, field by field (a pydantic model of the answer,
with the JSON types as they are: ``"4"`` is no integer, ``1`` no boolean); the job asks the model
once to repair an invalid answer, then dead-letters it with the raw text, so a malformed answer never
becomes a memory. Two shapes a weak model writes for the same content are read as it meant them: the
bare list of memories, and one memory at the top level (``summary`` or ``fact`` beside the seed's
fields).
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Mapping
from typing import Annotated, Any

import pydantic
import pydantic_core

from echo.domain import tokens
from echo.domain.memory import records
from echo.errors import EchoError

__all__ = [
    "DISTILLATION_SCHEMA",
    "MAX_FACTS",
    "MAX_FACT_WORDS",
    "MAX_MEMORY_TOKENS",
    "InvalidDistillation",
    "distillation_prompt",
    "parse",
    "raw_text",
    "repair_prompt",
    "validate",
]

MAX_FACTS = 10
MAX_FACT_WORDS = 40
MAX_MEMORY_TOKENS = 56  # ten memory lines (with their date, importance and tags) fit RECALL_MAX_TOKENS 800

_MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "fact": {
            "type": "string",
            "description": f"one fact about the user, third person, at most {MAX_FACT_WORDS} words: who and"
            " when (the date it happened or was said), names, numbers and dates exact",
        },
        "memory_importance": {"type": "integer", "minimum": 1, "maximum": 5},
        "memory_id": {"type": "string", "description": "short technical id, e.g. user_trip_japan_2026"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 5},
    },
    "required": ["fact", "memory_importance", "memory_id", "tags"],
}

DISTILLATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "worth_remembering": {
            "type": "boolean",
            "default": True,
            "description": "false when the conversation holds nothing worth remembering about the user",
        },
        "memories": {"type": "array", "items": _MEMORY_SCHEMA, "maxItems": MAX_FACTS},
    },
    "required": ["worth_remembering", "memories"],
}


def _integral(value: object) -> object:
    """An integral float as the int it is: JSON Schema's integer counts ``4.0`` as one (a model may
    write it so), and the strict check below then takes it; ``True`` stays a boolean (no integer)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Fact(pydantic.BaseModel):
    """One memory of an answer; other keys are ignored, as the schema allows them."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True)  # no coercion: "4" is not 4

    fact: Annotated[str, pydantic.Field(min_length=1)]
    memory_importance: Annotated[int, pydantic.BeforeValidator(_integral), pydantic.Field(ge=1, le=5)]
    memory_id: Annotated[str, pydantic.Field(min_length=1, max_length=80)]
    tags: Annotated[
        list[Annotated[str, pydantic.Field(min_length=1, max_length=60)]],
        pydantic.Field(min_length=3, max_length=5),
    ]


class _Answer(pydantic.BaseModel):
    """A distillation answer as ``validate`` checks it: ``DISTILLATION_SCHEMA`` plus the lengths that
    a response schema cannot state."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True)

    worth_remembering: bool
    memories: Annotated[list[_Fact], pydantic.Field(max_length=MAX_FACTS)]


_SLUG = re.compile(r"[^a-z0-9_-]+")
_SHORT = reprlib.Repr()  # the value quoted in a problem, cut to about a line
_SHORT.maxstring = _SHORT.maxother = 60

_SYSTEM = f"""You maintain the long-term memory of an assistant about one user.
Read the conversation excerpt and list the facts worth remembering about the user (and the people
they speak of) for future, unrelated conversations: durable facts (identity, relations, places,
dates, events), preferences, decisions, goals, projects and their state, constraints.
Each paragraph of the excerpt starts with its author and, when known, the day it was sent:
"User (8 May 2023): ...". Write each fact as its own memory: one or two short sentences in the
third person, at most {MAX_FACT_WORDS} words, that make sense alone: name who it is about or who
said it (the user's or the person's name when the excerpt gives it), and say when — the day the
fact happened or was said, as a date ("On 8 May 2023, ...": resolve "yesterday", "last week" or
"next month" against the day of the message; no relative dates). Keep names, numbers and dates
exactly. Write in the conversation's language. No narrative of the conversation, no summary of
what was said: facts. At most {MAX_FACTS} memories; fewer when there is little to keep. Do not
record the assistant's general knowledge, jokes, greetings or small talk.
If nothing is worth remembering, answer worth_remembering=false and memories=[].
For each memory: memory_importance 1 trivia, 2 minor preference, 3 useful fact, 4 important fact or
project, 5 critical (health, safety, commitments, identity); memory_id a short technical id in
snake_case that names the fact; tags 3 to 5 short lower-case keywords.
Answer with one JSON object only: {{"worth_remembering": true, "memories": [{{"fact": "...",
"memory_importance": 3, "memory_id": "...", "tags": ["...", "...", "..."]}}]}}"""


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


def _shaped(answer: object) -> object:
    """The answer in the schema's shape where a weak model wrote the same content another way: the
    bare list of memories, or one memory at the top level (``summary`` for ``fact``, as the seed's
    single-memory answer names it)."""
    if isinstance(answer, list):
        return {"worth_remembering": bool(answer), "memories": answer}
    if isinstance(answer, Mapping) and "memories" not in answer:
        single = dict(answer)
        if "fact" not in single and isinstance(single.get("summary"), str):
            single["fact"] = single.pop("summary")
        if "fact" in single:
            remembered = single.pop("worth_remembering", True)
            return {"worth_remembering": remembered, "memories": [single] if remembered is not False else []}
    return answer


def _checked(answer: object) -> tuple[_Answer | None, list[str]]:
    """The answer checked (None when it is invalid), and its problems, one per field at fault."""
    answer = _shaped(answer)
    if not isinstance(answer, Mapping):
        return None, [f"(answer): expected a JSON object, got {type(answer).__name__}"]
    try:
        checked = _Answer.model_validate(dict(answer))
    except pydantic.ValidationError as error:
        return None, [_problem(e) for e in error.errors(include_url=False)]
    if not checked.worth_remembering:
        return checked, []
    problems = []
    if not checked.memories:
        problems.append("memories: empty, but worth_remembering is true")
    for index, fact in enumerate(checked.memories):
        words = len(fact.fact.split())
        if words == 0:
            problems.append(f"memories.{index}.fact: empty")
        elif words > MAX_FACT_WORDS:
            problems.append(f"memories.{index}.fact: {words} words, at most {MAX_FACT_WORDS}")
        elif tokens.estimate_tokens(fact.fact) > MAX_MEMORY_TOKENS:
            problems.append(f"memories.{index}.fact: longer than {MAX_MEMORY_TOKENS} tokens")
        if not _SLUG.sub("", fact.memory_id.strip().lower().replace(" ", "_")):
            problems.append(f"memories.{index}.memory_id: no letter or digit")
    return (None if problems else checked), problems


def validate(answer: object) -> list[str]:
    """What is wrong with a parsed answer, one entry per problem naming its field (empty: valid)."""
    return _checked(answer)[1]


def _slug(text: str) -> str:
    return _SLUG.sub("", text.strip().lower().replace(" ", "_"))[:64] or "memory"


def _distilled(fact: _Fact) -> records.Distilled:
    tags: list[str] = []
    for tag in fact.tags:
        cleaned = " ".join(tag.strip().lower().split())
        if cleaned and cleaned not in tags:
            tags.append(cleaned)
    return records.Distilled(
        summary=" ".join(fact.fact.split()),
        importance=fact.memory_importance,
        memory_id=_slug(fact.memory_id),
        tags=tuple(tags),
    )


def parse(answer: object) -> list[records.Distilled]:
    """The window's memories, in order, each fact once (empty when nothing is worth remembering).

    Raises ``InvalidDistillation`` when ``validate`` finds problems."""
    checked, problems = _checked(answer)
    if checked is None:
        raise InvalidDistillation(problems)
    if not checked.worth_remembering:
        return []
    out: list[records.Distilled] = []
    for fact in checked.memories:
        distilled = _distilled(fact)
        if all(d.summary.lower() != distilled.summary.lower() for d in out):
            out.append(distilled)
    return out


def raw_text(answer: object) -> str:
    """An answer as text, for the dead letter."""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, default=str)
