"""``HttpEmbedder`` error paths against a real scripted server: retries, Retry-After, timeouts, bad JSON."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime

import pytest
from contract.embedding_server import StubEmbeddingServer, answer, delay, raw, status
from fakes.live_server import LiveServer
from prometheus_client import REGISTRY

from echo.adapters.embeddings import EmbeddingError, HttpEmbedder
from echo.adapters.embeddings.http import parse_retry_after

MakeEmbedder = Callable[..., HttpEmbedder]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[StubEmbeddingServer, str]]:
    stub = StubEmbeddingServer()
    with LiveServer(stub.app, name="stub-embeddings") as live:
        yield stub, live.url + "/"  # a trailing slash on the base is fine


@pytest.fixture
def stub(served: tuple[StubEmbeddingServer, str]) -> Iterator[StubEmbeddingServer]:
    stub = served[0]
    stub.script.clear()
    stub.seen.clear()
    yield stub
    stub.script.clear()


@pytest.fixture
async def make(served: tuple[StubEmbeddingServer, str]) -> AsyncIterator[MakeEmbedder]:
    made: list[HttpEmbedder] = []

    def factory(**kw: object) -> HttpEmbedder:
        options: dict = {"backoff_s": 0.01, "max_wait_s": 2.0, "timeout_s": 5.0, **kw}
        made.append(HttpEmbedder(served[1], **options))
        return made[-1]

    yield factory
    for embedder in made:
        await embedder.aclose()


def errors(reason: str) -> float:
    return (
        REGISTRY.get_sample_value("echo_embedding_errors_total", {"backend": "http", "reason": reason}) or 0.0
    )


async def test_429_waits_what_retry_after_asks(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    before = errors("429")
    stub.script += [status(429, headers={"Retry-After": "1"})]
    vectors = await make().embed(["hello"])
    assert vectors == [pytest.approx(stub.fake.vector("hello"))]
    assert len(stub.seen) == 2
    assert 0.9 <= stub.seen[1].at - stub.seen[0].at < 1.8
    assert errors("429") == before + 1


async def test_retry_after_is_capped(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    stub.script += [status(503, headers={"Retry-After": "3600"})]
    started = time.monotonic()
    await make(max_wait_s=0.2).embed(["hello"])
    assert time.monotonic() - started < 1.5
    assert len(stub.seen) == 2


async def test_500_then_success(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    stub.script += [status(500), status(502)]
    assert len(await make(max_attempts=3).embed(["a", "b"])) == 2
    assert len(stub.seen) == 3


async def test_5xx_until_attempts_run_out(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    stub.script += [status(500, "boom")] * 3
    with pytest.raises(EmbeddingError, match="answered 500: boom") as caught:
        await make(max_attempts=3).embed(["a"])
    assert (caught.value.status, caught.value.retryable) == (500, True)
    assert len(stub.seen) == 3


async def test_a_4xx_is_not_retried(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    stub.script += [status(400, '{"detail": "input too long"}')]
    with pytest.raises(EmbeddingError, match="input too long") as caught:
        await make().embed(["a"])
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert len(stub.seen) == 1


async def test_timeout_is_retried_then_reported(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    before = errors("timeout")
    stub.script += [delay(1.0), delay(1.0)]
    with pytest.raises(EmbeddingError, match=r"timed out after 0\.2 s") as caught:
        await make(timeout_s=0.2, max_attempts=2).embed(["slow"])
    assert (caught.value.retryable, caught.value.reason) == (True, "timeout")
    assert len(stub.seen) == 2
    assert errors("timeout") == before + 2


async def test_a_slow_first_answer_then_a_fast_one(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    stub.script += [delay(1.0)]
    assert len(await make(timeout_s=0.2, max_attempts=2).embed(["x"])) == 1


@pytest.mark.parametrize(
    ("step", "why"),
    [
        (raw("<html>oops</html>"), "not JSON"),
        (answer(lambda a: {**a, "data": a["data"][:1]}), "expected a `data` list of 2"),
        (answer(lambda a: {"result": a["data"]}), "expected a `data` list"),
        (answer(lambda a: {**a, "data": [{**d, "embedding": ["x"]} for d in a["data"]]}), "list of numbers"),
        (answer(lambda a: {**a, "data": [{**d, "embedding": []} for d in a["data"]]}), "list of numbers"),
        (
            answer(lambda a: {**a, "data": [a["data"][0], {**a["data"][1], "embedding": [1.0]}]}),
            "different sizes",
        ),
        (answer(lambda a: {**a, "data": [{**d, "embedding": [0.0] * 16} for d in a["data"]]}), "norm 0"),
    ],
)
async def test_a_malformed_answer_is_a_permanent_error(
    stub: StubEmbeddingServer, make: MakeEmbedder, step: object, why: str
) -> None:
    stub.script += [step]  # type: ignore[list-item]
    with pytest.raises(EmbeddingError, match=why) as caught:
        await make().embed(["a", "b"])
    assert not caught.value.retryable
    assert len(stub.seen) == 1


async def test_a_change_of_dimension_is_refused(stub: StubEmbeddingServer, make: MakeEmbedder) -> None:
    embedder = make()
    with pytest.raises(EmbeddingError, match="not known yet"):
        _ = embedder.dimension
    assert await embedder.probe() == 16
    stub.script += [answer(lambda a: {**a, "data": [{**d, "embedding": [1.0, 0.0]} for d in a["data"]]})]
    with pytest.raises(EmbeddingError, match="dimension changed from 16 to 2"):
        await embedder.embed(["a"])


async def test_no_model_or_key_is_sent_unless_configured(
    stub: StubEmbeddingServer, make: MakeEmbedder
) -> None:
    embedder = make()
    await embedder.embed(["a"])
    assert "model" not in stub.seen[0].body
    assert "authorization" not in stub.seen[0].headers
    assert embedder.model_name == "stub-model"  # learned from the answer


async def test_an_unreachable_server_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    embedder = HttpEmbedder(f"http://127.0.0.1:{port}", max_attempts=2, backoff_s=0.01)
    with pytest.raises(EmbeddingError, match="cannot reach") as caught:
        await embedder.embed(["a"])
    await embedder.aclose()
    assert (caught.value.retryable, caught.value.reason) == (True, "transport")


def test_parse_retry_after() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:07 GMT", now=now) == 7.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
