"""The `echo.<model>` pipe over HTTP, with the real google-genai SDK against the fake Gemini server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fakes.gemini_server import FakeGemini
from fakes.live_server import LiveServer

from echo.config.settings import Settings
from echo.entrypoints.http import create_app

PIPE = "echo.gemini-2.5-flash"
GOOGLE_KEY = "AIza" + "SyC" + "q9" * 16
GITHUB_TOKEN = "ghp_" + "Ab1" * 12


@pytest.fixture(scope="module")
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture(scope="module")
def pipe_client(gemini: FakeGemini, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("pipe"),
        api_key="k",
        gemini_api_key="fake",
        gemini_base_url=gemini.base_url,
        pipe_models=["gemini-2.5-flash"],
        llm_max_retries=1,
        llm_retry_max_wait_seconds=5,
    )
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": "Bearer k"}, timeout=20) as http,
    ):
        yield http


def request(stream: bool, **extra: Any) -> dict[str, Any]:
    return {
        "model": PIPE,
        "stream": stream,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "my keys?"}],
        "user": {"id": "u-1", "name": "Ada", "email": "a@x", "role": "user"},
        **extra,
    }


def sse_events(text: str) -> list[Any]:
    events = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block.removeprefix("data: ")
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_non_streamed_answer_is_masked(pipe_client: httpx.Client, gemini: FakeGemini) -> None:
    gemini.reply_text(f"Your key is {GOOGLE_KEY}.", thought="the user leaked " + GOOGLE_KEY, usage=(12, 7))
    answer = pipe_client.post("/chat/completions", json=request(False))
    assert answer.status_code == 200
    completion = answer.json()
    message = completion["choices"][0]["message"]
    assert message["content"] == "Your key is [CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]."
    assert GOOGLE_KEY not in message["reasoning_content"]
    assert completion["usage"]["prompt_tokens"] == 12
    sent = gemini.requests[-1].body
    assert sent["systemInstruction"]["parts"][0]["text"] == "Be brief."
    assert sent["contents"][-1]["parts"][0]["text"] == "my keys?"


def test_streamed_answer_is_masked_across_chunk_boundaries(
    pipe_client: httpx.Client, gemini: FakeGemini
) -> None:
    text = f"Here: {GOOGLE_KEY} and {GITHUB_TOKEN} done."
    pieces = [text[i : i + 5] for i in range(0, len(text), 5)]  # every secret is split over chunks
    gemini.reply_stream(pieces, thought_chunks=["think", "ing"], usage=(5, 9))
    with pipe_client.stream("POST", "/v1/chat/completions", json=request(True)) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        raw = "".join(answer.iter_text())
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks)
    assert (
        content == "Here: [CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ] and [JETON GITHUB MASQUÉ PAR SÉCURITÉ] done."
    )
    assert reasoning == "thinking"
    assert GOOGLE_KEY[:12] not in raw
    assert GITHUB_TOKEN[:12] not in raw
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 9
    metrics = pipe_client.get("/metrics").text
    assert 'echo_secrets_masked_total{kind="github_token",where="pipe"}' in metrics


def test_pipe_filter_hooks_mask_the_saved_answer(pipe_client: httpx.Client) -> None:
    body = {"chat_id": "c", "id": "a", "messages": [{"id": "a", "role": "assistant", "content": GOOGLE_KEY}]}
    answer = pipe_client.post(f"/{PIPE}/filter/outlet", json={"body": body, "user": {"id": "u"}})
    assert answer.json()["messages"][0]["content"] == "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]"


@pytest.mark.parametrize(
    ("payload", "status", "needle"),
    [
        ({"model": PIPE, "messages": []}, 422, "body.messages"),
        ({"messages": [{"role": "user", "content": "x"}]}, 422, "body.model"),
        ({"model": "echo.nope", "messages": [{"role": "user", "content": "x"}]}, 404, "unknown model"),
        ({"model": PIPE, "messages": [{"role": "system", "content": "only system"}]}, 422, "messages"),
    ],
)
def test_bad_requests(pipe_client: httpx.Client, payload: dict, status: int, needle: str) -> None:
    answer = pipe_client.post("/chat/completions", json=payload)
    assert answer.status_code == status
    assert needle in json.dumps(answer.json())


@pytest.mark.parametrize(("upstream", "expected"), [(503, 502), (429, 429), (400, 502)])
@pytest.mark.parametrize("stream", [False, True])
def test_gemini_errors_become_clear_statuses(
    pipe_client: httpx.Client, gemini: FakeGemini, upstream: int, expected: int, stream: bool
) -> None:
    gemini.reset()
    for _ in range(2 if upstream != 400 else 1):  # a 429 or 5xx is retried once (llm_max_retries=1)
        gemini.reply_error(upstream, "model overloaded, try later", retry_after=0.05)
    answer = pipe_client.post("/chat/completions", json=request(stream))
    assert answer.status_code == expected
    assert "model overloaded" in answer.json()["detail"]
    error = answer.json()["error"]  # OpenAI's error shape, which Open WebUI shows
    assert "model overloaded" in error["message"]
    assert error["code"] == upstream
    assert gemini.pending == 0


@pytest.mark.parametrize("upstream", [429, 503])
def test_a_retryable_error_is_retried_after_retry_after(
    pipe_client: httpx.Client, gemini: FakeGemini, upstream: int
) -> None:
    gemini.reset()
    gemini.reply_error(upstream, "busy", retry_after=0.3)
    gemini.reply_text("back")
    started = time.monotonic()
    answer = pipe_client.post("/chat/completions", json=request(False))
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "back"
    assert time.monotonic() - started >= 0.3  # the server's Retry-After, not the 0.5 s backoff floor's half
    assert len(gemini.requests) == 2


def test_a_stream_that_breaks_ends_with_an_error_event_and_done(
    pipe_client: httpx.Client, gemini: FakeGemini
) -> None:
    gemini.reset()
    gemini.reply_chunks(
        [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "Half an ans"}]}, "index": 0}]},
            {"error": {"code": 500, "message": "backend died", "status": "INTERNAL"}},
        ]
    )
    with pipe_client.stream("POST", "/chat/completions", json=request(True)) as answer:
        assert answer.status_code == 200
        events = sse_events("".join(answer.iter_text()))
    assert events[-1] == "[DONE]"
    assert "backend died" in events[-2]["error"]["message"]
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-2]) == "Half an ans"


def test_a_non_streamed_answer_that_breaks_is_an_error_status(
    pipe_client: httpx.Client, gemini: FakeGemini
) -> None:
    gemini.reset()
    gemini.reply_chunks(
        [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "Half"}]}, "index": 0}]},
            {"error": {"code": 503, "message": "backend died", "status": "UNAVAILABLE"}},
        ]
    )
    answer = pipe_client.post("/chat/completions", json=request(False))
    assert answer.status_code == 502
    assert "backend died" in answer.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_lone_surrogate_in_the_answer_is_replaced_and_the_answer_goes_on(
    pipe_client: httpx.Client, gemini: FakeGemini, stream: bool
) -> None:
    """Gemini may send a lone surrogate escape: no UTF-8 can carry it. It used to be a 500 (not
    streamed) or the end of the stream; it becomes U+FFFD and every later word still arrives."""
    gemini.reset()
    gemini.reply_stream(["Half \ud800 an", " answer \udc00 and", " the rest."], thought_chunks=["hm \ud83d"])
    if stream:
        with pipe_client.stream("POST", "/chat/completions", json=request(True)) as answer:
            assert answer.status_code == 200
            events = sse_events("".join(answer.iter_text()))
        assert events[-1] == "[DONE]"
        assert not any("error" in event for event in events[:-1])
        deltas = [event["choices"][0]["delta"] for event in events[:-1]]
        content = "".join(delta.get("content", "") for delta in deltas)
        reasoning = "".join(delta.get("reasoning_content", "") for delta in deltas)
        assert events[-2]["choices"][0]["finish_reason"] == "stop"
    else:
        answer = pipe_client.post("/chat/completions", json=request(False))
        assert answer.status_code == 200, answer.text
        message = answer.json()["choices"][0]["message"]
        content, reasoning = message["content"], message["reasoning_content"]
    assert content == "Half \ufffd an answer \ufffd and the rest."
    assert reasoning == "hm \ufffd"
