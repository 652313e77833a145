"""Regressions for what the API fuzzing found (tests/integration/test_api_fuzz.py, bench/fuzz.py)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import jsonschema
import pytest
from fakes.live_server import LiveServer
from fastapi import HTTPException

from echo.config import live
from echo.config.settings import Settings
from echo.entrypoints.http import create_app, wire

TOOL_HEADERS = {"x-openwebui-user-id": "u1", "x-openwebui-chat-id": "c1"}


def test_an_offset_past_postgresql_bigint_is_a_422_naming_it(
    client: httpx.Client, admin: dict[str, str]
) -> None:
    # It reached the store, which refused it: a 503 "backend unavailable" for a bad query parameter.
    answer = client.get("/memories", params={"user_id": "u1", "offset": 2**63}, headers=admin)
    assert answer.status_code == 422, answer.text
    assert [error["loc"] for error in answer.json()["detail"]["errors"]] == [["query", "offset"]]


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
    assert set(hook["responses"]) == {"200", "401", "404", "413", "415", "422"}
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


def test_a_nul_in_an_id_the_store_keeps_is_a_422_naming_it(
    client: httpx.Client, admin: dict[str, str]
) -> None:
    # Each reached PostgreSQL, which refused it: a 503 "backend unavailable" (found by bench/fuzz.py).
    refused = [
        (client.get("/memories", params={"user_id": "u\x00"}, headers=admin), ["query", "user_id"]),
        (client.get("/memories/m%00", params={"user_id": "u1"}, headers=admin), ["path", "memory_id"]),
        (client.delete("/memories/m%00", params={"user_id": "u1"}, headers=admin), ["path", "memory_id"]),
        (client.delete("/users/u%00", headers=admin), ["path", "user_id"]),
        (client.post("/chats/c%00/compact", json={"user_id": "u1"}, headers=admin), ["path", "chat_id"]),
        (client.post("/chats/c1/compact", json={"user_id": "u\x00"}, headers=admin), ["body", "user_id"]),
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
    detail = search.json()["detail"]
    errors = detail if isinstance(detail, list) else detail["errors"]
    assert [error["loc"] for error in errors] == [["body", "k"]]
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


# Issue 18, point 10: what `schemathesis run --checks all` found over /openapi.json.

PROBE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")
DOCUMENTED_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", lambda found: "echo_memory" if "id}" in found.group() else "inlet", path)


def test_every_405_lists_in_allow_the_methods_the_openapi_documents(
    client: httpx.Client, admin: dict[str, str]
) -> None:
    # `OPTIONS /memories/{id}` answered 405 with `Allow: GET`, though DELETE is documented too: one
    # route per method, and Starlette's 405 names the first route's methods only.
    spec = client.get("/openapi.json").json()
    wrong = []
    for path, operations in spec["paths"].items():
        documented = {method.upper() for method in operations if method in DOCUMENTED_METHODS}
        for method in PROBE_METHODS:
            if method in documented:
                continue
            answer = client.request(method, _concrete(path), params={"user_id": "u1"})
            if answer.status_code in (401, 403):  # the memory-management API's own key
                answer = client.request(method, _concrete(path), params={"user_id": "u1"}, headers=admin)
            if answer.status_code != 405:
                wrong.append(f"{method} {path}: {answer.status_code}, not 405")
                continue
            allowed = {m.strip() for m in answer.headers.get("allow", "").split(",") if m.strip()}
            if allowed - {"HEAD"} != documented:
                wrong.append(f"{method} {path}: Allow {sorted(allowed)}, documented {sorted(documented)}")
    assert not wrong, "\n".join(wrong)


def test_an_undocumented_pipelines_action_is_a_405_saying_nothing_is_allowed(client: httpx.Client) -> None:
    for method in ("POST", "GET", "DELETE", "PUT"):
        answer = client.request(method, "/pipelines/add")
        assert answer.status_code == 405, (method, answer.text)
        assert answer.headers.get("allow") == "", method  # RFC 9110 §10.2.1: present, empty
        assert "built in" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("filter_id", "body", "field"),
    [
        ("echo_context", {"ENABLE_AEC": 0}, "ENABLE_AEC"),
        ("echo_memory", {"ENABLE_RECALL": "true"}, "ENABLE_RECALL"),
        ("echo_compression", {"show_token_usage_status": 1}, "show_token_usage_status"),
        ("echo_memory", {"WINDOW_OVERLAP": 1_000_000_000}, "WINDOW_OVERLAP"),
        ("echo_memory", {"WINDOW_SIZE": " 8"}, "WINDOW_SIZE"),
        ("echo_memory", {"DISTILLATION_MODEL": "gemini\u0000"}, "DISTILLATION_MODEL"),
        ("echo_context", {"AEC_DEFAULT_TIMEZONE": "utc"}, "AEC_DEFAULT_TIMEZONE"),
    ],
)
def test_a_valve_in_a_type_the_schema_does_not_allow_is_a_422_naming_it(
    client: httpx.Client, filter_id: str, body: dict[str, object], field: str
) -> None:
    # `0` was taken for false (pydantic's lax mode), schema-violating and accepted.
    before = client.get(f"/{filter_id}/valves").json()
    answer = client.post(f"/{filter_id}/valves/update", json=body)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert field in detail["message"]
    assert [error["loc"] for error in detail["errors"]] == [["body", field]]
    assert client.get(f"/{filter_id}/valves").json() == before


def test_a_valves_body_the_schema_allows_is_taken_or_breaks_a_rule_it_lists(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/echo_memory/valves/update"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert {rule["rule"] for rule in schema["x-echo-rules"]} == {
        "EXACT_MATCH_THRESHOLD >= SIMILARITY_THRESHOLD",
        "WINDOW_OVERLAP < WINDOW_SIZE",
    }
    assert "WINDOW_OVERLAP < WINDOW_SIZE" in schema["description"]
    text = schema["properties"]["WINDOW_SIZE"]["anyOf"][1]
    assert text["type"] == "string"
    assert re.fullmatch(text["pattern"], "200")
    assert not re.fullmatch(text["pattern"], "201")
    assert client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": "8"}).json()["WINDOW_SIZE"] == 8
    broken = client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 3, "WINDOW_OVERLAP": 3})
    assert broken.status_code == 422, broken.text
    assert "WINDOW_OVERLAP (3) must be below WINDOW_SIZE (3)" in broken.json()["detail"]["message"]


def test_a_memories_query_error_is_the_documented_message_and_errors(
    client: httpx.Client, admin: dict[str, str]
) -> None:
    # FastAPI's own list (`{"detail": [...]}`) where the 422 of every other route is documented.
    for path, params, where in [
        ("/memories", {}, ["query", "user_id"]),
        ("/memories", {"user_id": "u1", "limit": 0}, ["query", "limit"]),
        ("/v1/memories", {"user_id": "u1", "offset": -1}, ["query", "offset"]),
        ("/memories/m1", {"user_id": ""}, ["query", "user_id"]),
    ]:
        answer = client.get(path, params=params, headers=admin)
        assert answer.status_code == 422, answer.text
        detail = answer.json()["detail"]
        assert [error["loc"] for error in detail["errors"]] == [where], path
        assert detail["message"].startswith(".".join(where)), detail["message"]
        assert "input" not in detail["errors"][0]
    spec = client.get("/openapi.json").json()
    documented = spec["paths"]["/memories"]["get"]["responses"]["422"]["content"]["application/json"]
    assert documented["schema"]["$ref"].endswith("/FieldsProblem")
    problem = spec["components"]["schemas"]["FieldsProblem"]
    assert problem["properties"]["detail"]["$ref"].endswith("/FieldErrors")


def test_the_registry_tools_document_the_null_they_take(client: httpx.Client) -> None:
    # An explicit null is taken as "not given" (models send it): /openapi.json says so now.
    spec = client.get("/openapi.json").json()
    for tool, name in [("save_plan", "model"), ("save_plan", "steps"), ("update_plan", "steps")]:
        schema = spec["paths"][f"/tools/{tool}"]["post"]["requestBody"]["content"]["application/json"][
            "schema"
        ]
        body = {"id": "plan_1", "goal": "g", "status": "todo", name: None}
        if tool == "update_plan":
            body = {"id": "plan_1", name: None, "status": "done"}
        jsonschema.validate(body, schema)


def test_an_undocumented_method_on_a_public_path_is_a_405_without_a_key(hooks_server: LiveServer) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        for method in ("POST", "TRACE", "DELETE"):
            answer = httpx.request(method, f"{hooks_server.url}{path}")
            assert answer.status_code == 405, (method, path, answer.text)
            assert answer.headers.get("allow") == "GET", (method, path)
