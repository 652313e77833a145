"""Regressions for what the API fuzzing found (tests/integration/test_api_fuzz.py, bench/fuzz.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fakes.live_server import LiveServer
from fastapi import HTTPException

from echo.config import live
from echo.config.settings import Settings
from echo.hooks import create_app, wire

TOOL_HEADERS = {"x-openwebui-user-id": "u1", "x-openwebui-chat-id": "c1"}


def test_an_offset_past_postgresql_bigint_is_a_422_naming_it(client: httpx.Client) -> None:
    # It reached the store, which refused it: a 503 "backend unavailable" for a bad query parameter.
    answer = client.get("/memories", params={"user_id": "u1", "offset": 2**63})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"] == ["query", "offset"]


def test_a_valve_past_u_ffff_survives_the_next_update_and_a_restart(
    client: httpx.Client, settings: Settings
) -> None:
    # The saved valves were read back as YAML, which decodes an emoji's escaped surrogate pair into two
    # lone surrogates: every later update of any filter, and the next start, were refused.
    first = client.post("/echo_context/valves/update", json={"AEC_DEFAULT_LOCATION": "Paris 🗼"})
    assert first.status_code == 200, first.text
    second = client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 4})
    assert second.status_code == 200, second.text
    assert client.get("/echo_context/valves").json()["AEC_DEFAULT_LOCATION"] == "Paris 🗼"
    restarted = live.LiveConfig(settings)
    restarted.load()
    assert restarted.status.ok, restarted.status.error
    assert restarted.valves("echo_context").model_dump()["AEC_DEFAULT_LOCATION"] == "Paris 🗼"


def test_a_nul_in_a_registry_text_is_a_422_naming_the_field(client: httpx.Client) -> None:
    # PostgreSQL's text holds no NUL: it was a 503 from the store ("the store is unavailable").
    bodies = {
        "save_plan": ({"goal": "a\x00b", "status": "todo"}, ["body", "goal"]),
        "update_plan": ({"id": "plan_1", "steps": ["ok", "x\x00"]}, ["body", "steps", 1]),
        "commit_code": ({"id": "a.py", "lang": "py", "content": "\x00", "message": "m"}, ["body", "content"]),
    }
    for tool, (body, where) in bodies.items():
        answer = client.post(f"/tools/{tool}", json=body, headers=TOOL_HEADERS)
        assert answer.status_code == 422, (tool, answer.text)
        assert [error["loc"] for error in answer.json()["detail"]["errors"]] == [where], tool


def test_the_openapi_says_what_each_route_answers(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    hook = spec["paths"]["/{hook_id}/filter/{phase}"]["post"]
    enums = {p["name"]: p["schema"].get("enum") for p in hook["parameters"]}
    assert enums == {
        "hook_id": ["echo_context", "echo_compression", "echo_memory"],
        "phase": ["inlet", "outlet"],
    }
    assert set(hook["responses"]) == {"200", "401", "404", "413", "422"}
    assert set(hook["responses"]["200"]["content"]) == {
        "application/json",
        "application/vnd.echo.hook-answer+json",
    }
    assert hook["requestBody"]["required"] is True
    assert hook["security"] == [{"bearer": []}]
    update = spec["paths"]["/echo_memory/valves/update"]["post"]["requestBody"]["content"]["application/json"]
    assert update["schema"]["additionalProperties"] is False
    assert "WINDOW_SIZE" in update["schema"]["properties"]
    assert "/pipelines/{action}" not in spec["paths"]  # always a 405: not an operation
    assert "text/plain" in next(iter(spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]))
    assert "security" not in spec["paths"]["/healthz"]["get"]


def test_without_a_key_the_openapi_declares_no_bearer_scheme(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "echo", config_reload_seconds=60)
    with LiveServer(create_app(settings)) as server:
        spec = httpx.get(f"{server.url}/openapi.json").json()
    assert "securitySchemes" not in spec.get("components", {})
    assert "401" not in spec["paths"]["/models"]["get"]["responses"]


def test_a_nul_in_an_id_the_store_keeps_is_a_422_naming_it(client: httpx.Client) -> None:
    # Each reached PostgreSQL, which refused it: a 503 "backend unavailable" (found by bench/fuzz.py).
    refused = [
        (client.get("/memories", params={"user_id": "u\x00"}), ["query", "user_id"]),
        (client.get("/memories/m%00", params={"user_id": "u1"}), ["path", "memory_id"]),
        (client.delete("/memories/m%00", params={"user_id": "u1"}), ["path", "memory_id"]),
        (client.delete("/users/u%00"), ["path", "user_id"]),
        (client.post("/chats/c%00/compact", json={"user_id": "u1"}), ["path", "chat_id"]),
        (client.post("/chats/c1/compact", json={"user_id": "u\x00"}), ["body", "user_id"]),
        (
            client.post(
                "/tools/search_session_context",
                json={"source_id": "s\x00", "query": "q"},
                headers=TOOL_HEADERS,
            ),
            ["body", "source_id"],
        ),
    ]
    for answer, where in refused:
        assert answer.status_code == 422, (where, answer.text)
        detail = answer.json()["detail"]
        errors = detail if isinstance(detail, list) else detail["errors"]
        assert [error["loc"] for error in errors] == [where]


def test_a_boolean_for_a_number_is_refused_not_taken_as_0_or_1(client: httpx.Client) -> None:
    # pydantic's lax mode took `true` as 1: a valve or a tool's `k` silently set (found by bench/fuzz.py).
    valve = client.post("/echo_memory/valves/update", json={"WINDOW_OVERLAP": True})
    assert valve.status_code == 422, valve.text
    assert "WINDOW_OVERLAP: a number is required, not a boolean" in valve.json()["detail"]["message"]
    assert client.get("/echo_memory/valves").json()["WINDOW_OVERLAP"] != 1
    search = client.post("/tools/search_memories", json={"query": "q", "k": True}, headers=TOOL_HEADERS)
    assert search.status_code == 422, search.text
    assert [error["loc"] for error in search.json()["detail"]] == [["body", "k"]]
    assert client.post("/echo_memory/valves/update", json={"WINDOW_OVERLAP": 1}).status_code == 200


def test_the_pipe_takes_only_a_boolean_for_stream() -> None:
    # `stream: 1` was taken as true, `stream: 0.0` as false (found by the fuzzing of the pipe).
    chat = {"model": "echo.gemini-2.5-flash", "messages": [{"role": "user", "content": "hi"}]}
    wire.validate(wire.CHAT_REQUEST, {**chat, "stream": True})
    for number in (1, 0.0):
        with pytest.raises(HTTPException) as refused:
            wire.validate(wire.CHAT_REQUEST, {**chat, "stream": number})
        assert refused.value.status_code == 422
        assert [error["loc"] for error in refused.value.detail["errors"]] == [["body", "stream"]]
