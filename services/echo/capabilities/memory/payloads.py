"""The payload of a `distill` job: one window of a chat branch, as references (no transcript).

The outlet of `echo_memory` builds it and stores it (`to_payload`); the worker validates the stored
JSON into it once (`echo.queue.payloads`) and hands it to `distill.DistillHandler`. It holds the
window's key (stored as `"window"`: the cumulative hash of its last message, also the job's
idempotency key), the invariant hashes of its messages (their text is in the conversation store)
and the hash before them (`parent`), Open WebUI's message ids, the files' names, and the memory
valves in force when it was enqueued. The chain itself (`check_chain`) is walked by the handler, on
a worker thread for large windows.

Version 1, the keys as stored since the distill job exists, read as tolerantly as before (a missing
or empty model or chat id takes its default, a message id that is not a string is None); see
`echo.queue.payloads` for the rule that adds a field or a version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, field_validator

from echo.domain import chain, kinds
from echo.domain.memory import records
from echo.queue import errors, payloads

__all__ = ["DistillPayload"]

_DEFAULT_MODEL = "gemini-2.5-flash"


class DistillPayload(payloads.Payload):
    """One window to distill (see the module docstring); `key` is stored as `"window"`."""

    model_config = ConfigDict(populate_by_name=True)

    KIND: ClassVar[str] = kinds.DISTILL
    VERSION: ClassVar[int] = 1

    user_id: str = Field(min_length=1)
    chat_id: str | None = None
    key: str = Field(alias="window")
    start: int = 0  # index of the window's first message in the branch
    parent: str | None = None  # cumulative hash of the message before `start`
    invariants: tuple[str, ...] = Field(min_length=1)
    message_ids: tuple[str | None, ...] = ()
    file_names: Mapping[str, str] = Field(default_factory=dict)
    model: str = _DEFAULT_MODEL
    similarity_threshold: float = 0.85
    exact_match_threshold: float = 0.95

    @field_validator("chat_id", mode="before")
    @classmethod
    def _no_empty_chat(cls, value: Any) -> Any:
        return value or None

    @field_validator("message_ids", mode="before")
    @classmethod
    def _unknown_ids(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [item if isinstance(item, str) else None for item in value]
        return value

    @field_validator("file_names", mode="before")
    @classmethod
    def _names_as_text(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, Mapping):
            return {str(k): str(v) for k, v in value.items()}
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _default_model(cls, value: Any) -> Any:
        return value or _DEFAULT_MODEL

    @property
    def window(self) -> records.WindowRef:
        """The window as a memory's provenance records it."""
        return records.WindowRef(self.chat_id, self.key, self.invariants, self.message_ids)

    def check_chain(self) -> None:
        """`PermanentJobError` unless the invariants, chained from `parent`, lead to the window's key."""
        parent = self.parent
        try:
            for invariant in self.invariants:
                parent = chain.cumulative_hash(invariant, parent)
        except ValueError as error:
            raise errors.PermanentJobError(f"malformed distill payload: {error}") from error
        if parent != self.key:
            raise errors.PermanentJobError("malformed distill payload: the invariants do not lead to window")
