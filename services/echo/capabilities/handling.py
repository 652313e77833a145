"""What the LLM-bound job handlers (`summary`, `distill`, `map_reduce`) share: the LLM, built on the
first job that needs it (a worker that never gets such a job opens no client), the failure a step
raises to say what went wrong and whether another attempt may succeed, and the embedder and vector
store a handler waits for (`ready_backends`: the backends' `Index`, `echo.ports.backends`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from echo.errors import EchoError
from echo.ports import backends as backends_port
from echo.ports import embeddings as embeddings_base
from echo.ports import llm
from echo.ports import vectors as vectors_base

__all__ = ["Failure", "LazyLLM", "ready_backends"]


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


async def ready_backends(
    index: backends_port.Index,
) -> tuple[embeddings_base.Embedder, vectors_base.VectorStore]:
    """Both, or a retryable `Failure("not_ready")` saying which failed to open or is not ready yet."""
    try:
        embedder = index.embedder()
        vectors = await index.vectors()
    except EchoError as error:
        raise Failure(
            "not_ready", f"the embedder or the vector store failed to open: {error}", retryable=True
        ) from error
    if embedder is None or vectors is None:
        raise Failure("not_ready", "the embedder or the vector store is not ready yet", retryable=True)
    return embedder, vectors
