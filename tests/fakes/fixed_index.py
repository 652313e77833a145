"""An `echo.ports.backends.Index` over a given embedder and vector store, for handler tests."""

from __future__ import annotations

from typing import Any


class FixedIndex:
    """The embedder and the vector store a test hands a handler (either may be None: not ready)."""

    def __init__(self, embedder: Any, vectors: Any) -> None:
        self._embedder, self._vectors = embedder, vectors

    def embedder(self) -> Any:
        return self._embedder

    async def vectors(self) -> Any:
        return self._vectors
