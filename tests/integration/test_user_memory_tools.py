"""A user sees and removes what ECHO remembers about them, through the tool server Open WebUI calls
(`list_memories`, `forget_memory`, `forget_all_memories`; issue 21 part 6): `echoctl serve`'s runtime
(real PostgreSQL, packaged MiniLM, Qdrant local mode, the in-process worker, the offline LLM), the
user named only by Open WebUI's `x-openwebui-user-id` header.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fakes.eventually import eventually
from fakes.memory_service import MemoryService, memory_service
from test_memory_flow import FACTS, chat, play

USER = "x-openwebui-user-id"


@pytest.fixture
async def service(dsn: str, tmp_path: Path) -> Any:
    # Readiness waited for here, longer than memory_service's own wait: the embedder's warm-up takes
    # over a minute on a loaded machine.
    async with memory_service(dsn, tmp_path, wait_ready=False) as running:

        async def ready() -> bool:
            return (await running.http.get("/readyz")).status_code == 200

        await eventually(ready, within=240, interval=0.5, what="service ready")
        updated = await running.http.post(
            "/echo_memory/valves/update", json={"WINDOW_SIZE": 2, "WINDOW_OVERLAP": 1}
        )
        assert updated.status_code == 200, updated.text
        await play(running, chat(FACTS), "ivy")
        await play(running, chat(FACTS), "jack")
        await running.drained()
        yield running


async def listed(service: MemoryService, user_id: str, body: Any = None) -> dict[str, Any]:
    answer = await service.http.post("/tools/list_memories", json=body, headers={USER: user_id})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def found_by_search(service: MemoryService, user_id: str, query: str) -> set[str]:
    """The ids the vector store still finds for the user (the admin API's search)."""
    answer = await service.admin.post("/memories/search", json={"user_id": user_id, "query": query, "k": 20})
    return {hit["id"] for hit in answer.json()["data"]}


async def test_a_user_lists_their_memories_and_forgets_one_and_nothing_of_anybody_else(
    service: MemoryService,
) -> None:
    """One service for these checks (starting one costs most of the time): the OpenAPI document, the
    list, the refusals, then forgetting one memory."""
    await documented_for_a_model(service)
    await listed_newest_first_with_dates(service)
    await refused_without_a_user_or_a_key(service)
    await refused_with_a_bad_body(service)
    await forget_one(service)


async def documented_for_a_model(service: MemoryService) -> None:
    spec = (await service.http.get("/tools/openapi.json", headers={"Authorization": ""})).json()
    operations = {path: spec["paths"][path]["post"] for path in spec["paths"]}
    listing = operations["/tools/list_memories"]
    assert listing["operationId"] == "list_memories"
    assert "what do you remember about me?" in listing["description"]
    assert "required" not in listing["requestBody"]  # a call without arguments is fine
    forget = operations["/tools/forget_memory"]
    assert forget["operationId"] == "forget_memory"
    assert "forget that I" in forget["description"]
    assert "search_memories" in forget["description"]
    assert spec["components"]["schemas"]["ForgetMemory"]["required"] == ["id"]
    assert operations["/tools/forget_all_memories"]["operationId"] == "forget_all_memories"
    assert "requestBody" not in operations["/tools/forget_all_memories"]


async def listed_newest_first_with_dates(service: MemoryService) -> None:
    mine = await listed(service, "ivy")
    theirs = await listed(service, "jack", {})
    total = (await service.admin.get("/memories", params={"user_id": "ivy"})).json()["total"]
    assert mine["total"] == total >= 2
    assert len(mine["memories"]) == total
    assert mine["offset"] == 0
    updated = [datetime.fromisoformat(m["updated_at"]) for m in mine["memories"]]
    assert updated == sorted(updated, reverse=True)
    assert all(
        datetime.fromisoformat(m["created_at"]) <= u for m, u in zip(mine["memories"], updated, strict=True)
    )
    assert all(m["updated_at"].endswith("+00:00") for m in mine["memories"])
    assert "Kyoto" in " ".join(m["summary"] for m in mine["memories"])
    assert not {m["id"] for m in mine["memories"]} & {m["id"] for m in theirs["memories"]}
    page = await listed(service, "ivy", {"limit": 1, "offset": 1})
    assert [m["id"] for m in page["memories"]] == [mine["memories"][1]["id"]]
    assert page["total"] == total
    assert (await listed(service, "nobody"))["memories"] == []


async def forget_one(service: MemoryService) -> None:
    """By the id search_memories gives; another user's id is a 404 and their memory stays."""
    http = service.http
    searched = await http.post(
        "/tools/search_memories", json={"query": "peanut allergy"}, headers={USER: "ivy"}
    )
    target, text = (
        searched.json()["memories"][0]["id"],
        searched.json()["memories"][0]["summary"],
    )  # the search gives the id to forget by
    assert target in {m["id"] for m in (await listed(service, "ivy"))["memories"]}
    jack = (await listed(service, "jack"))["memories"][0]
    jacks = jack["id"]

    stolen = await http.post("/tools/forget_memory", json={"id": jacks}, headers={USER: "ivy"})
    assert stolen.status_code == 404
    assert "list_memories" in stolen.json()["detail"]
    assert (await service.admin.get(f"/memories/{jacks}", params={"user_id": "jack"})).status_code == 200
    assert jacks in await found_by_search(service, "jack", jack["summary"])

    forgotten = await http.post("/tools/forget_memory", json={"id": target}, headers={USER: "ivy"})
    assert forgotten.status_code == 200, forgotten.text
    assert forgotten.json() == {"forgotten": target}
    assert (await service.admin.get(f"/memories/{target}", params={"user_id": "ivy"})).status_code == 404
    assert target not in {m["id"] for m in (await listed(service, "ivy"))["memories"]}
    assert target not in await found_by_search(service, "ivy", text)
    assert await service.store.fetchval("SELECT count(*) FROM memory_versions WHERE memory = $1", target) == 0
    again = await http.post("/tools/forget_memory", json={"id": target}, headers={USER: "ivy"})
    assert again.status_code == 404


async def test_forgetting_everything_empties_the_users_memories_and_vectors_only(
    service: MemoryService,
) -> None:
    before = await listed(service, "ivy")
    jack = await listed(service, "jack")
    answer = await service.http.post("/tools/forget_all_memories", headers={USER: "ivy"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"forgotten": before["total"]}
    assert await listed(service, "ivy") == {"memories": [], "total": 0, "offset": 0}
    for memory in before["memories"]:
        assert await found_by_search(service, "ivy", memory["summary"]) == set()
    for table in ("memories", "memory_versions", "memory_windows"):
        assert await service.store.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = 'ivy'") == 0
    assert (
        await service.store.fetchval("SELECT count(*) FROM messages WHERE user_id = 'ivy'") > 0
    )  # chats stay
    assert await listed(service, "jack") == jack
    for memory in jack["memories"]:  # each still found by its own text (searches have a relevance floor)
        assert memory["id"] in await found_by_search(service, "jack", memory["summary"])
    empty = await service.http.post("/tools/forget_all_memories", headers={USER: "ivy"})
    assert empty.json() == {"forgotten": 0}


async def refused_without_a_user_or_a_key(service: MemoryService) -> None:
    for path, body in [
        ("/tools/list_memories", {}),
        ("/tools/forget_memory", {"id": "any"}),
        ("/tools/forget_all_memories", None),
    ]:
        anonymous = await service.http.post(path, json=body)
        assert anonymous.status_code == 422, path
        assert USER in anonymous.json()["detail"]["message"]
        twice = await service.http.post(path, json=body, headers=[(USER, "ivy"), (USER, "jack")])
        assert twice.status_code == 422, path
        keyless = await service.http.post(path, json=body, headers={"Authorization": "", USER: "ivy"})
        assert keyless.status_code == 401, path
        body_user = await service.http.post(path, json={**(body or {}), "user_id": "ivy"})
        assert body_user.status_code == 422, path  # a user named in the body is no user
    assert (await listed(service, "ivy"))["total"] >= 2  # nothing was forgotten


async def refused_with_a_bad_body(service: MemoryService) -> None:
    for path, body, field in [
        ("/tools/forget_memory", {}, "id"),
        ("/tools/forget_memory", {"id": ""}, "id"),
        ("/tools/forget_memory", {"id": 5}, "id"),
        ("/tools/forget_memory", {"id": "a\u0000b"}, "id"),
        ("/tools/forget_memory", {"id": "x", "user_id": "jack"}, "user_id"),
        ("/tools/list_memories", {"limit": 0}, "limit"),
        ("/tools/list_memories", {"limit": True}, "limit"),
        ("/tools/list_memories", {"offset": -1}, "offset"),
        ("/tools/list_memories", {"user_id": "jack"}, "user_id"),
    ]:
        answer = await service.http.post(path, json=body, headers={USER: "ivy"})
        assert answer.status_code == 422, (path, body, answer.text)
        # the tool routes' 422 for a body: FastAPI's list of field errors, each at its location
        assert ["body", field] in [e["loc"] for e in answer.json()["detail"]], (path, body, answer.text)
    headers = {USER: "ivy", "Content-Type": "application/json"}
    broken = await service.http.post("/tools/forget_memory", content=b'{"id": ', headers=headers)
    assert 400 <= broken.status_code < 500, broken.text
    assert (await listed(service, "ivy"))["total"] >= 2
