"""GeminiChat with the real google-genai SDK, over HTTP, against the FakeGemini server."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fakes.gemini_server import FakeGemini, fake_embedding
from google import genai
from google.genai import _api_client, types

from echo.adapters.llm.gemini_chat import ChatDelta, GeminiChat, LLMError

# The SDK subclasses aiohttp.ClientSession when aiohttp is installed (it is, for the dev extras).
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    """A server per test: a transport's delayed retry in an earlier test never takes this test's replies."""
    with FakeGemini() as server:
        yield server


@pytest.fixture(params=["aiohttp", "httpx2", "httpx"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The SDK's async transport: aiohttp when installed (dev extras), else httpx2 (the service image)."""
    if request.param != "aiohttp":
        monkeypatch.setattr(_api_client, "has_aiohttp", False)
        monkeypatch.setenv("GOOGLE_GENAI_HTTP_CLIENT", str(request.param))
    return str(request.param)


@pytest.fixture
async def chat(fake: FakeGemini, transport: str) -> AsyncIterator[GeminiChat]:
    client = GeminiChat("test-key", base_url=fake.base_url, timeout_s=5)
    yield client
    await client.aclose()


def body(text: str = "Hello", **fields: Any) -> dict[str, Any]:
    return {"model": "echo.gemini-2.5-flash", "messages": [{"role": "user", "content": text}], **fields}


async def collect(chat: GeminiChat, request: dict[str, Any]) -> list[ChatDelta]:
    return [delta async for delta in chat.stream(request)]


async def test_complete_returns_the_whole_answer_with_usage(chat: GeminiChat, fake: FakeGemini) -> None:
    fake.reply_text("Bonjour !", usage=(12, 5))
    assert await chat.complete(body()) == ChatDelta(
        content="Bonjour !",
        finish_reason="stop",
        usage={"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    )


async def test_thoughts_go_to_reasoning_and_count_as_completion_tokens(
    chat: GeminiChat, fake: FakeGemini
) -> None:
    fake.reply_chunks(
        [
            {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [{"text": "Let me think.", "thought": True}, {"text": "42"}],
                        },
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 10,
                    "candidatesTokenCount": 2,
                    "thoughtsTokenCount": 30,
                    "totalTokenCount": 42,
                },
            }
        ]
    )
    delta = await chat.complete(body())
    assert (delta.content, delta.reasoning) == ("42", "Let me think.")
    assert delta.usage == {"prompt_tokens": 10, "completion_tokens": 32, "total_tokens": 42}


async def test_stream_yields_chunks_in_order_then_finish_and_usage(
    chat: GeminiChat, fake: FakeGemini
) -> None:
    fake.reply_stream(["Hel", "lo, ", "world"], thought_chunks=["Plan: ", "greet."], usage=(7, 9))
    deltas = await collect(chat, body())
    assert [(d.reasoning, d.content) for d in deltas[:-1]] == [
        ("Plan: ", ""),
        ("greet.", ""),
        ("", "Hel"),
        ("", "lo, "),
        ("", "world"),
    ]
    assert all(d.finish_reason is None and d.usage is None for d in deltas[:-1])
    assert deltas[-1] == ChatDelta(
        finish_reason="stop", usage={"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16}
    )


async def test_lone_surrogates_in_the_answer_become_the_replacement_character(
    chat: GeminiChat, fake: FakeGemini
) -> None:
    """Gemini's JSON may carry a lone surrogate escape (\\ud800): valid JSON, but no UTF-8 can encode
    it, so the answer could be neither sent on nor stored. It becomes U+FFFD and the answer goes on."""
    fake.reply_text("before \ud800 after", thought="think \udc00 more")
    answer = await chat.complete(body())
    assert (answer.content, answer.reasoning) == ("before \ufffd after", "think \ufffd more")
    assert [part.get("text") for part in answer.parts] == ["think \ufffd more", "before \ufffd after"]

    fake.reply_stream(["one \ud83d", "two \x00", "three"], thought_chunks=["t\udfff"])
    deltas = await collect(chat, body())
    assert [(d.reasoning, d.content) for d in deltas[:-1]] == [
        ("t\ufffd", ""),
        ("", "one \ufffd"),
        ("", "two \x00"),  # NUL is valid UTF-8: the pipe sends it on; the store replaces it
        ("", "three"),
    ]
    assert deltas[-1].finish_reason == "stop"

    fake.reply_function_call("search_memory", {"query\ud800": ["cats \udc00"]})
    [call] = (await chat.complete(body())).parts
    assert call["function_call"] == {"name": "search_memory", "args": {"query\ufffd": ["cats \ufffd"]}}


async def test_request_carries_system_instruction_contents_and_config(
    chat: GeminiChat, fake: FakeGemini
) -> None:
    await chat.complete(
        {
            "model": "echo.gemini-2.5-pro",
            "temperature": 0.3,
            "max_tokens": 64,
            "messages": [
                {"role": "system", "content": "You are ECHO."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": "Again"},
            ],
        }
    )
    (request,) = fake.requests
    assert (request.model, request.method) == ("gemini-2.5-pro", "generateContent")
    assert request.path.endswith("/models/gemini-2.5-pro:generateContent")
    assert request.headers["x-goog-api-key"] == "test-key"
    assert request.body["systemInstruction"]["parts"] == [{"text": "You are ECHO."}]
    assert [(c["role"], c["parts"]) for c in request.body["contents"]] == [
        ("user", [{"text": "Hi"}]),
        ("model", [{"text": "Hello!"}]),
        ("user", [{"text": "Again"}]),
    ]
    generation = request.body["generationConfig"]
    assert (generation["temperature"], generation["maxOutputTokens"]) == (0.3, 64)
    assert generation["thinkingConfig"] in ({"includeThoughts": True}, {"include_thoughts": True})


async def test_stream_request_uses_the_sse_endpoint(chat: GeminiChat, fake: FakeGemini) -> None:
    deltas = await collect(chat, body("ping"))
    assert "".join(d.content for d in deltas) == "echo: ping"
    assert fake.requests[0].method == "streamGenerateContent"


@pytest.mark.parametrize(
    ("gemini", "openai"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("OTHER", "stop"),
    ],
)
async def test_finish_reasons_are_mapped(
    chat: GeminiChat, fake: FakeGemini, gemini: str, openai: str
) -> None:
    fake.reply_text("x", finish_reason=gemini)
    fake.reply_stream(["x", "y"], finish_reason=gemini)
    assert (await chat.complete(body())).finish_reason == openai
    assert (await collect(chat, body()))[-1].finish_reason == openai


async def test_blocked_prompt_is_a_content_filter_finish(chat: GeminiChat, fake: FakeGemini) -> None:
    fake.reply_chunks([{"promptFeedback": {"blockReason": "SAFETY"}}])
    fake.reply_chunks([{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}])
    delta = await chat.complete(body())
    assert (delta.content, delta.reasoning, delta.finish_reason) == ("", "", "content_filter")
    assert (await collect(chat, body()))[-1].finish_reason == "content_filter"


async def test_client_error_is_not_retryable_and_keeps_the_message(
    chat: GeminiChat, fake: FakeGemini
) -> None:
    fake.reply_error(400, "Invalid JSON payload: unknown field 'foo'")
    with pytest.raises(LLMError) as caught:
        await chat.complete(body())
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert caught.value.message == "Invalid JSON payload: unknown field 'foo'"


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_overload_errors_are_retryable_in_both_modes(
    chat: GeminiChat, fake: FakeGemini, status: int
) -> None:
    fake.reply_error(status, "The model is overloaded.", retry_after=2)
    fake.reply_error(status, "The model is overloaded.")
    with pytest.raises(LLMError) as caught:
        await chat.complete(body())
    assert (caught.value.status, caught.value.retryable, caught.value.retry_after_s) == (status, True, 2.0)
    with pytest.raises(LLMError) as streamed:
        await collect(chat, body())
    assert (streamed.value.status, streamed.value.retryable, streamed.value.retry_after_s) == (
        status,
        True,
        None,
    )
    assert fake.pending == 0


async def test_error_in_the_middle_of_a_stream_is_translated(chat: GeminiChat, fake: FakeGemini) -> None:
    fake.reply_chunks(
        [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "partial"}]}}]},
            {"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}},
        ]
    )
    stream = chat.stream(body())
    assert (await anext(stream)).content == "partial"
    with pytest.raises(LLMError) as caught:
        await anext(stream)
    assert (caught.value.status, caught.value.retryable) == (500, True)


