"""The registry tools through the real app (uvicorn, a tenant schema of the test PostgreSQL): plans and
code entries as Open WebUI's tool calls make them, per user and chat, every 4xx naming what is wrong,
503 without a store, the shared public OpenAPI document, and the calls counted."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import pytest
from fakes.hooks_service import store_backends
from fakes.live_server import LiveServer
from fakes.metric_samples import sample
from fakes.shared_data import API_KEY

from echo.adapters.store import pool
from echo.config.settings import Settings
from echo.entrypoints.http import create_app, registry_calls, registry_tools

ADA = {"x-openwebui-user-id": "ada", "x-openwebui-chat-id": "chat-1", "x-openwebui-message-id": "m1"}
OPERATIONS = ("save_plan", "update_plan", "list_plans", "commit_code", "read_code", "list_code")


def as_user(user: str, chat: str) -> dict[str, str]:
    return {"x-openwebui-user-id": user, "x-openwebui-chat-id": chat}


@pytest.fixture
async def live(settings: Settings, dsn: str, store: pool.Store) -> AsyncIterator[LiveServer]:
    with LiveServer(
        create_app(settings, backends=store_backends(dsn, store.schema)), name="echo-hooks"
    ) as server:
        yield server


@pytest.fixture
async def http(live: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=live.url, headers=headers, timeout=60) as client:
        yield client


def message(answer: httpx.Response) -> str:
    detail = answer.json()["detail"]
    return detail["message"] if isinstance(detail, dict) else str(detail)


async def test_the_openapi_document_lists_the_six_operations_for_the_model(http: httpx.AsyncClient) -> None:
    spec = (await http.get("/tools/openapi.json", headers={"Authorization": ""})).json()
    assert "plans and code registry" in spec["info"]["description"]
    assert spec["security"] == [{"bearer": []}]
    for name in OPERATIONS:
        operation = spec["paths"][f"/tools/{name}"]["post"]
        assert operation["operationId"] == name
        assert operation["summary"]
        assert len(operation["description"]) > 40
        assert "x-openwebui" not in json.dumps(
            operation.get("parameters", [])
        )  # Open WebUI sends them itself
    assert "/tools/search_memories" in spec["paths"]

    def body(name: str) -> dict[str, Any]:
        schema: dict[str, Any] = spec["paths"][f"/tools/{name}"]["post"]["requestBody"]["content"][
            "application/json"
        ]["schema"]
        return schema

    save = body("save_plan")
    assert save["required"] == ["goal", "status"]
    assert save["additionalProperties"] is False
    assert save["properties"]["status"]["enum"] == ["todo", "in_progress", "blocked", "done", "abandoned"]
    # null is "not given", said plainly: no anyOf for the model to puzzle over
    assert save["properties"]["id"]["type"] == ["string", "null"]
    assert "anyOf" not in save["properties"]["id"]
    assert set(body("update_plan")["properties"]) == {"id", "status", "goal", "steps"}
    assert body("commit_code")["required"] == ["id", "lang", "content", "message"]
    assert body("read_code")["required"] == ["id"]
    assert "requestBody" not in spec["paths"]["/tools/list_plans"]["post"]


async def test_the_model_keeps_a_plan_through_its_life(http: httpx.AsyncClient) -> None:
    made = await http.post(
        "/tools/save_plan",
        json={
            "goal": "Refactorer le module d'auth",
            "status": "todo",
            "steps": ["lire", "découper"],
            "model": "MODEL_PRO",
        },
        headers=ADA,
    )
    assert made.status_code == 200, made.text
    plan = made.json()
    assert plan["id"].startswith("plan_")
    assert (plan["goal"], plan["status"], plan["steps"], plan["model"]) == (
        "Refactorer le module d'auth", "todo", ["lire", "découper"], "MODEL_PRO"
    )  # fmt: skip
    assert plan["created_at"].endswith("+00:00")
    moved = await http.post(
        "/tools/update_plan", json={"id": plan["id"], "status": "in_progress"}, headers=ADA
    )
    assert moved.status_code == 200, moved.text
    assert (moved.json()["status"], moved.json()["steps"]) == ("in_progress", ["lire", "découper"])
    nulls = await http.post(
        "/tools/update_plan",
        json={"id": plan["id"], "goal": None, "steps": ["lire"], "status": None},
        headers=ADA,
    )
    assert nulls.status_code == 200, nulls.text  # null means "not given"
    assert (nulls.json()["goal"], nulls.json()["status"]) == ("Refactorer le module d'auth", "in_progress")
    named = await http.post(
        "/tools/save_plan", json={"id": "plan_b", "goal": "Ship", "status": "blocked"}, headers=ADA
    )
    assert named.json()["id"] == "plan_b"
    listed = await http.post("/tools/list_plans", json={}, headers=ADA)
    assert [(p["id"], p["status"]) for p in listed.json()["plans"]] == [
        (plan["id"], "in_progress"),
        ("plan_b", "blocked"),
    ]
    bodiless = await http.post("/tools/list_plans", headers=ADA)
    assert bodiless.json() == listed.json()


async def test_the_model_keeps_its_code_in_versions(http: httpx.AsyncClient) -> None:
    first = await http.post(
        "/tools/commit_code",
        json={
            "id": "mon_script.py",
            "lang": "python",
            "content": "import os\n\nprint(os.name)\n",
            "message": "feat: start",
        },
        headers=ADA,
    )
    assert first.status_code == 200, first.text
    assert {k: first.json()[k] for k in ("id", "lang", "lines", "version", "last_commit")} == {
        "id": "mon_script.py", "lang": "python", "lines": 3, "version": 1, "last_commit": "feat: start"
    }  # fmt: skip
    assert "content" not in first.json()
    second = await http.post(
        "/tools/commit_code",
        json={
            "id": "mon_script.py",
            "lang": "python",
            "content": "print(1)",
            "message": "feat: add error handler",
        },
        headers=ADA,
    )
    assert (second.json()["version"], second.json()["lines"]) == (2, 1)
    read = await http.post("/tools/read_code", json={"id": "mon_script.py"}, headers=ADA)
    assert read.status_code == 200
    assert (read.json()["content"], read.json()["version"], read.json()["last_commit"]) == (
        "print(1)", 2, "feat: add error handler"
    )  # fmt: skip
    await http.post(
        "/tools/commit_code",
        json={"id": "config.yaml", "lang": "yaml", "content": "a: 1\n", "message": "chore"},
        headers=ADA,
    )
    listed = (await http.post("/tools/list_code", json={}, headers=ADA)).json()["entries"]
    assert [(e["id"], e["version"]) for e in listed] == [("mon_script.py", 2), ("config.yaml", 1)]
    assert all("content" not in e for e in listed)


async def test_a_user_never_sees_another_users_or_another_chats_registry(http: httpx.AsyncClient) -> None:
    plan = (await http.post("/tools/save_plan", json={"goal": "mine", "status": "todo"}, headers=ADA)).json()
    await http.post(
        "/tools/commit_code",
        json={"id": "k.py", "lang": "python", "content": "KEY = 1", "message": "m"},
        headers=ADA,
    )
    for other in (as_user("bob", "chat-1"), as_user("ada", "chat-2")):
        assert (await http.post("/tools/list_plans", json={}, headers=other)).json() == {"plans": []}
        assert (await http.post("/tools/list_code", json={}, headers=other)).json() == {"entries": []}
        touched = await http.post(
            "/tools/update_plan", json={"id": plan["id"], "status": "done"}, headers=other
        )
        assert touched.status_code == 404
        assert plan["id"] in touched.json()["detail"]
        assert (await http.post("/tools/read_code", json={"id": "k.py"}, headers=other)).status_code == 404
    # bob saving a plan under ada's id makes bob's own plan; ada's is unchanged
    await http.post(
        "/tools/save_plan",
        json={"id": plan["id"], "goal": "bob's", "status": "done"},
        headers=as_user("bob", "chat-1"),
    )
    mine = (await http.post("/tools/list_plans", json={}, headers=ADA)).json()["plans"]
    assert [(p["goal"], p["status"]) for p in mine] == [("mine", "todo")]


async def test_unknown_ids_are_404s_that_name_the_id_and_what_to_do(http: httpx.AsyncClient) -> None:
    plan = await http.post("/tools/update_plan", json={"id": "plan_ghost", "status": "done"}, headers=ADA)
    assert plan.status_code == 404
    assert "'plan_ghost'" in plan.json()["detail"]
    assert "save_plan" in plan.json()["detail"]
    code = await http.post("/tools/read_code", json={"id": "ghost.py"}, headers=ADA)
    assert code.status_code == 404
    assert "'ghost.py'" in code.json()["detail"]


@pytest.mark.parametrize("name", OPERATIONS)
async def test_each_operation_names_a_missing_user_or_chat_header(http: httpx.AsyncClient, name: str) -> None:
    for headers, missing in (
        ({"x-openwebui-chat-id": "chat-1"}, "x-openwebui-user-id"),
        ({"x-openwebui-user-id": "ada"}, "x-openwebui-chat-id"),
        ({"x-openwebui-user-id": "ada", "x-openwebui-chat-id": ""}, "x-openwebui-chat-id"),
        ({"x-openwebui-user-id": "", "x-openwebui-chat-id": "chat-1"}, "x-openwebui-user-id"),
    ):
        answer = await http.post(f"/tools/{name}", json={}, headers=headers)
        assert answer.status_code == 422, (name, headers)
        assert missing in message(answer)
    keyless = await http.post(f"/tools/{name}", json={}, headers={**ADA, "Authorization": ""})
    assert keyless.status_code == 401


@pytest.mark.parametrize(
    ("name", "body", "named"),
    [
        ("save_plan", {"goal": "g"}, "body.status"),
        ("save_plan", {"goal": "g", "status": "finished"}, "body.status"),
        ("save_plan", {"goal": "", "status": "todo"}, "body.goal"),
        ("save_plan", {"goal": "g" * 2001, "status": "todo"}, "body.goal"),
        ("save_plan", {"goal": "g", "status": "todo", "priority": 1}, "body.priority"),
        ("save_plan", {"goal": "g", "status": "todo", "id": "a\nb"}, "body.id"),
        ("save_plan", {"goal": "g", "status": "todo", "steps": ["ok", ""]}, "body.steps.1"),
        ("save_plan", {"goal": "g", "status": "todo", "steps": ["s"] * 101}, "body.steps"),
        ("save_plan", {"goal": "g", "status": "todo", "steps": "not a list"}, "body.steps"),
        ("save_plan", ["not", "an", "object"], "body"),
        ("update_plan", {"status": "done"}, "body.id"),
        ("update_plan", {"id": "p"}, "nothing to change"),
        ("update_plan", {"id": "p", "status": None}, "nothing to change"),
        ("commit_code", {"id": "a.py", "lang": "python", "content": "x"}, "body.message"),
        ("commit_code", {"id": "a.py", "lang": "python", "content": 42, "message": "m"}, "body.content"),
        ("commit_code", {"id": "", "lang": "python", "content": "x", "message": "m"}, "body.id"),
        ("commit_code", {"id": "a\x00.py", "lang": "python", "content": "x", "message": "m"}, "body.id"),
        ("commit_code", {"id": "a.py", "lang": "", "content": "x", "message": "m"}, "body.lang"),
        ("read_code", {}, "body.id"),
        ("read_code", {"id": "a.py", "version": 1}, "body.version"),
    ],
)
async def test_a_bad_body_is_a_422_naming_the_field(
    http: httpx.AsyncClient, name: str, body: Any, named: str
) -> None:
    answer = await http.post(f"/tools/{name}", json=body, headers=ADA)
    assert answer.status_code == 422, answer.text
    assert named in message(answer)


async def test_unreadable_bodies_are_422s(http: httpx.AsyncClient) -> None:
    for raw in (b"", b"{not json", b'{"goal": NaN, "status": "todo"}'):
        answer = await http.post(
            "/tools/save_plan", content=raw, headers={**ADA, "content-type": "application/json"}
        )
        assert answer.status_code == 422, raw
        assert "body" in message(answer)


async def test_code_is_bounded_to_one_mib_of_utf8_and_the_body_to_what_that_can_take(
    http: httpx.AsyncClient,
) -> None:
    limit = registry_calls.MAX_CODE_BYTES
    over = await http.post(
        "/tools/commit_code",
        json={"id": "big.txt", "lang": "text", "content": "x" * (limit + 1), "message": "m"},
        headers=ADA,
    )
    assert over.status_code == 422
    assert "body.content" in message(over)
    assert "1048577 bytes" in message(over)
    assert len(over.content) < 2000  # the content is not echoed back
    wide = "é" * (
        limit // 2
    )  # exactly 1 MiB of UTF-8, sent as \u00e9 escapes (3 MiB of JSON), as aiohttp does
    body = json.dumps({"id": "wide.txt", "lang": "text", "content": wide, "message": "m"}).encode()
    assert len(body) > 3 * limit
    fits = await http.post(
        "/tools/commit_code", content=body, headers={**ADA, "content-type": "application/json"}
    )
    assert fits.status_code == 200, fits.text[:300]
    read = await http.post("/tools/read_code", json={"id": "wide.txt"}, headers=ADA)
    assert read.json()["content"] == wide
    huge = (
        b'{"id": "h", "lang": "t", "message": "m", "content": "'
        + b"x" * registry_tools.MAX_BODY_BYTES
        + b'"}'
    )
    too_big = await http.post(
        "/tools/commit_code", content=huge, headers={**ADA, "content-type": "application/json"}
    )
    assert too_big.status_code == 413


async def test_open_webuis_own_client_calls_work(live: LiveServer) -> None:
    """aiohttp, as Open WebUI's execute_tool_server sends them: a JSON body of the model's arguments,
    `{}` for an operation without parameters, the bearer key and its x-openwebui headers."""
    headers = {"Authorization": f"Bearer {API_KEY}", **ADA}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{live.url}/tools/save_plan", json={"goal": "Plan ✓", "status": "todo"}, headers=headers
        ) as made:
            assert made.status == 200
            plan = await made.json()
        async with session.post(f"{live.url}/tools/list_plans", json={}, headers=headers) as listed:
            assert [p["id"] for p in (await listed.json())["plans"]] == [plan["id"]]


async def test_the_calls_are_counted_by_tool_and_outcome(http: httpx.AsyncClient) -> None:
    def count(tool: str, outcome: str) -> float:
        return sample("echo_tool_calls_total", tool=tool, outcome=outcome)

    before = {
        key: count(*key)
        for key in [("save_plan", "ok"), ("update_plan", "not_found"), ("read_code", "invalid")]
    }
    await http.post("/tools/save_plan", json={"goal": "g", "status": "todo"}, headers=ADA)
    await http.post("/tools/update_plan", json={"id": "ghost", "status": "done"}, headers=ADA)
    await http.post("/tools/read_code", json={}, headers=ADA)
    for key, value in before.items():
        assert count(*key) == value + 1, key
    scraped = (await http.get("/metrics")).text
    assert 'echo_tool_calls_total{outcome="ok",tool="save_plan"}' in scraped


async def test_a_store_that_is_down_is_a_503(settings: Settings, dsn: str, store: pool.Store) -> None:
    before = sample("echo_tool_calls_total", tool="list_plans", outcome="unavailable")
    app = create_app(settings, backends=store_backends(dsn, store.schema, broken=True))
    with LiveServer(app, name="echo-hooks") as server:
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}
        ) as client:
            for name, body in (
                ("list_plans", {}),
                ("save_plan", {"goal": "g", "status": "todo"}),
                ("read_code", {"id": "a"}),
            ):
                answer = await client.post(f"/tools/{name}", json=body, headers=ADA)
                assert answer.status_code == 503, (name, answer.text)
                assert "store is unavailable" in answer.json()["detail"]
    assert sample("echo_tool_calls_total", tool="list_plans", outcome="unavailable") == before + 1


@pytest.mark.parametrize("name", OPERATIONS)
def test_without_a_store_each_operation_is_a_503_after_its_checks(client: httpx.Client, name: str) -> None:
    bodies = {
        "save_plan": {"goal": "g", "status": "todo"},
        "update_plan": {"id": "p", "status": "done"},
        "commit_code": {"id": "a.py", "lang": "python", "content": "", "message": "m"},
        "read_code": {"id": "a.py"},
    }
    answer = client.post(f"/tools/{name}", json=bodies.get(name, {}), headers=ADA)
    assert answer.status_code == 503
    assert "no store" in answer.json()["detail"]
    if name in bodies:
        assert client.post(f"/tools/{name}", json={"bad": 1}, headers=ADA).status_code == 422
