"""``FakeEmbedder``: deterministic bag-of-words hash vectors for domain tests (pure, no I/O).

Each word of a text adds ±1 to one coordinate chosen by a hash of the word, then the vector is
normalised: identical texts get identical vectors, texts sharing words are close, unrelated texts are
nearly orthogonal. That is enough to test recall logic without a model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from echo.ports import embeddings as base

__all__ = ["FakeEmbedder"]

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """An ``Embedder`` with no backend. ``calls`` records each batch; set ``failure`` to make it fail."""

    def __init__(self, dimension: int = 64, *, model_name: str = "fake-hash", batch_size: int = 32) -> None:
        if dimension < 2:
            raise ValueError("dimension must be at least 2")
        self._dimension = dimension
        self._model_name = model_name
        self._batch_size = batch_size
        self.calls: list[list[str]] = []
        self.failure: base.EmbeddingError | None = None

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        return self._dimension

    async def probe(self) -> int:
        if self.failure is not None:
            raise self.failure
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        vectors: list[list[float]] = []
        for batch in base.batched(texts, self._batch_size):
            if self.failure is not None:
                raise self.failure
            self.calls.append(batch)
            vectors.extend(self.vector(text) for text in batch)
        return vectors

    def vector(self, text: str) -> list[float]:
        """The vector of one text (synchronous, for building expectations in tests)."""
        values = [0.0] * self._dimension
        for word in _WORD.findall(text.lower()) or [text]:
            digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            values[digest % self._dimension] += 1.0 if digest >> 63 else -1.0
        if not any(values):  # no words, or words that cancelled out: fall back to the whole text
            digest = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            values[digest % self._dimension] = 1.0
        return base.l2_normalise(values)

    async def aclose(self) -> None:
        return None
