"""The payload of a `summary` job: one planned summary, as references (no transcript).

The outlet and manual compaction build it (`jobs.summary_job`) and store it (`to_payload`); the
worker validates the stored JSON into it once (`echo.queue.payloads`) and hands it to
`summary.SummaryHandler`. It holds the invariant hashes of the planned turns (their messages are in
the conversation store), the cumulative hash before them (`parent`), the key of the previous
summary, and the valves in force when it was planned (model, window, style, temperature, fail mode,
locale). The chain itself (`hashes`) is walked by the handler, on a worker thread for long ones.

Version 1, the keys as stored since the summary job exists; see `echo.queue.payloads` for the rule
that adds a field or a version.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from echo.domain import chain, kinds
from echo.domain.compression import budgets, planning, prompts
from echo.queue import errors, payloads

__all__ = ["FailMode", "SummaryPayload"]

FailMode = Literal["silent", "raise"]


class SummaryPayload(payloads.Payload):
    """One planned summary (see the module docstring)."""

    KIND: ClassVar[str] = kinds.SUMMARY
    VERSION: ClassVar[int] = 1

    user_id: str = Field(min_length=1)
    chat_id: str | None = None
    head_count: int = Field(ge=0)  # leading messages kept verbatim before the summary
    start: int = Field(ge=0)  # index of the first planned turn
    parent: str | None = None  # cumulative hash of the turn before `start` (None when start is 0)
    invariants: tuple[str, ...] = Field(min_length=1)  # of the planned turns, in order
    covered_hash: str = Field(min_length=1)  # cumulative hash of the last planned turn: the job's key
    previous: str | None = None  # covered hash of the summary this one folds in
    model: str = ""  # "" = the worker's default model (ECHO_LLM_MODEL)
    window: budgets.SummaryWindow
    style: prompts.Style = "balanced"
    max_share: float = Field(default=0.25, gt=0, le=1)  # max_summary_share: of the covered turns' tokens
    temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    fail_mode: FailMode = "silent"
    locale: str = "en-US"

    @field_validator("model", mode="before")
    @classmethod
    def _default_model(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("locale", mode="before")
    @classmethod
    def _default_locale(cls, value: Any) -> Any:
        return value or "en-US"

    @field_validator("window", mode="before")
    @classmethod
    def _window_source(cls, value: Any) -> Any:
        if isinstance(value, dict) and "source" not in value:
            return {**value, "source": ""}
        return value

    @field_validator("window")
    @classmethod
    def _positive_window(cls, value: budgets.SummaryWindow) -> budgets.SummaryWindow:
        if value.input_tokens < 1 or value.output_tokens < 1:
            raise ValueError("positive token budgets")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SummaryPayload:
        if self.head_count > self.start:
            raise ValueError(f"head_count: {self.head_count} must lie in 0..start ({self.start})")
        if (self.start == 0) != (self.parent is None):
            raise ValueError("parent: required exactly when start > 0")
        return self

    @classmethod
    def planned(
        cls,
        plan: planning.SummaryPlan,
        *,
        user_id: str,
        parent: str | None,
        model: str,
        window: budgets.SummaryWindow,
        style: prompts.Style,
        temperature: float,
        max_share: float = 0.25,
        fail_mode: FailMode,
        locale: str,
        chat_id: str | None = None,
    ) -> SummaryPayload:
        """The job of ``plan``; ``parent`` is the cumulative hash of the turn before ``plan.start``."""
        return cls(
            user_id=user_id,
            head_count=plan.head_count,
            start=plan.start,
            parent=parent,
            invariants=plan.invariants,
            covered_hash=plan.covered_hash,
            previous=plan.previous.covered_hash if plan.previous is not None else None,
            model=model,
            window=window,
            style=style,
            max_share=max_share,
            temperature=temperature,
            fail_mode=fail_mode,
            locale=locale,
            chat_id=chat_id,
        )

    @property
    def key(self) -> str:
        """The job's idempotency key."""
        return planning.summary_job_key(self.user_id, self.covered_hash)

    @property
    def lock_scope(self) -> str:
        """What jobs that must not run at once share: the chat, else the turn their branch starts
        from (the jobs of one branch fold the same previous summary or start at the same head)."""
        if self.chat_id:
            return f"chat:{self.chat_id}"
        return f"branch:{self.previous or self.parent or self.invariants[0]}"

    def hashes(self) -> tuple[str, ...]:
        """The cumulative hash of every planned turn, from ``parent`` and the invariants;
        `PermanentJobError` when they are not hashes or do not lead to ``covered_hash``."""
        try:
            parent, out = self.parent, []
            for invariant in self.invariants:
                parent = chain.cumulative_hash(invariant, parent)
                out.append(parent)
        except ValueError as error:
            raise errors.PermanentJobError(f"malformed summary payload: {error}") from error
        if out[-1] != self.covered_hash:
            raise errors.PermanentJobError("malformed summary payload: the refs do not lead to covered_hash")
        return tuple(out)
