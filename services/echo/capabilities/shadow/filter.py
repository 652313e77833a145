"""The pipe models' own filter hooks (`/{echo.<model>}/filter/inlet|outlet`).

Open WebUI calls the pipe's inlet last and its outlet first. The outlet masks secrets so the
saved chat never keeps them. The inlet keeps what the pipe needs from `metadata`, which Open WebUI
strips before `/chat/completions`, in the top-level key `echo_ctx` (`echo.domain.shadow.context`), which
reaches it: chat, message, session and user ids, files, the model the turn started with, and the
current user message's hash as it stands now (before Open WebUI wraps file texts around it) — or,
when an earlier filter changed that message and put its `user_position` and `user_invariant` (what
the message hashed before) in `echo_ctx`, those.
"""

from __future__ import annotations

from typing import Any

from echo.capabilities import base
from echo.capabilities.masking import filter as masking_filter
from echo.domain import shadow

__all__ = ["PipeFilter"]


class PipeFilter:
    priority = 1000

    def __init__(self, model: str, on_masked: masking_filter.OnMasked) -> None:
        self.model = model
        self.id = f"echo.{model}"
        self.name = f"ECHO {model}"
        self.description = (
            f"Gemini {model} through ECHO, with the rich shadow: thought signatures, tool calls and"
            " attachments Open WebUI drops are put back every turn; answers are streamed with secrets masked."
        )
        self._on_masked = on_masked

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        context = shadow.from_inlet(body, ctx.user).to_json()
        earlier = body.get(shadow.ECHO_CTX_KEY)
        if isinstance(earlier, dict):
            # A filter that changed the current user message (echo_context adds native file parts) says
            # what the message hashed before it did: that is what Open WebUI stores and later turns send.
            for key in ("user_position", "user_invariant"):
                if key in earlier:
                    context[key] = earlier[key]
        return {**body, shadow.ECHO_CTX_KEY: context}

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return await masking_filter.mask_and_report(
            body, self._on_masked, deadline=ctx.deadline, events=ctx.events, name=self.name
        )

    def fail_closed(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return masking_filter.withhold_suspect(body, self._on_masked)
