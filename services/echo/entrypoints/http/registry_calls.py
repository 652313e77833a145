"""The request bodies of the registry tools (plans, code), written for the model that fills them.

An optional field takes an explicit null as "not given" (models send it), and its schema says so in
one plain schema, `"type": ["string", "null"]` (`_null_means_not_given`), not an `anyOf` for the model
to puzzle over. Every text has a bound; a code entry's content is bounded in UTF-8 bytes
(`MAX_CODE_BYTES`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

__all__ = ["MAX_CODE_BYTES", "CommitCode", "PlanStatus", "ReadCode", "SavePlan", "UpdatePlan"]

MAX_CODE_BYTES = 1024 * 1024
"""Most bytes (UTF-8) of one code entry's content."""

# No control characters in an identifier: it is shown in the AEC block and in error messages.
_ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
# No NUL in any text: PostgreSQL's text cannot hold one (it was a 503 from the store; now a 422).
_TEXT_PATTERN = r"^[^\x00]*$"

PlanStatus = Literal["todo", "in_progress", "blocked", "done", "abandoned"]
# Constraints on the str branch only: an optional field's None must pass them by.
PlanId = Annotated[str, Field(min_length=1, max_length=100, pattern=_ID_PATTERN)]
Goal = Annotated[str, Field(min_length=1, max_length=2000, pattern=_TEXT_PATTERN)]
ModelName = Annotated[str, Field(min_length=1, max_length=200, pattern=_TEXT_PATTERN)]
Step = Annotated[str, Field(min_length=1, max_length=1000, pattern=_TEXT_PATTERN)]
Steps = Annotated[
    list[Step],
    Field(
        max_length=100,
        description="The plan's steps in order, each one line such as '[x] read the module' (replaces the"
        " earlier steps).",
    ),
]
_GOAL = "What the plan is for, in one sentence."
_CHANGES = ("status", "goal", "steps")


def _null_means_not_given(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Each optional field's schema takes null too (`SkipJsonSchema` left it out of a union)."""
    for name, field in model.model_fields.items():
        found = schema.get("properties", {}).get(name)
        if field.is_required() or found is None:
            continue
        if isinstance(found.get("type"), str):
            found["type"] = [found["type"], "null"]
        if "enum" in found and None not in found["enum"]:
            found["enum"] = [*found["enum"], None]


def _one_change_at_least(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """At least one of status, goal, steps, and not null (null is "not given"): a bare id is a 422."""
    _null_means_not_given(schema, model)
    schema["anyOf"] = [
        {"required": [name], "properties": {name: {"not": {"type": "null"}}}} for name in _CHANGES
    ]


class SavePlan(BaseModel):
    """Create a plan, or replace the plan with this id."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_null_means_not_given)

    id: PlanId | SkipJsonSchema[None] = Field(
        None,
        description="The plan's id to replace it; leave it out to create a new plan (its id is returned).",
    )
    goal: Goal = Field(description=_GOAL)
    status: PlanStatus = Field(description="Where the plan stands.")
    steps: Steps | SkipJsonSchema[None] = None
    model: ModelName | SkipJsonSchema[None] = Field(
        None, description="The model that makes the plan (yours)."
    )


class UpdatePlan(BaseModel):
    """Change some fields of an existing plan."""

    # At least one change, in the schema too (a bare id is refused with a 422).
    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_change_at_least)

    id: PlanId = Field(description="The plan's id.")
    status: PlanStatus | SkipJsonSchema[None] = Field(None, description="The plan's new status.")
    goal: Goal | SkipJsonSchema[None] = Field(None, description=_GOAL)
    steps: Steps | SkipJsonSchema[None] = None

    @model_validator(mode="after")
    def _changes_something(self) -> UpdatePlan:
        if self.status is None and self.goal is None and self.steps is None:
            raise ValueError("nothing to change: give at least one of status, goal, steps")
        return self


class CommitCode(BaseModel):
    """Store the full content of a code entry: a new entry, or a new version of it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1,
        max_length=255,
        pattern=_ID_PATTERN,
        description="The entry's file name, such as 'mon_script.py' or 'src/config.yaml'.",
    )
    lang: str = Field(
        min_length=1,
        max_length=50,
        pattern=_TEXT_PATTERN,
        description="Its language: python, yaml, typescript…",
    )
    content: str = Field(
        pattern=_TEXT_PATTERN, description="The file's whole content (at most 1 MiB of UTF-8)."
    )
    message: str = Field(
        min_length=1,
        max_length=500,
        pattern=_TEXT_PATTERN,
        description="A commit message for this version, such as 'feat: add error handler'.",
    )

    @field_validator("content")
    @classmethod
    def _bounded(cls, value: str) -> str:
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_CODE_BYTES:
            raise ValueError(f"{size} bytes of UTF-8, over the limit of {MAX_CODE_BYTES} bytes (1 MiB)")
        return value


class ReadCode(BaseModel):
    """Read one code entry."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=255, pattern=_TEXT_PATTERN, description="The entry's file name.")
