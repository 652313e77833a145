"""One chat through the hooks Service of the kind e2e tenant, as Open WebUI would drive it.

Run by e2e/run.sh after the EchoDeployment is Ready, through a port-forward:
E2E_HOOKS_URL (e.g. http://127.0.0.1:19099) and E2E_API_KEY (the tenant's generated bearer key).
Skipped when they are unset, so a stray `pytest e2e/` outside the suite does nothing.
The LLM behind the pipe is the fake Gemini, which answers "echo: <last user text>": a Google key in
the user's message comes back in the model's answer, and ECHO must mask it there (DESIGN section 7).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import httpx
import pytest

URL = os.environ.get("E2E_HOOKS_URL", "")
KEY = os.environ.get("E2E_API_KEY", "")
PIPE = "echo.gemini-2.5-flash"
FILTERS = ("echo_context", "echo_compression", "echo_memory")
# A syntactically valid, fake Google API key (AIza + 35 characters), assembled so no scanner flags it.
FAKE_KEY = "AIza" + "SyE2E" + "k9" * 15

pytestmark = pytest.mark.skipif(not (URL and KEY), reason="E2E_HOOKS_URL/E2E_API_KEY unset: run e2e/run.sh")


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(base_url=URL, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http:
        yield http


@pytest.fixture(scope="module")
def chat() -> dict[str, str]:
    return {"chat_id": f"e2e-{uuid.uuid4()}", "user_id": "e2e-user", "message_id": str(uuid.uuid4())}


def _user() -> dict[str, str]:
    return {"id": "e2e-user", "email": "e2e@example.com", "name": "E2E", "role": "user"}


def _messages() -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": f"Please remember my key {FAKE_KEY} for later."},
    ]


def test_the_service_is_ready(client: httpx.Client) -> None:
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready", ready.text


def test_models_list_the_filters_and_the_pipe(client: httpx.Client) -> None:
    response = client.get("/models")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["pipelines"] is True
    models = {model["id"]: model for model in body["data"]}
    for filter_id in FILTERS:
        assert models[filter_id]["pipeline"]["type"] == "filter"
    assert models[PIPE]["pipeline"]["type"] == "pipe"
    assert client.get("/v1/models").status_code == 200
    assert httpx.get(URL + "/models", timeout=10).status_code == 401  # no bearer key, no models


def test_inlets_return_the_body(client: httpx.Client, chat: dict[str, str]) -> None:
    body = {"model": PIPE, "stream": True, "messages": _messages(), "metadata": {**chat, "files": []}}
    for filter_id in (*FILTERS, PIPE):  # ascending priority, the pipe's own inlet last
        response = client.post(f"/{filter_id}/filter/inlet", json={"body": body, "user": _user()})
        assert response.status_code == 200, f"{filter_id}: {response.text}"
        body = response.json()
        assert body["messages"][-1]["role"] == "user", filter_id


def test_the_pipe_answers_with_the_key_masked(client: httpx.Client) -> None:
    response = client.post(
        "/chat/completions", json={"model": PIPE, "stream": False, "messages": _messages(), "user": _user()}
    )
    assert response.status_code == 200, response.text
    answer = response.json()["choices"][0]["message"]["content"]
    assert answer.startswith("echo:"), answer
    assert "remember my key" in answer
    assert FAKE_KEY not in answer


def test_the_streamed_pipe_answer_is_masked_too(client: httpx.Client) -> None:
    request = {"model": PIPE, "stream": True, "messages": _messages(), "user": _user()}
    text = []
    with client.stream("POST", "/chat/completions", json=request) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[len("data: ") :]).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    answer = "".join(text)
    assert "remember my key" in answer
    assert FAKE_KEY not in answer


def test_outlets_mask_a_key_in_the_assistant_message(client: httpx.Client, chat: dict[str, str]) -> None:
    assistant_id = str(uuid.uuid4())
    leaked = f"echo: Please remember my key {FAKE_KEY} for later."
    body = {
        "model": PIPE,
        "chat_id": chat["chat_id"],
        "session_id": "e2e-session",
        "id": assistant_id,
        "messages": [
            {"id": chat["message_id"], "role": "user", "content": _messages()[-1]["content"]},
            {"id": assistant_id, "role": "assistant", "content": leaked},
        ],
    }
    for filter_id in (PIPE, *FILTERS):  # the pipe's outlet first, then the filters
        response = client.post(f"/{filter_id}/filter/outlet", json={"body": body, "user": _user()})
        assert response.status_code == 200, f"{filter_id}: {response.text}"
        body = response.json()
    assistant = body["messages"][-1]
    assert assistant["id"] == assistant_id
    assert "remember my key" in assistant["content"]
    assert FAKE_KEY not in json.dumps(assistant)  # model output is masked; the user's own text is not


def test_metrics_count_the_turn(client: httpx.Client) -> None:
    text = httpx.get(URL + "/metrics", timeout=10).text  # /metrics needs no key
    assert "echo_hook_requests_total{" in text
    masked = [line for line in text.splitlines() if line.startswith("echo_secrets_masked_total{")]
    assert masked
    assert sum(float(line.rsplit(" ", 1)[1]) for line in masked) >= 1
