"""`echo_context` (seed 000, filter 1): context preparation on the inlet, secret masking on the outlet.

The inlet's attachment routing and AEC block come with the attachments issue; until then the
inlet returns the body unchanged, as `/models` says.
"""

from __future__ import annotations

from typing import Any

from echo.filters import base
from echo.filters import masking as masking_filter

__all__ = ["ContextFilter"]


class ContextFilter:
    id = "echo_context"
    name = "ECHO context"
    priority = 0
    description = (
        "Outlet: masks leaked API keys and private keys in assistant messages (Google, OpenAI, "
        "Anthropic, AWS, GitHub, Slack, PEM). Inlet: pass-through in this version (attachment routing "
        "and the context block are not active yet)."
    )

    def __init__(self, on_masked: masking_filter.OnMasked) -> None:
        self._on_masked = on_masked

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return body

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return await masking_filter.mask_and_report(body, self._on_masked, deadline=ctx.deadline)

    def fail_closed(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return masking_filter.withhold_suspect(body, self._on_masked)
