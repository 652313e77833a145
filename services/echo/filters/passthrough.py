"""Filters whose logic arrives in later issues: they return the body unchanged and say so in /models."""

from __future__ import annotations

from typing import Any

from echo.filters import base

__all__ = ["MemoryFilter"]


class _PassThrough:
    id: str
    name: str
    priority: int
    description: str

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return body

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return body


class MemoryFilter(_PassThrough):
    id = "echo_memory"
    name = "ECHO memory"
    priority = 20
    description = (
        "Long-term memory distillation and recall (seed 000, filter 2). Not active in this version: "
        "inlet and outlet return the body unchanged."
    )
