"""Status events as data (DESIGN §9): a filter adds them beside the body it returns.

A Pipelines answer cannot carry Open WebUI events (an unknown top-level key would travel on to the
model provider), so filters append `StatusEvent`s to `HookContext.events`; the hook service hands
them to the Open WebUI Function shim when it asks for them, and otherwise logs and counts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Level", "StatusEvent"]

Level = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class StatusEvent:
    """One Open WebUI status line (`{"type": "status", "data": {"description", "done"}}`)."""

    description: str
    level: Level = "info"
    done: bool = True
