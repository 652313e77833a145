"""Status events as data (DESIGN §9): a filter adds them beside the body it returns.

A Pipelines answer cannot carry Open WebUI events (an unknown top-level key would travel on to the
model provider), so filters append `StatusEvent`s to `HookContext.events`; the hook service hands
them to the Open WebUI Function shim when it asks for them, and otherwise logs and counts them.

Two shapes, one per side of the shim: `to_wire()` is what the hook service sends the shim (ours,
versioned with the answer's media type, so it keeps the level), `to_openwebui()` is what the shim
emits with `__event_emitter__` (Open WebUI's status event, which has no level).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

__all__ = ["LEVELS", "Level", "StatusEvent", "WireStatusEvent"]

Level = Literal["info", "warning", "error"]
LEVELS: tuple[Level, ...] = ("info", "warning", "error")


class WireStatusEvent(TypedDict):
    """One event in the hook service's answer to the shim (`{"body": ..., "events": [...]}`)."""

    description: str
    level: Level
    done: bool


@dataclass(frozen=True)
class StatusEvent:
    """One Open WebUI status line (`{"type": "status", "data": {"description", "done"}}`).

    `level` says how the hook service logs it and labels `echo_status_events_total`; `done: False`
    shows a spinner in Open WebUI until a later status of the same message replaces it.
    """

    description: str
    level: Level = "info"
    done: bool = True

    def to_wire(self) -> WireStatusEvent:
        return {"description": self.description, "level": self.level, "done": self.done}

    def to_openwebui(self) -> dict[str, Any]:
        return {"type": "status", "data": {"description": self.description, "done": self.done}}
