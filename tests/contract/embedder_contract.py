"""The contract every ``Embedder`` adapter passes (saq style: subclass it, provide an ``embedder`` fixture).

The subclass sets ``dimension`` (what the backend must report) and builds its embedder with a batch
size of ``BATCH`` so that the batching test crosses several batches.
"""

from __future__ import annotations

import inspect
import math

import pytest

from echo.adapters.embeddings import Embedder, EmbeddingError

BATCH = 2
TEXTS = [
    "The cat sat on the mat.",
    "A cat was sitting on the mat.",
    "Quarterly tax filings are due in April.",
    "Qdrant stores vectors for similarity search.",
    "The cat sat on the mat.",
]


def cosine(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


class EmbedderContract:
    dimension: int

    async def test_satisfies_the_port_and_reports_its_dimension(self, embedder: Embedder) -> None:
        port: Embedder = embedder  # the static check; at run time, every member of the port is there:
        for name in ("model_name", "dimension", "probe", "embed", "aclose"):
            assert inspect.getattr_static(port, name, None) is not None, name
        assert await embedder.probe() == self.dimension
        assert embedder.dimension == self.dimension
        assert embedder.model_name

    async def test_vectors_are_normalised_and_of_the_dimension(self, embedder: Embedder) -> None:
        vectors = await embedder.embed(TEXTS)
        assert len(vectors) == len(TEXTS)
        for vector in vectors:
            assert len(vector) == self.dimension
            assert all(isinstance(x, float) for x in vector)
            assert math.sqrt(math.fsum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-5)

    async def test_identical_texts_have_cosine_one_and_related_beat_unrelated(
        self, embedder: Embedder
    ) -> None:
        same_a, related, unrelated, _, same_b = await embedder.embed(TEXTS)
        assert cosine(same_a, same_b) == pytest.approx(1.0, abs=1e-4)
        assert cosine(same_a, related) > cosine(same_a, unrelated) + 0.1

    async def test_batches_keep_order_and_match_single_calls(self, embedder: Embedder) -> None:
        together = await embedder.embed(TEXTS)  # 5 texts in batches of BATCH
        alone = [(await embedder.embed([text]))[0] for text in TEXTS]
        reversed_ = await embedder.embed(TEXTS[::-1])
        for one, other, back in zip(together, alone, reversed_[::-1], strict=True):
            assert one == pytest.approx(other, abs=1e-4)
            assert one == pytest.approx(back, abs=1e-4)

    async def test_unstorable_text_is_embedded_as_it_is_stored(self, embedder: Embedder) -> None:
        """NUL and lone surrogates (which UTF-8 cannot encode) become U+FFFD, as in the stores."""
        dirty, clean = await embedder.embed(
            ["The cat\x00 sat \ud800on the mat.", "The cat\ufffd sat \ufffdon the mat."]
        )
        assert dirty == pytest.approx(clean, abs=1e-4)

    async def test_empty_input_gives_no_vectors(self, embedder: Embedder) -> None:
        assert await embedder.embed([]) == []

    async def test_a_bare_string_is_refused(self, embedder: Embedder) -> None:
        with pytest.raises(TypeError):
            await embedder.embed("not a list")  # type: ignore[arg-type]

    def test_errors_say_whether_to_retry(self) -> None:
        assert EmbeddingError("x", retryable=True).retryable
        assert not EmbeddingError("x").retryable
