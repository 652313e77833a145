"""Replay every request Open WebUI 0.12.4 really sent (tests/fixtures) through the real app over HTTP.

The captures were made against a stub Pipelines server (`filter_all`, `filter_pipe_only`,
`stub_pipe`); each one is replayed to every ECHO filter and pipe id, with its own headers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fakes.aec_blocks import without_aec
from fakes.gemini_server import FakeGemini
from fakes.live_server import LiveServer
from fakes.shared_data import FIXTURES, load_fixture

from echo.config.settings import Settings
from echo.domain.compression import allowance
from echo.domain.memory import context as memory_context
from echo.entrypoints.http import create_app

FIXTURE_NAMES = sorted(p.name for p in FIXTURES.glob("*.json"))
FILTER_IDS = ["echo_context", "echo_compression", "echo_memory"]
PIPE_ID = "echo.gemini-2.5-flash"


@pytest.fixture(scope="module")
def replay_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, FakeGemini]]:
    with FakeGemini() as gemini:
        settings = Settings(
            data_dir=tmp_path_factory.mktemp("replay"),
            api_key="stubkey",  # the key Open WebUI sent in the captures
            gemini_api_key="fake-gemini-key",
            gemini_base_url=gemini.base_url,
        )
        with (
            LiveServer(create_app(settings)) as server,
            httpx.Client(base_url=server.url, timeout=20) as http,
        ):
            yield http, gemini


def _replay_headers(captured: dict[str, str]) -> dict[str, str]:
    skip = {"host", "content-length", "accept-encoding"}
    return {key: value for key, value in captured.items() if key not in skip}


def _message_ids(body: dict[str, Any]) -> list[Any]:
    return [message.get("id") for message in body.get("messages", [])]


def test_every_fixture_is_covered() -> None:
    assert FIXTURE_NAMES, f"no Open WebUI captures in {FIXTURES}"
    paths = {load_fixture(name)["path"].rsplit("/", 1)[-1] for name in FIXTURE_NAMES}
    assert paths <= {"inlet", "outlet", "completions", "models"}


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_replay(name: str, replay_server: tuple[httpx.Client, FakeGemini]) -> None:
    http, _gemini = replay_server
    capture = load_fixture(name)
    headers = _replay_headers(capture["headers"])
    path: str = capture["path"]
    if capture["method"] == "GET" and path.endswith("/models"):
        listing = http.get(path, headers=headers)
        assert listing.status_code == 200
        ids = {model["id"]: model["pipeline"]["type"] for model in listing.json()["data"]}
        assert ids == {**dict.fromkeys(FILTER_IDS, "filter"), PIPE_ID: "pipe", "echo.gemini-2.5-pro": "pipe"}
        return
    if path.endswith("/chat/completions"):
        _replay_chat(http, capture["body"], headers)
        return
    phase = path.rsplit("/", 1)[-1]
    request = capture["body"]
    for hook_id in [*FILTER_IDS, PIPE_ID]:
        answer = http.post(f"/{hook_id}/filter/{phase}", content=json.dumps(request), headers=headers)
        assert answer.status_code == 200, (hook_id, answer.text)
        returned = answer.json()
        sent = request["body"]
        if hook_id == PIPE_ID and phase == "inlet":  # the pipe's inlet keeps what it needs of metadata
            context = returned.pop("echo_ctx")
            assert context.get("chat_id") == ((sent.get("metadata") or {}).get("chat_id") or None)
            assert context.get("user_id") == request["user"]["id"]
        if hook_id == "echo_compression" and phase == "inlet" and "metadata" in returned:
            # what it leaves to the filters after it (Open WebUI drops metadata before the model call)
            returned["metadata"] = dict(returned["metadata"])
            room = returned["metadata"].pop(allowance.ROOM_KEY, None)
            if not (sent.get("metadata") or {}).get("task"):
                assert isinstance(room, int), room
                assert room >= 0
            assert memory_context.SUMMARY_KEY not in returned["metadata"]  # no summary in these chats
            if not returned["metadata"] and "metadata" not in sent:
                del returned["metadata"]
        assert set(returned) == set(sent), hook_id
        assert _message_ids(returned) == _message_ids(sent)
        assert returned.get("metadata") == sent.get("metadata")
        for key in ("chat_id", "id", "session_id", "model", "files"):
            assert returned.get(key) == sent.get(key)
        if hook_id == "echo_context" and phase == "inlet" and not (sent.get("metadata") or {}).get("task"):
            returned = without_aec(returned)  # the turn's AEC block, in front of the user's text
        # nothing in these captures is a secret: every hook gives the body back as it came
        assert returned == sent, hook_id


def _replay_chat(http: httpx.Client, body: dict[str, Any], headers: dict[str, str]) -> None:
    request = {**body, "model": PIPE_ID}
    answer = http.post("/chat/completions", json=request, headers=headers)
    assert answer.status_code == 200, answer.text
    if request.get("stream"):
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert answer.text.rstrip().endswith("data: [DONE]")
        return
    completion = answer.json()
    assert completion["object"] == "chat.completion"
    assert completion["model"] == PIPE_ID
    choice = completion["choices"][0]
    assert choice["message"]["role"] == "assistant"
    last_user = next(m for m in reversed(body["messages"]) if m["role"] == "user")
    assert choice["message"]["content"].startswith("echo: ")
    assert last_user["content"][-40:] in choice["message"]["content"]
    assert choice["finish_reason"] == "stop"
