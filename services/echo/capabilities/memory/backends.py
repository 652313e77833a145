"""Where job handlers (`distill`, `map_reduce`) find the embedder and the vector store: the two
implementations of the backends' `Index` (`echo.ports.backends`).

In `echoctl worker` (a distiller pod) the worker opens its own: the embedder from the settings
(Infinity over HTTP, or the local model) and, once the embedder has told its dimension, the tenant's
vector store (a Qdrant server: several workers need one they can share). In `echoctl serve`'s
embedded worker, and for the hook service's filters and routes, the hook service's own are used
(`RuntimeBackends`): Qdrant local mode allows one client per path.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.vectors import factory as vectors_factory
from echo.ports import embeddings as embeddings_base
from echo.ports import vectors as vectors_base

if TYPE_CHECKING:
    from echo.config.settings import Settings

__all__ = ["RuntimeBackends", "SettingsBackends"]


class _Parts(Protocol):
    """What the hook service's runtime exposes (`echo.entrypoints.runtime.Runtime`)."""

    embedder: embeddings_base.Embedder
    vectors: vectors_base.VectorStore | None


class RuntimeBackends:
    """The hook service's embedder and vectors; None until its warm-up has opened them."""

    def __init__(self, runtime: _Parts) -> None:
        self._runtime = runtime

    def embedder(self) -> embeddings_base.Embedder | None:
        return self._runtime.embedder if self._runtime.vectors is not None else None

    async def vectors(self) -> vectors_base.VectorStore | None:
        return self._runtime.vectors

    async def aclose(self) -> None:
        return None  # the runtime closes its own


class SettingsBackends:
    """An embedder and a vector store of the worker's own, opened on first use from `settings`."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder: embeddings_base.Embedder | None = None
        self._vectors: vectors_base.VectorStore | None = None
        self._lock = asyncio.Lock()

    def embedder(self) -> embeddings_base.Embedder | None:
        if self._embedder is None:
            self._embedder = embeddings_factory.embedder_from_settings(self._settings)
        return self._embedder

    async def vectors(self) -> vectors_base.VectorStore | None:
        async with self._lock:
            if self._vectors is None:
                embedder = self.embedder()
                assert embedder is not None
                dimension = await embedder.probe()
                self._vectors = vectors_factory.vector_store_from_settings(
                    self._settings, dimension=dimension
                )
            return self._vectors

    async def aclose(self) -> None:
        if self._vectors is not None:
            await self._vectors.aclose()
            self._vectors = None
        if self._embedder is not None:
            await self._embedder.aclose()
            self._embedder = None
