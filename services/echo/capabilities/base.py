"""The filter protocol, the context one hook call runs in, and where a filter finds its backends."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from echo.capabilities import events as events_module
from echo.config import valves as valves_module
from echo.domain import bodies
from echo.ports import backends as backends_port

__all__ = [
    "BackendsProvider",
    "ExtendsDeadline",
    "FailsClosed",
    "Filter",
    "HookContext",
    "Phase",
    "no_backends",
]

Phase = Literal["inlet", "outlet"]

BackendsProvider = Callable[[], backends_port.Backends]
"""The running service's backends (`echo.ports.backends`), asked on every call: the hook service
opens its store at start-up, its embedder and vectors once warmed up."""


def no_backends() -> backends_port.Backends:
    """A provider for a filter built without backends: every part absent."""
    return backends_port.NONE


@dataclass(frozen=True)
class HookContext:
    """One hook call: which filter and phase, who, where, with which valves, and by when
    (`deadline`, a `time.monotonic()` instant; the hook runner sets it from the deadline valve).
    `events`: status events the filter adds beside its answer (`echo.capabilities.events`)."""

    filter_id: str
    phase: Phase
    user: Mapping[str, Any]
    ids: bodies.TurnIds
    valves: valves_module.Valves | None
    deadline: float | None = None
    events: list[events_module.StatusEvent] = field(default_factory=list)


class Filter(Protocol):
    """An Open WebUI filter served over the Pipelines protocol.

    `inlet` and `outlet` return a new body and never mutate the one they are given: on an error
    or a deadline the hook answers with the original body.
    """

    id: str
    name: str
    priority: int
    description: str

    async def inlet(self, body: dict[str, Any], ctx: HookContext) -> dict[str, Any]: ...

    async def outlet(self, body: dict[str, Any], ctx: HookContext) -> dict[str, Any]: ...


@runtime_checkable
class FailsClosed(Protocol):
    """A filter whose outlet must not hand its input back unchanged when it fails or runs out of time
    (it masks secrets): the hook answers with `fail_closed(body, ctx)` instead."""

    def fail_closed(self, body: dict[str, Any], ctx: HookContext) -> dict[str, Any]: ...


@runtime_checkable
class ExtendsDeadline(Protocol):
    """A filter that may need more than its deadline valve for some calls (echo_compression waits up to
    `reference_summary_wait_seconds` for a referenced chat's summary): the runner adds the seconds it
    returns for this call."""

    def deadline_extension(self, body: Mapping[str, Any], ctx: HookContext) -> float: ...
