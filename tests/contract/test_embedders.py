"""The ``Embedder`` contract on the fake, the local model and the HTTP client (against a stub server).

The real Infinity server runs the same contract in ``test_infinity.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from contract.embedder_contract import BATCH, TEXTS, EmbedderContract
from contract.embedding_server import StubEmbeddingServer
from fakes.live_server import LiveServer

from echo.adapters.embeddings import FakeEmbedder, HttpEmbedder, LocalEmbedder, packaged_model_path


class TestFakeEmbedder(EmbedderContract):
    dimension = 64

    @pytest.fixture
    def embedder(self) -> FakeEmbedder:
        return FakeEmbedder(self.dimension, batch_size=BATCH)

    async def test_records_batches_and_can_be_told_to_fail(self, embedder: FakeEmbedder) -> None:
        from echo.adapters.embeddings import EmbeddingError

        await embedder.embed(TEXTS)
        assert [len(batch) for batch in embedder.calls] == [2, 2, 1]
        embedder.failure = EmbeddingError("down", retryable=True)
        with pytest.raises(EmbeddingError, match="down"):
            await embedder.embed(["x"])


class TestLocalEmbedder(EmbedderContract):
    dimension = 384

    @pytest.fixture
    def embedder(self) -> LocalEmbedder:
        return LocalEmbedder(packaged_model_path(), batch_size=BATCH)  # the model is loaded once per process

    async def test_semantics_of_a_real_model(self, embedder: LocalEmbedder) -> None:
        from contract.embedder_contract import cosine

        query, answer, other = await embedder.embed(
            ["How do I reset my password?", "Steps to recover a forgotten password", "Banana bread recipe"]
        )
        assert cosine(query, answer) > 0.5 > cosine(query, other)


@pytest.fixture(scope="module")
def stub() -> StubEmbeddingServer:
    return StubEmbeddingServer(prefix="/v1")


@pytest.fixture(scope="module")
def stub_url(stub: StubEmbeddingServer) -> Iterator[str]:
    with LiveServer(stub.app, name="stub-embeddings") as live:
        yield live.url + "/v1"  # OpenAI-style: the base includes /v1


class TestHttpEmbedderOnAStub(EmbedderContract):
    dimension = StubEmbeddingServer.dimension

    @pytest.fixture
    async def embedder(self, stub_url: str) -> AsyncIterator[HttpEmbedder]:
        embedder = HttpEmbedder(stub_url, batch_size=BATCH, model="text-embedding-3-small", api_key="k")
        yield embedder
        await embedder.aclose()

    async def test_one_request_per_batch_with_model_and_key(
        self, embedder: HttpEmbedder, stub: StubEmbeddingServer
    ) -> None:
        stub.seen.clear()
        vectors = await embedder.embed(TEXTS)
        assert [len(s.body["input"]) for s in stub.seen] == [2, 2, 1]
        assert {s.body["model"] for s in stub.seen} == {"text-embedding-3-small"}
        assert {s.headers["authorization"] for s in stub.seen} == {"Bearer k"}
        assert vectors == [pytest.approx(stub.fake.vector(t)) for t in TEXTS]  # `data` came reversed


def test_the_public_api_is_pinned() -> None:
    import echo.adapters.embeddings

    assert set(echo.adapters.embeddings.__all__) == {
        "PACKAGED_MODEL_NAME",
        "Embedder",
        "EmbeddingError",
        "FakeEmbedder",
        "HttpEmbedder",
        "LocalEmbedder",
        "embedder_from_settings",
        "l2_normalise",
        "packaged_model_path",
    }
    assert all(hasattr(echo.adapters.embeddings, name) for name in echo.adapters.embeddings.__all__)
