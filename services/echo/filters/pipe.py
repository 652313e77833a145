"""The pipe models' own filter hooks (`/{echo.<model>}/filter/inlet|outlet`).

Open WebUI calls the pipe's inlet last and its outlet first. The outlet masks secrets so the
saved chat never keeps them; the inlet is where the rich-shadow issue will keep what it needs
from `metadata` (which Open WebUI strips before `/chat/completions`); for now it passes through.
"""

from __future__ import annotations

from typing import Any

from echo.filters import base
from echo.filters import masking as masking_filter

__all__ = ["PipeFilter"]


class PipeFilter:
    priority = 1000

    def __init__(self, model: str, on_masked: masking_filter.OnMasked) -> None:
        self.model = model
        self.id = f"echo.{model}"
        self.name = f"ECHO {model}"
        self.description = f"Gemini {model} through ECHO; answers are streamed with secrets masked."
        self._on_masked = on_masked

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return body

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return await masking_filter.mask_and_report(body, self._on_masked, deadline=ctx.deadline)

    def fail_closed(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return masking_filter.withhold_suspect(body, self._on_masked)