async def test_timeout_is_a_retryable_error(fake: FakeGemini, transport: str) -> None:
    fake.latency_s = 1.0
    chat = GeminiChat("test-key", base_url=fake.base_url, timeout_s=0.2)
    try:
        with pytest.raises(LLMError) as caught:
            await chat.complete(body())
    finally:
        await chat.aclose()
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_unreachable_server_is_a_retryable_error(transport: str) -> None:
    if transport == "aiohttp":
        pytest.skip("the SDK retries aiohttp connection errors itself after sleeping 1-10 s")
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    chat = GeminiChat("test-key", base_url=f"http://127.0.0.1:{port}", timeout_s=2)
    try:
        with pytest.raises(LLMError) as caught:
            await chat.complete(body())
    finally:
        await chat.aclose()
    assert (caught.value.status, caught.value.retryable) == (None, True)


async def test_consumer_can_stop_a_stream_early(chat: GeminiChat, fake: FakeGemini) -> None:
    fake.reply_stream(["a", "b", "c"])
    stream = chat.stream(body())
    assert (await anext(stream)).content == "a"
    await stream.aclose()  # type: ignore[attr-defined]
    fake.reply_text("next")
    assert (await chat.complete(body())).content == "next"


async def test_invalid_body_raises_value_error_before_any_call(chat: GeminiChat, fake: FakeGemini) -> None:
    with pytest.raises(ValueError, match=r"^messages:"):
        await chat.complete({"model": "echo.x", "messages": []})
    with pytest.raises(ValueError, match=r"^model:"):
        await chat.complete({"messages": [{"role": "user", "content": "x"}]})
    assert fake.requests == []


# -- the fake itself, through the raw SDK: features later issues rely on -----------------------------


async def test_fake_serves_function_calls_signatures_json_and_embeddings(fake: FakeGemini) -> None:
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=fake.base_url, timeout=5000)
    ).aio
    try:
        fake.reply_function_call("search_memory", {"query": "cats"}, thought_signature=b"sig-1")
        fake.reply_json({"facts": ["a", "b"]})
        call = await client.models.generate_content(model="gemini-2.5-flash", contents="x")
        part = call.candidates[0].content.parts[0]  # type: ignore[index,union-attr]
        assert part.function_call == types.FunctionCall(name="search_memory", args={"query": "cats"})
        assert part.thought_signature == b"sig-1"
        parsed = await client.models.generate_content(model="gemini-2.5-flash", contents="x")
        assert parsed.text == '{"facts": ["a", "b"]}'
        embedded = await client.models.embed_content(
            model="gemini-embedding-001",
            contents=["alpha", "beta"],
            config=types.EmbedContentConfig(output_dimensionality=16),
        )
        vectors = [e.values for e in embedded.embeddings or []]
        assert vectors == [fake_embedding("alpha", 16), fake_embedding("beta", 16)]
        assert fake.requests[-1].method == "batchEmbedContents"
    finally:
        await client.aclose()
