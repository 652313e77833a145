"""What the LLM-bound job handlers (`summary`, `distill`) share: the LLM, built on the first job that
needs it (a worker that never gets such a job opens no client), and the failure a step raises to
say what went wrong and whether another attempt may succeed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from echo.llm import interface as llm

__all__ = ["Failure", "LazyLLM"]


class Failure(Exception):
    """A step of a job failed: ``reason`` labels the metrics, ``retryable`` decides the job's fate."""

    def __init__(self, reason: str, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.retryable = retryable


class LazyLLM:
    """The LLM of a handler, made by ``factory`` on first use and closed with the handler."""

    def __init__(self, factory: Callable[[], llm.LLM]) -> None:
        self._factory = factory
        self._llm: llm.LLM | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> llm.LLM:
        async with self._lock:
            if self._llm is None:
                self._llm = self._factory()
            return self._llm

    async def aclose(self) -> None:
        if self._llm is not None:
            await self._llm.aclose()
            self._llm = None
