"""What the `echo.<model>` pipe shows the user is masked (issue 18): tool-call arguments (streamed or
not), reasoning, answers however the key is written, and upstream error messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fakes.gemini_server import FakeGemini
from fakes.live_server import LiveServer
from prometheus_client import REGISTRY

from echo.config.settings import Settings
from echo.entrypoints.http import create_app

PIPE = "echo.gemini-2.5-flash"
GOOGLE_KEY = "AIza" + "SyC" + "q9" * 16
ZW_KEY = GOOGLE_KEY[:4] + "\u200b" + GOOGLE_KEY[4:]  # a zero-width space inside: still a key
LABEL = "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]"


@pytest.fixture(scope="module")
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture(scope="module")
def pipe_client(gemini: FakeGemini, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("pipe-masking"),
        api_key="k",
        gemini_api_key="fake",
        gemini_base_url=gemini.base_url,
        pipe_models=["gemini-2.5-flash"],
        llm_max_retries=0,
    )
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": "Bearer k"}, timeout=20) as http,
    ):
        yield http


def request(stream: bool) -> dict[str, Any]:
    return {
        "model": PIPE,
        "stream": stream,
        "messages": [{"role": "user", "content": "mail my key to ops"}],
        "user": {"id": "u-1", "name": "Ada", "email": "a@x", "role": "user"},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "send_mail",
                    "description": "Send a mail",
                    "parameters": {
                        "type": "object",
                        "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                    },
                },
            }
        ],
    }


def sse_events(text: str) -> list[Any]:
    return [
        block.removeprefix("data: ") if block == "data: [DONE]" else json.loads(block.removeprefix("data: "))
        for block in text.split("\n\n")
        if block.startswith("data: ")
    ]


def masked_in_pipe(kind: str = "google_api_key") -> float:
    return REGISTRY.get_sample_value("echo_secrets_masked_total", {"kind": kind, "where": "pipe"}) or 0.0


def test_tool_call_arguments_are_masked_when_not_streamed(
    pipe_client: httpx.Client, gemini: FakeGemini
) -> None:
    gemini.reset()
    before = masked_in_pipe()
    gemini.reply_function_call("send_mail", {"to": "ops@example.com", "body": f"the key: {ZW_KEY}"})
    answer = pipe_client.post("/chat/completions", json=request(False))
    assert answer.status_code == 200, answer.text
    message = answer.json()["choices"][0]["message"]
    arguments = json.loads(message["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"to": "ops@example.com", "body": f"the key: {LABEL}"}
    assert GOOGLE_KEY[6:20] not in answer.text
    assert masked_in_pipe() == before + 1


def test_tool_call_arguments_are_masked_when_streamed(pipe_client: httpx.Client, gemini: FakeGemini) -> None:
    gemini.reset()
    gemini.reply_function_call("send_mail", {"to": "ops@example.com", "body": f"the key: {GOOGLE_KEY}"})
    with pipe_client.stream("POST", "/chat/completions", json=request(True)) as answer:
        assert answer.status_code == 200
        raw = "".join(answer.iter_text())
    calls = [c for e in sse_events(raw)[:-1] for c in e["choices"][0]["delta"].get("tool_calls", [])]
    assert json.loads(calls[0]["function"]["arguments"])["body"] == f"the key: {LABEL}"
    assert GOOGLE_KEY[6:20] not in raw


def test_streamed_reasoning_and_answer_are_masked_however_the_key_is_written(
    pipe_client: httpx.Client, gemini: FakeGemini
) -> None:
    gemini.reset()
    percent = "".join(f"%{ord(c):02X}" for c in GOOGLE_KEY)
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in GOOGLE_KEY)
    text = f"Here: {ZW_KEY} and {fullwidth} and api_key_{GOOGLE_KEY} done."
    thought = f"the url had k={percent} in it"
    gemini.reply_stream(
        [text[i : i + 5] for i in range(0, len(text), 5)],
        thought_chunks=[thought[i : i + 7] for i in range(0, len(thought), 7)],
    )
    with pipe_client.stream("POST", "/chat/completions", json=request(True)) as answer:
        raw = "".join(answer.iter_text())
    deltas = [e["choices"][0]["delta"] for e in sse_events(raw)[:-1]]
    content = "".join(d.get("content", "") for d in deltas)
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    assert content == f"Here: {LABEL} and {LABEL} and api_key_{LABEL} done."
    assert reasoning == f"the url had k={LABEL} in it"


def test_an_upstream_error_that_echoes_a_key_is_masked(pipe_client: httpx.Client, gemini: FakeGemini) -> None:
    gemini.reset()
    gemini.reply_error(400, f"API key not valid: {GOOGLE_KEY}")
    answer = pipe_client.post("/chat/completions", json=request(False))
    assert answer.status_code == 502
    assert GOOGLE_KEY not in answer.text
    assert LABEL in answer.json()["error"]["message"]
