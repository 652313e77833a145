"""OpenAICompatibleLLM over real HTTP (httpx) against the FakeOpenAI server."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from fakes import llm_samples
from fakes.live_server import LiveServer
from fakes.llm_samples import FAST_RETRIES as FAST
from fakes.llm_samples import sample
from fakes.openai_server import FakeOpenAI, response_form

from echo.adapters.llm import factory
from echo.adapters.llm.errors import EmptyAnswer, LLMError
from echo.adapters.llm.openai_compatible import ANSWER_TOKENS, JSON_MODES, OpenAICompatibleLLM
from echo.adapters.llm.retries import RetryPolicy
from echo.config.settings import Settings
from echo.ports.llm import LLMRequest, Usage

KEY = "sk-test-123"
SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["summary", "tags"],
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(api_key=KEY)
    with LiveServer(fake.app, name="fake-openai") as server:
        yield fake, server.url + "/v1"


@pytest.fixture
def fake(served: tuple[FakeOpenAI, str]) -> Iterator[FakeOpenAI]:
    served[0].reset()
    yield served[0]
    served[0].reset()


@pytest.fixture
def base_url(served: tuple[FakeOpenAI, str]) -> str:
    return served[1]


@pytest.fixture
async def llm(base_url: str) -> AsyncIterator[OpenAICompatibleLLM]:
    client = OpenAICompatibleLLM(base_url, KEY, timeout_s=5, policy=FAST)
    yield client
    await client.aclose()


def req(**fields: Any) -> LLMRequest:
    return llm_samples.request("deepseek-chat", **fields)


async def test_the_request_is_an_openai_chat_completion(llm: OpenAICompatibleLLM, fake: FakeOpenAI) -> None:
    fake.reply_text("Summary.", usage=(50, 3))
    result = await llm.generate(req(system="Be brief.", temperature=0.0, max_output_tokens=99))
    assert (result.text, result.provider, result.model, result.finish_reason) == (
        "Summary.",
        "openai",
        "deepseek-chat",
        "stop",
    )
    assert result.usage == Usage(50, 3)
    sent = fake.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {
        "model": "deepseek-chat",
        "stream": False,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Summarise this."},
        ],
        "temperature": 0.0,
        "max_tokens": 99,
    }


@pytest.mark.parametrize("shape", ["message", "parts", "responses"])
async def test_every_response_shape_gives_the_answer_without_reasoning(
    llm: OpenAICompatibleLLM, fake: FakeOpenAI, shape: str
) -> None:
    fake.reply_text("The answer.", shape=shape, reasoning="secret chain of thought", usage=(9, 2))  # type: ignore[arg-type]
    result = await llm.generate(req())
    assert result.text == "The answer."
    assert result.usage == Usage(9, 2)


async def test_a_truncated_answer_says_length(llm: OpenAICompatibleLLM, fake: FakeOpenAI) -> None:
    fake.reply_text("Cut sho", finish_reason="length")
    assert (await llm.generate(req())).finish_reason == "length"


async def test_reasoning_only_is_an_empty_answer_with_the_structure(
    llm: OpenAICompatibleLLM, fake: FakeOpenAI
) -> None:
    labels = {"provider": "openai", "model": "deepseek-chat", "purpose": "summary"}
    before = sample("echo_llm_calls_total", **labels, outcome="empty")
    fake.reply_text("", reasoning="I thought but never answered")
    with pytest.raises(EmptyAnswer) as caught:
        await llm.generate(req())
    assert "reasoning_content" in caught.value.message
    assert "choices" in caught.value.message
    assert len(fake.requests) == 1
    assert sample("echo_llm_calls_total", **labels, outcome="empty") == before + 1


async def test_json_object_mode(base_url: str, fake: FakeOpenAI) -> None:
    llm = OpenAICompatibleLLM(base_url, KEY, timeout_s=5, json_mode="json_object", policy=FAST)
    fake.reply_text('```json\n{"summary": "s", "tags": ["a", "b", "c"]}\n```')
    try:
        result = await llm.generate(req(json_schema=SCHEMA, purpose="distill"))
    finally:
        await llm.aclose()
    assert result.parsed == {"summary": "s", "tags": ["a", "b", "c"]}
    body = fake.last_request.body
    assert body["response_format"] == {"type": "json_object"}
    assert json.dumps(SCHEMA) in body["messages"][0]["content"]


async def test_json_schema_is_the_default_mode(llm: OpenAICompatibleLLM, fake: FakeOpenAI) -> None:
    fake.reply_json({"summary": "s", "tags": []})
    result = await llm.generate(req(json_schema=SCHEMA, purpose="distill"))
    assert result.parsed == {"summary": "s", "tags": []}
    assert fake.last_request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "distill", "schema": SCHEMA},
    }
    assert (len(fake.requests), llm.json_mode) == (1, "json_schema")


@pytest.mark.parametrize(
    ("refused", "status", "kept"),
    [
        ({"json_schema"}, 500, "json_object_schema"),  # llama-cpp-python's server
        ({"json_schema"}, 422, "json_object_schema"),
        ({"json_schema", "json_object_schema"}, 400, "json_object"),  # a server of json_object only
    ],
)
async def test_a_refused_json_form_gives_way_to_the_next_and_the_working_one_is_kept(
    base_url: str, fake: FakeOpenAI, refused: set[str], status: int, kept: str
) -> None:
    fake.refused, fake.refused_status = frozenset(refused), status
    llm = OpenAICompatibleLLM(base_url, KEY, timeout_s=5, policy=FAST)
    before = sample("echo_llm_retries_total", provider="openai", purpose="distill", reason=str(status))
    fake.reply_json({"summary": "first", "tags": []})
    fake.reply_json({"summary": "second", "tags": []})
    try:
        first = await llm.generate(req(json_schema=SCHEMA, purpose="distill"))
        tried = [response_form(call.body) for call in fake.requests]
        again = await llm.generate(req(json_schema=SCHEMA, purpose="distill"))
        text = await llm.generate(req())  # no JSON asked: no response_format at all
    finally:
        await llm.aclose()
    assert (first.parsed["summary"], again.parsed["summary"], llm.json_mode) == ("first", "second", kept)
    assert tried == ["json_schema", "json_object_schema", "json_object"][: len(refused) + 1]
    assert response_form(fake.requests[-2].body) == kept  # the next JSON call starts where it works
    assert len(fake.requests) == len(tried) + 2
    assert "response_format" not in fake.last_request.body
    assert text.text == "echo: Summarise this."
    if kept == "json_object_schema":
        assert fake.requests[-2].body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    else:
        assert json.dumps(SCHEMA) in fake.requests[-2].body["messages"][0]["content"]
    # a refused form is asked again at once, not retried with backoff (echo_llm_retries_total)
    assert (
        sample("echo_llm_retries_total", provider="openai", purpose="distill", reason=str(status)) == before
    )


async def test_a_client_error_of_every_form_is_raised_and_the_form_is_not_changed(
    llm: OpenAICompatibleLLM, fake: FakeOpenAI
) -> None:
    for _ in range(3):
        fake.reply_error(400, "This model's maximum context length is 8192 tokens.")
    with pytest.raises(LLMError) as caught:
        await llm.generate(req(json_schema=SCHEMA, purpose="distill"))
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert [response_form(call.body) for call in fake.requests] == list(JSON_MODES)
    assert llm.json_mode == "json_schema"


async def test_a_server_error_not_naming_the_form_is_retried_in_the_same_form(
    llm: OpenAICompatibleLLM, fake: FakeOpenAI
) -> None:
    fake.reply_error(500, "overloaded")
    fake.reply_json({"summary": "s", "tags": []})
    assert (await llm.generate(req(json_schema=SCHEMA, purpose="distill"))).parsed == {
        "summary": "s",
        "tags": [],
    }
    assert [response_form(call.body) for call in fake.requests] == ["json_schema", "json_schema"]


async def test_distillation_and_merge_calls_are_capped_by_their_kind(base_url: str, fake: FakeOpenAI) -> None:
    llm = OpenAICompatibleLLM(base_url, KEY, timeout_s=5, policy=FAST)
    ceiled = OpenAICompatibleLLM(base_url, KEY, timeout_s=5, max_output_tokens=256, policy=FAST)
    try:
        for purpose in ("distill", "merge"):
            fake.reply_json({"summary": "s", "tags": []})
            await llm.generate(req(json_schema=SCHEMA, purpose=purpose, max_output_tokens=2048))
            assert fake.last_request.body["max_tokens"] == ANSWER_TOKENS[purpose]
        await llm.generate(req(max_output_tokens=300))  # a summary: its own target
        assert fake.last_request.body["max_tokens"] == 300
        fake.reply_json({"summary": "s", "tags": []})
        await ceiled.generate(req(json_schema=SCHEMA, purpose="distill", max_output_tokens=2048))
        assert fake.last_request.body["max_tokens"] == 256
        await ceiled.generate(req(max_output_tokens=300))
        assert fake.last_request.body["max_tokens"] == 256
    finally:
        await llm.aclose()
        await ceiled.aclose()


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 408])
async def test_transient_errors_are_retried_then_succeed(
    llm: OpenAICompatibleLLM, fake: FakeOpenAI, status: int
) -> None:
    before = sample("echo_llm_retries_total", provider="openai", purpose="summary", reason=str(status))
    fake.reply_error(status, "busy")
    fake.reply_text("ok")
    assert (await llm.generate(req())).text == "ok"
    assert len(fake.requests) == 2
    assert (
        sample("echo_llm_retries_total", provider="openai", purpose="summary", reason=str(status))
        == before + 1
    )


@pytest.mark.parametrize("retry_after", [0.4, "http-date"])
async def test_retry_after_is_honoured(
    llm: OpenAICompatibleLLM, fake: FakeOpenAI, retry_after: float | str
) -> None:
    if retry_after == "http-date":  # HTTP dates have whole seconds: wait into the next second or two
        retry_after = format_datetime(datetime.now(UTC) + timedelta(seconds=1.5), usegmt=True)
    fake.reply_error(429, "Rate limit reached", retry_after=retry_after)
    fake.reply_text("ok")
    start = time.monotonic()
    assert (await llm.generate(req())).text == "ok"
    assert time.monotonic() - start >= 0.4


async def test_a_retry_after_beyond_the_budget_is_raised_for_the_queue(
    base_url: str, fake: FakeOpenAI
) -> None:
    llm = OpenAICompatibleLLM(base_url, KEY, timeout_s=5, policy=RetryPolicy(max_total_wait_s=1))
    fake.reply_error(429, "Rate limit reached", retry_after=30)
    try:
        with pytest.raises(LLMError) as caught:
            await llm.generate(req())
    finally:
        await llm.aclose()
    assert (caught.value.status, caught.value.retryable, caught.value.retry_after_s) == (429, True, 30.0)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_client_errors_are_not_retried(llm: OpenAICompatibleLLM, fake: FakeOpenAI, status: int) -> None:
    fake.reply_error(status, "This model's maximum context length is 65536 tokens.")
    with pytest.raises(LLMError) as caught:
        await llm.generate(req())
    assert (caught.value.status, caught.value.retryable) == (status, False)
    assert caught.value.message == "This model's maximum context length is 65536 tokens."
    assert len(fake.requests) == 1


async def test_a_wrong_key_is_not_retried(base_url: str, fake: FakeOpenAI) -> None:
    llm = OpenAICompatibleLLM(base_url, "wrong", timeout_s=5, policy=FAST)
    try:
        with pytest.raises(LLMError) as caught:
            await llm.generate(req())
    finally:
        await llm.aclose()
    assert (caught.value.status, caught.value.retryable, caught.value.message) == (
        401,
        False,
        "invalid api key",
    )


async def test_an_html_error_page_is_retryable(llm: OpenAICompatibleLLM, fake: FakeOpenAI) -> None:
    fake.reply_raw(502, "<html><body>Bad Gateway</body></html>")
    fake.reply_raw(200, "<html>maintenance</html>")
    fake.reply_text("ok")
    assert (await llm.generate(req())).text == "ok"
    assert len(fake.requests) == 3


async def test_retries_spent_raise_the_last_error(llm: OpenAICompatibleLLM, fake: FakeOpenAI) -> None:
    for i in range(4):
        fake.reply_error(503, f"overloaded {i}")
    with pytest.raises(LLMError) as caught:
        await llm.generate(req())
    assert caught.value.message == "overloaded 3"
    assert len(fake.requests) == 4


async def test_timeout_is_a_retryable_error(base_url: str, fake: FakeOpenAI) -> None:
    llm = OpenAICompatibleLLM(base_url, KEY, timeout_s=0.2, policy=RetryPolicy(max_retries=0))
    fake.reply_text("too late", delay_s=1.0)
    try:
        with pytest.raises(LLMError) as caught:
            await llm.generate(req())
    finally:
        await llm.aclose()
    assert (caught.value.status, caught.value.retryable) == (None, True)
    assert "timed out" in caught.value.message


async def test_a_timed_out_attempt_is_retried(base_url: str, fake: FakeOpenAI) -> None:
    llm = OpenAICompatibleLLM(base_url, KEY, timeout_s=0.3, policy=FAST)
    fake.reply_text("too late", delay_s=1.0)
    fake.reply_text("in time")
    try:
        assert (await llm.generate(req())).text == "in time"
    finally:
        await llm.aclose()


async def test_an_unreachable_server_is_a_retryable_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", timeout_s=2, policy=RetryPolicy(max_retries=0))
    try:
        with pytest.raises(LLMError) as caught:
            await llm.generate(req())
    finally:
        await llm.aclose()
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_usage_and_latency_metrics(llm: OpenAICompatibleLLM, fake: FakeOpenAI) -> None:
    labels = {"provider": "openai", "model": "deepseek-chat", "purpose": "map_reduce"}
    prompt = sample("echo_llm_tokens_total", **labels, direction="prompt")
    completion = sample("echo_llm_tokens_total", **labels, direction="completion")
    latency = sample("echo_llm_latency_seconds_count", **labels)
    fake.reply_text("partial summary", usage=(1000, 80))
    await llm.generate(req(purpose="map_reduce"))
    assert sample("echo_llm_tokens_total", **labels, direction="prompt") == prompt + 1000
    assert sample("echo_llm_tokens_total", **labels, direction="completion") == completion + 80
    assert sample("echo_llm_latency_seconds_count", **labels) == latency + 1


async def test_the_factory_builds_a_working_provider(base_url: str, fake: FakeOpenAI) -> None:
    settings = Settings(
        llm_provider="openai",
        openai_base_url=base_url,
        openai_api_key=KEY,
        llm_timeout_seconds=5,
        openai_json_mode="json_object_schema",
        openai_max_output_tokens=128,
    )
    llm = factory.llm_from_settings(settings)
    try:
        result = await llm.generate(req(messages=[("user", "ping")]))
        fake.reply_json({"summary": "s", "tags": []})
        await llm.generate(req(json_schema=SCHEMA, purpose="distill"))
    finally:
        await llm.aclose()
    assert (result.provider, result.text) == ("openai", "echo: ping")
    assert fake.requests[0].body["max_tokens"] == 128
    assert response_form(fake.last_request.body) == "json_object_schema"
