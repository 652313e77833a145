"""GeminiLLM with the real google-genai SDK, over HTTP, against the FakeGemini server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fakes import llm_samples
from fakes.gemini_server import FakeGemini
from fakes.llm_samples import DISTILLATION_SCHEMA as MEMORY
from fakes.llm_samples import FAST_RETRIES as FAST
from fakes.llm_samples import sample
from google.genai import _api_client

from echo.adapters.llm.errors import EmptyAnswer, InvalidJSON, LLMError
from echo.adapters.llm.gemini import GeminiLLM
from echo.adapters.llm.retries import RetryPolicy
from echo.ports.llm import LLMRequest, Usage

# The SDK subclasses aiohttp.ClientSession when aiohttp is installed (it is, for the dev extras).
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")

DISTILLED = {
    "summary": "Ana is allergic to peanuts.",
    "memory_importance": 5,
    "memory_id": "ana_allergy",
    "tags": ["health", "food", "ana"],
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeGemini) -> Iterator[FakeGemini]:
    server.reset()
    yield server
    server.reset()


@pytest.fixture(params=["aiohttp", "httpx2"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The SDK's async transport: aiohttp when installed (dev extras), else httpx2 (the service image)."""
    if request.param != "aiohttp":
        monkeypatch.setattr(_api_client, "has_aiohttp", False)
        monkeypatch.setenv("GOOGLE_GENAI_HTTP_CLIENT", str(request.param))
    return str(request.param)


@pytest.fixture
async def llm(fake: FakeGemini) -> AsyncIterator[GeminiLLM]:
    client = GeminiLLM("test-key", base_url=fake.base_url, timeout_s=5, policy=FAST)
    yield client
    await client.aclose()


def req(**fields: Any) -> LLMRequest:
    return llm_samples.request("gemini-2.5-flash", **fields)


async def test_text_generation_sends_the_request_and_reads_the_answer(
    fake: FakeGemini, transport: str
) -> None:
    llm = GeminiLLM("test-key", base_url=fake.base_url, timeout_s=5, policy=FAST)
    fake.reply_text("A short summary.", thought="Thinking about it…", usage=(40, 6))
    try:
        result = await llm.generate(
            req(
                messages=[("user", "first"), ("assistant", "reply"), ("user", "second")],
                system="You summarise.",
                temperature=0.1,
                max_output_tokens=256,
            )
        )
    finally:
        await llm.aclose()
    assert (result.text, result.provider, result.model, result.finish_reason) == (
        "A short summary.",
        "gemini",
        "gemini-2.5-flash",
        "stop",
    )
    assert result.usage == Usage(40, 6)
    assert result.parsed is None
    sent = fake.last_request
    assert (sent.model, sent.method) == ("gemini-2.5-flash", "generateContent")
    assert [c["role"] for c in sent.body["contents"]] == ["user", "model", "user"]
    assert sent.body["systemInstruction"]["parts"] == [{"text": "You summarise."}]
    assert sent.generation_config == {"temperature": 0.1, "maxOutputTokens": 256}
    assert sent.response_schema is None
    assert sent.response_mime_type is None


async def test_json_request_asks_for_a_schema_and_parses_the_answer(fake: FakeGemini, transport: str) -> None:
    llm = GeminiLLM("test-key", base_url=fake.base_url, timeout_s=5, policy=FAST)
    fake.reply_json(DISTILLED)
    try:
        result = await llm.generate(req(json_schema=MEMORY, purpose="distill"))
    finally:
        await llm.aclose()
    assert result.parsed == DISTILLED
    assert fake.last_request.response_mime_type == "application/json"
    schema = fake.last_request.response_schema
    assert schema is not None
    assert schema["type"] == "OBJECT"
    assert list(schema["properties"]) == ["summary", "memory_importance", "memory_id", "tags"]
    assert schema["required"] == ["summary", "memory_importance", "memory_id", "tags"]


async def test_fenced_json_is_accepted_and_garbage_is_invalid_json(llm: GeminiLLM, fake: FakeGemini) -> None:
    fake.reply_text('```json\n{"summary": "x"}\n```')
    assert (await llm.generate(req(json_schema=MEMORY))).parsed == {"summary": "x"}
    fake.reply_text("I cannot do that.")
    with pytest.raises(InvalidJSON):
        await llm.generate(req(json_schema=MEMORY))
    assert len(fake.requests) == 2  # invalid JSON is left to the job queue, not retried here


