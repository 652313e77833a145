"""`e2e/conversation.py`, the Open WebUI-shaped conversation driver, against a scripted hooks service.

The e2e tier runs it against real services (`e2e/test_conversation_local.py`, the cluster's tenants);
here, cheaply, what those runs cannot show: the order of the hooks (filters by priority, a pipe's
inlet last and its outlet first), the bodies' shapes (the 0.12.4 fixtures' keys), what Open WebUI
strips before the model, what the history keeps, and `configure`'s three answers (in force, posted,
managed by a file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))

import conversation
from conversation import Chat, Hooks, StepFailed, User

PIPE = "echo.gemini-2.5-flash"


class Scripted:
    """A hooks service: /models, hooks that tag the last message, a pipe, valves (a file or not)."""

    def __init__(self, *, file_managed: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.valves: dict[str, dict[str, Any]] = {"echo_memory": {"WINDOW_SIZE": 5, "WINDOW_OVERLAP": 2}}
        self.file_managed = file_managed

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        payload = json.loads(request.content) if request.content else {}
        self.calls.append((f"{request.method} {path}", payload))
        if path == "/models":
            if request.headers.get("authorization") != "Bearer k":
                return httpx.Response(401, json={"detail": "no key"})
            data = [
                {"id": f, "pipeline": {"type": "filter", "priority": p}}
                for f, p in (("echo_memory", 20), ("echo_context", 0), ("echo_compression", 10))
            ]
            return httpx.Response(200, json={"data": [*data, {"id": PIPE, "pipeline": {"type": "pipe"}}]})
        if path.endswith("/filter/inlet") or path.endswith("/filter/outlet"):
            body = payload["body"]
            hook, phase = path.strip("/").split("/")[0], path.rsplit("/", 1)[1]
            last = body["messages"][-1]
            tag = f"[{phase}:{hook}]"  # ECHO's inlets put their blocks before the user's text
            last["content"] = f"{tag} {last['content']}" if phase == "inlet" else f"{last['content']} {tag}"
            if phase == "inlet" and hook == PIPE:
                body["echo_ctx"] = {"chat_id": body["metadata"]["chat_id"]}
            return httpx.Response(200, json=body)
        if path == "/chat/completions":
            return httpx.Response(200, json={"choices": [{"message": {"content": "piped"}}]})
        if path.endswith("/valves/update"):
            if self.file_managed:
                return httpx.Response(
                    409, json={"detail": "valves are managed by /etc/echo/valves/valves.yaml"}
                )
            self.valves[path.split("/")[1]] = payload
            return httpx.Response(200, json=payload)
        if path.endswith("/valves"):
            return httpx.Response(200, json=self.valves[path.split("/")[1]])
        return httpx.Response(404, json={"detail": path})

    def hooks(self) -> list[str]:
        return [call for call, _ in self.calls if "/filter/" in call]


def hooks_for(service: Scripted) -> Hooks:
    return Hooks("http://echo.test", "k", transport=httpx.MockTransport(service))


def test_a_turn_runs_the_hooks_in_open_webuis_order_with_its_bodies() -> None:
    service = Scripted()
    hooks = hooks_for(service)
    chat = Chat(User("u1", "Ada", "ada@example.com"), model=PIPE)
    said = conversation.turn(hooks, chat, "hello", files=[{"type": "file", "id": "f1", "name": "a.txt"}])
    assert service.hooks() == [
        "POST /echo_context/filter/inlet",
        "POST /echo_compression/filter/inlet",
        "POST /echo_memory/filter/inlet",
        f"POST /{PIPE}/filter/inlet",
        f"POST /{PIPE}/filter/outlet",
        "POST /echo_context/filter/outlet",
        "POST /echo_compression/filter/outlet",
        "POST /echo_memory/filter/outlet",
    ]
    inlet = service.calls[1][1]
    assert inlet["user"] == {"id": "u1", "email": "ada@example.com", "name": "Ada", "role": "user"}
    body = inlet["body"]
    assert set(body) == {"model", "stream", "messages", "files", "metadata"}  # 017_inlet_filter_all.json's
    metadata = body["metadata"]
    assert metadata["chat_id"] == chat.id
    assert metadata["user_message_id"] == said.user_message_id == metadata["user_message"]["id"]
    assert metadata["message_id"] == said.assistant_id
    assert metadata["files"] == body["files"] == [{"type": "file", "id": "f1", "name": "a.txt"}]
    assert metadata["model"]["pipeline"] == {"type": "pipe", "valves": False}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    # What the model got: no metadata, files…, the pipe's echo_ctx kept, the user object added.
    assert "metadata" not in said.sent
    assert "files" not in said.sent
    assert said.sent["echo_ctx"] == {"chat_id": chat.id}
    assert said.sent["user"]["id"] == "u1"
    assert said.answer == "piped"
    outlet = next(p for c, p in service.calls if c.endswith("/filter/outlet"))["body"]
    assert set(outlet) == {"model", "messages", "filter_ids", "chat_id", "session_id", "id"}  # flat
    assert outlet["id"] == said.assistant_id
    assert [m["id"] for m in outlet["messages"]] == [said.user_message_id, said.assistant_id]
    assert outlet["messages"][-1]["output"][0]["content"][0]["text"] == "piped"
    # The history keeps what the outlets returned (what Open WebUI stores), and the user's own text.
    assert chat.history[0]["content"] == "hello"
    assert chat.history[1]["content"].endswith("[outlet:echo_memory]")
    conversation.turn(hooks, chat, "again", answer="given")
    again = [p for c, p in service.calls if c == "POST /echo_context/filter/inlet"][-1]["body"]
    assert [m["role"] for m in again["messages"]] == ["system", "user", "assistant", "user"]
    assert again["metadata"]["user_message"]["parentId"] == said.assistant_id
    assert "files" not in again


def test_a_model_of_another_connection_needs_a_given_answer_and_runs_no_pipe_hook() -> None:
    service = Scripted()
    hooks = hooks_for(service)
    chat = Chat(User.new("bo"))
    with pytest.raises(StepFailed, match="not a pipe"):
        conversation.turn(hooks, chat, "hi")
    conversation.turn(hooks, chat, "hi", answer="hello")
    assert not any(PIPE in call for call in service.hooks())
    assert not any(call == "POST /chat/completions" for call, _ in service.calls)


def test_configure_keeps_posts_or_names_the_file() -> None:
    service = Scripted()
    hooks = hooks_for(service)
    assert (
        conversation.configure(hooks, {"echo_memory": {"WINDOW_SIZE": 5}})["echo_memory"]["WINDOW_SIZE"] == 5
    )
    assert not any(call.endswith("/valves/update") for call, _ in service.calls)  # in force: nothing posted
    conversation.configure(hooks, {"echo_memory": {"WINDOW_SIZE": 4}})
    posted = next(p for c, p in service.calls if c.endswith("/valves/update"))
    assert posted == {"WINDOW_SIZE": 4, "WINDOW_OVERLAP": 2}  # the whole object, as Open WebUI posts it
    managed = Scripted(file_managed=True)
    with pytest.raises(StepFailed, match=r"managed by a file .*spec.valves.inline.echo_memory"):
        conversation.configure(hooks_for(managed), {"echo_memory": {"WINDOW_SIZE": 4}})
    assert conversation.spec_patch({"echo_memory": {"WINDOW_SIZE": 4}}) == {
        "spec": {"valves": {"inline": {"echo_memory": {"WINDOW_SIZE": 4}}}}
    }


def test_the_check_service_step_wants_the_key_refused_and_the_filters_ordered() -> None:
    service = Scripted()
    hooks = hooks_for(service)
    models = hooks.models()
    assert models.filters == ("echo_context", "echo_compression", "echo_memory")
    assert models.pipes == (PIPE,)
    assert hooks.public("/models").status_code == 401


def test_the_fake_key_is_a_google_key_shape_and_metrics_parse() -> None:
    key = conversation.fake_google_key()
    assert key.startswith("AIza")
    assert len(key) == 39
    text = '# HELP x\necho_secrets_masked_total{kind="google_api_key",where="outlet"} 2.0\nup 1\n'
    metrics = conversation.Metrics.parse(text)
    assert metrics.total("echo_secrets_masked_total", where="outlet") == 2.0
    assert metrics.total("echo_secrets_masked_total", where="pipe") == 0.0
    assert metrics.has("up")
