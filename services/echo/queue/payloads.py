"""Job payloads: one declared model per kind, validated once by the engine, versioned.

A kind's payload is a `Payload` subclass that lives with its capability (its filter enqueues it,
its handler receives it); its fields are the stored JSON's keys:

    class SummaryPayload(payloads.Payload):
        KIND: ClassVar[str] = kinds.SUMMARY
        VERSION: ClassVar[int] = 1
        user_id: str = Field(min_length=1)
        ...

    await jobs.enqueue(kinds.SUMMARY, payload.to_payload(), idempotency_key=payload.key)
    registry.register(kinds.SUMMARY, handler, payload=SummaryPayload)  # handler(job, payload)

The worker decodes a claimed job's stored JSON into its kind's model once, before the handler runs
(`registry.HandlerSpec.run`): a payload that does not validate is a `PermanentJobError` naming the
field, so the job is dead-lettered at its first attempt and never retried. What costs CPU in
proportion to the payload (walking a hash chain) stays with the handler, off the event loop.

The stored shape outlives releases (a row enqueued by the previous release is run by this one):
- `"v"` holds the version the row was written with; a row without one is version 1;
- unknown keys are ignored: an optional field a newer release adds does not dead-letter its jobs on
  an older worker during a rolling upgrade;
- a field added with a default keeps the version: older rows take the default;
- renaming or removing a field, or changing what one means, bumps `VERSION` and overrides `upgrade`
  to turn each older version's JSON into the current shape; a version the worker does not know
  (a newer one) is refused, permanently: requeue the dead jobs once every worker runs the release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

import pydantic

from echo.queue import errors

__all__ = ["Payload", "describe"]

_PREFIXES = ("Value error, ", "Assertion failed, ")  # pydantic's, before a validator's own message


class Payload(pydantic.BaseModel):
    """The declared payload of one job kind: frozen, unknown keys ignored (see the module docstring)."""

    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")

    KIND: ClassVar[str]  # the job kind, as errors name it
    VERSION: ClassVar[int] = 1  # the version `to_payload` writes and `decode` reads

    @classmethod
    def decode(cls, stored: Mapping[str, Any]) -> Self:
        """The model of a stored payload; `PermanentJobError` naming the field when it does not validate."""
        if not isinstance(stored, Mapping):
            raise errors.PermanentJobError(
                f"malformed {cls.KIND} payload: a JSON object, not {type(stored).__name__}"
            )
        version = stored.get("v", 1)
        if version != cls.VERSION:
            stored = cls.upgrade(stored, version)
        try:
            return cls.model_validate(stored)
        except pydantic.ValidationError as error:
            raise errors.PermanentJobError(f"malformed {cls.KIND} payload: {describe(error)}") from error

    @classmethod
    def upgrade(cls, stored: Mapping[str, Any], version: object) -> Mapping[str, Any]:
        """The JSON of a row written with an older `version`, in the current shape. A kind whose
        `VERSION` is 1 knows no older one: every version but its own is refused."""
        raise errors.PermanentJobError(
            f"malformed {cls.KIND} payload: v: this worker reads version {cls.VERSION}, not {version!r}"
        )

    def to_payload(self) -> dict[str, Any]:
        """The JSON to store: the fields by their stored names, and `"v"`."""
        return {"v": self.VERSION, **self.model_dump(mode="json", by_alias=True)}


def describe(error: pydantic.ValidationError) -> str:
    """`field: problem` for each problem, `; `-separated (`window.input_tokens: Input should be …`)."""
    problems = []
    for problem in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"]
        for prefix in _PREFIXES:
            message = message.removeprefix(prefix)
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)