async def test_thoughts_only_is_an_empty_answer_reporting_the_structure(
    llm: GeminiLLM, fake: FakeGemini
) -> None:
    fake.reply_chunks(
        [
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": "hmm", "thought": True}]},
                        "finishReason": "MAX_TOKENS",
                    }
                ]
            }
        ]
    )
    with pytest.raises(EmptyAnswer) as caught:
        await llm.generate(req())
    assert '"thought": true' in caught.value.message
    assert "MAX_TOKENS" in caught.value.message
    assert "sdk_http_response" not in caught.value.message
    assert len(fake.requests) == 1


async def test_503_is_retried_then_succeeds_and_metrics_count_it(llm: GeminiLLM, fake: FakeGemini) -> None:
    labels = {"provider": "gemini", "model": "gemini-2.5-flash", "purpose": "merge"}
    before = {
        "retries": sample("echo_llm_retries_total", provider="gemini", purpose="merge", reason="503"),
        "prompt": sample("echo_llm_tokens_total", **labels, direction="prompt"),
        "completion": sample("echo_llm_tokens_total", **labels, direction="completion"),
        "latency": sample("echo_llm_latency_seconds_count", **labels),
        "ok": sample("echo_llm_calls_total", **labels, outcome="ok"),
    }
    fake.reply_error(503, "The model is overloaded.")
    fake.reply_error(503, "The model is overloaded.")
    fake.reply_text("merged", usage=(120, 30))
    result = await llm.generate(req(purpose="merge"))
    assert result.text == "merged"
    assert len(fake.requests) == 3
    assert (
        sample("echo_llm_retries_total", provider="gemini", purpose="merge", reason="503")
        == before["retries"] + 2
    )
    assert sample("echo_llm_tokens_total", **labels, direction="prompt") == before["prompt"] + 120
    assert sample("echo_llm_tokens_total", **labels, direction="completion") == before["completion"] + 30
    assert sample("echo_llm_latency_seconds_count", **labels) == before["latency"] + 3
    assert sample("echo_llm_calls_total", **labels, outcome="ok") == before["ok"] + 1


async def test_retry_after_is_honoured(llm: GeminiLLM, fake: FakeGemini) -> None:
    fake.reply_error(429, "Quota exceeded.", retry_after=0.4)
    fake.reply_text("done")
    start = time.monotonic()
    assert (await llm.generate(req())).text == "done"
    assert time.monotonic() - start >= 0.4


async def test_client_error_is_not_retried(llm: GeminiLLM, fake: FakeGemini) -> None:
    labels = {"provider": "gemini", "model": "gemini-2.5-flash", "purpose": "summary"}
    errors_before = sample("echo_llm_calls_total", **labels, outcome="error")
    fake.reply_error(400, "Invalid JSON payload: unknown field 'foo'")
    fake.reply_text("never served")
    with pytest.raises(LLMError) as caught:
        await llm.generate(req())
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert "unknown field" in caught.value.message
    assert (len(fake.requests), fake.pending) == (1, 1)
    assert sample("echo_llm_calls_total", **labels, outcome="error") == errors_before + 1


async def test_retries_spent_raise_the_last_error(llm: GeminiLLM, fake: FakeGemini) -> None:
    for _ in range(4):
        fake.reply_error(500, "Internal error")
    with pytest.raises(LLMError) as caught:
        await llm.generate(req())
    assert (caught.value.status, caught.value.retryable) == (500, True)
    assert len(fake.requests) == 4  # 1 + FAST.max_retries


async def test_timeout_is_a_retryable_error(fake: FakeGemini, transport: str) -> None:
    llm = GeminiLLM("test-key", base_url=fake.base_url, timeout_s=0.2, policy=RetryPolicy(max_retries=0))
    fake.reply_text("too late", delay_s=1.0)
    try:
        with pytest.raises(LLMError) as caught:
            await llm.generate(req())
    finally:
        await llm.aclose()
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_a_timed_out_attempt_is_retried(fake: FakeGemini) -> None:
    llm = GeminiLLM("test-key", base_url=fake.base_url, timeout_s=0.3, policy=FAST)
    fake.reply_text("too late", delay_s=1.0)
    fake.reply_text("in time")
    try:
        assert (await llm.generate(req())).text == "in time"
    finally:
        await llm.aclose()
    assert len(fake.requests) == 2


async def test_an_outage_fails_every_call_until_it_ends(llm: GeminiLLM, fake: FakeGemini) -> None:
    fake.fail_for(0.6, (500, 503))
    with pytest.raises(LLMError) as caught:
        await llm.generate(req())  # every retry falls inside the outage
    assert (caught.value.status, caught.value.retryable) == (503, True)
    assert fake.outage_answers == len(fake.requests) == 4
    await asyncio.sleep(0.6)
    fake.reply_text("back")
    assert (await llm.generate(req())).text == "back"
