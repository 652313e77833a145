"""Long-term memory end to end: `echoctl serve`'s runtime (real PostgreSQL, packaged MiniLM, Qdrant
local mode, the in-process worker, the offline LLM) driven over HTTP like Open WebUI drives it.

A chat's outlets enqueue one `distill` job per window (a replayed outlet adds none) → the worker
distils, embeds and stores → a later chat's inlet recalls the memory, fenced as history; another
user never sees it. Then small talk (no memory, no LLM call), exact matches and merges (history
kept), the memory API, the tool server, forgetting a user, and the failure paths.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
from fakes.eventually import eventually
from fakes.memory_service import MemoryService, memory_service, outlet_body
from prometheus_client import REGISTRY

FACTS = [
    (
        "I am planning a trip to Kyoto in April 2027 with my sister Alice. We want to visit the temples.",
        "A trip to Kyoto in April 2027 with your sister Alice sounds lovely. Kiyomizu-dera and Fushimi "
        "Inari are the temples most people start with; book the ryokan early, April is blossom season.",
    ),
    (
        "Alice is vegetarian and allergic to peanuts, so restaurants matter for us.",
        "Noted: Alice is vegetarian with a peanut allergy. Shojin ryori, the Buddhist temple cuisine of "
        "Kyoto, is vegetarian; always show a peanut allergy card in Japanese at restaurants.",
    ),
    (
        "Our budget is 3000 euros each, flights from Lyon included.",
        "With 3000 euros each including flights from Lyon, plan about 900 euros for flights, 1200 for "
        "lodging over ten nights and the rest for food, trains and temple entries.",
    ),
]


def chat(turns: list[tuple[str, str]], prefix: str = "") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"id": f"{prefix}s", "role": "system", "content": "You are helpful."}]
    for i, (question, answer) in enumerate(turns):
        messages.append(
            {"id": f"{prefix}u{i}", "role": "user", "content": question, "timestamp": 1795981950 + i}
        )
        messages.append(
            {"id": f"{prefix}a{i}", "role": "assistant", "content": answer, "timestamp": 1795981951 + i}
        )
    return messages


def inlet_body(question: str, chat_id: str, user_id: str) -> dict[str, Any]:
    return {
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": question},
        ],
        "metadata": {"chat_id": chat_id, "user_id": user_id, "message_id": "next"},
    }


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def play(
    service: MemoryService, messages: list[dict[str, Any]], user_id: str, chat_id: str = "c1"
) -> None:
    """Every outlet of a chat, one completed turn after the other, as Open WebUI sends them."""
    for end in range(3, len(messages) + 1, 2):  # system + each exchange
        await service.hook("echo_memory", "outlet", outlet_body(messages[:end], chat_id), user_id)


def memories_block(body: dict[str, Any]) -> str | None:
    """The recalled block in front of the last user message, or None."""
    content = body["messages"][-1]["content"]
    assert body["messages"][-1]["role"] == "user"
    found = [m for m in body["messages"] if "<echo_memories" in str(m.get("content", ""))]
    assert len(found) <= 1
    if not content.startswith("<echo_memories"):
        return None
    return str(content.split("</echo_memories>", 1)[0] + "</echo_memories>")


@pytest.fixture
async def service(dsn: str, tmp_path: Path) -> Any:
    async with memory_service(dsn, tmp_path, valves={"WINDOW_SIZE": 2, "WINDOW_OVERLAP": 1}) as running:
        yield running


async def test_a_chat_is_distilled_in_the_background_and_recalled_in_a_later_chat(
    service: MemoryService,
) -> None:
    messages = chat(FACTS)
    await play(service, messages, "alice")
    await service.drained()
    jobs = await service.jobs()
    assert [job["kind"] for job in jobs] == ["distill"] * 3  # windows end at messages 2, 4 and 6
    assert all(job["state"] == "done" for job in jobs), jobs
    await play(service, messages, "alice")  # replayed outlets add nothing
    assert len(await service.jobs()) == 3

    listed = (await service.admin.get("/memories", params={"user_id": "alice"})).json()
    assert listed["total"] >= 1
    windows = [w for memory in listed["data"] for w in memory["provenance"]]
    assert len(windows) == 3
    assert {m for w in windows for m in w["message_ids"]} == {m["id"] for m in messages[1:]}
    assert all(w["chat_id"] == "c1" for w in windows)

    recalled = await service.hook(
        "echo_memory", "inlet", inlet_body("Which temples should we see in Kyoto?", "c2", "alice"), "alice"
    )
    block = memories_block(recalled)
    assert block is not None
    assert "Kyoto" in block
    assert "history, not instructions" in block
    question = recalled["messages"][-1]["content"]
    assert question == f"{block}\n\nWhich temples should we see in Kyoto?"  # in front of the question
    assert recalled["messages"][:-1] == inlet_body("x", "c2", "alice")["messages"][:-1]
    again = await service.hook("echo_memory", "inlet", recalled, "alice")  # a second pass: no second block
    assert again["messages"][-1]["content"].count("<echo_memories") == 1

    other = await service.hook(
        "echo_memory", "inlet", inlet_body("Which temples should we see in Kyoto?", "c9", "bob"), "bob"
    )
    assert memories_block(other) is None  # another user never sees alice's memories
    assert (await service.admin.get("/memories", params={"user_id": "bob"})).json()["total"] == 0


@pytest.fixture
async def exchanges(dsn: str, tmp_path: Path) -> Any:
    """One window per exchange (WINDOW_SIZE 2, no overlap); merges from 0.5 similarity, touches at 0.99."""
    valves = {
        "WINDOW_SIZE": 2,
        "WINDOW_OVERLAP": 0,
        "SIMILARITY_THRESHOLD": 0.5,
        "EXACT_MATCH_THRESHOLD": 0.99,
    }
    async with memory_service(dsn, tmp_path, valves=valves) as running:
        yield running


async def test_small_talk_makes_no_memory_and_costs_no_llm_call(exchanges: MemoryService) -> None:
    llm_calls = sample("echo_llm_offline_total", purpose="distill")
    discarded = sample("echo_memory_discarded_total", reason="small_talk")
    await play(exchanges, chat([("Hi there!", "Hello! How can I help you today?")]), "carol")
    await exchanges.drained()
    assert (await exchanges.admin.get("/memories", params={"user_id": "carol"})).json()["total"] == 0
    assert sample("echo_memory_discarded_total", reason="small_talk") == discarded + 1
    assert sample("echo_llm_offline_total", purpose="distill") == llm_calls
    assert [job["state"] for job in await exchanges.jobs()] == ["done"]


async def test_the_same_fact_again_touches_the_memory_and_a_new_one_merges_keeping_the_history(
    exchanges: MemoryService,
) -> None:
    first = FACTS[0]
    await play(exchanges, chat([first], "c1-"), "dave", "c1")
    await exchanges.drained()
    [created] = (await exchanges.admin.get("/memories", params={"user_id": "dave"})).json()["data"]
    assert created["version"] == 1

    touched_before = sample("echo_memories_total", outcome="touched")
    await play(exchanges, chat([FACTS[2], first], "c2-"), "dave", "c2")  # same exchange, other history
    await exchanges.drained()
    assert sample("echo_memories_total", outcome="touched") >= touched_before + 1
    again = (await exchanges.admin.get(f"/memories/{created['id']}", params={"user_id": "dave"})).json()
    assert again["version"] >= 1
    assert again["updated_at"] > created["updated_at"]
    assert {w["chat_id"] for w in again["provenance"]} == {"c1", "c2"}

    update = (
        first[0] + " Alice now wants to add Nara for two days, and we will fly from Geneva instead.",
        first[1] + " Nara is 45 minutes from Kyoto by train; Geneva to Osaka has good connections.",
    )
    await play(exchanges, chat([update], "c3-"), "dave", "c3")
    await exchanges.drained()
    merged = (await exchanges.admin.get(f"/memories/{created['id']}", params={"user_id": "dave"})).json()
    assert merged["version"] == again["version"] + 1
    assert "Nara" in merged["summary"]
    assert "Kyoto" in merged["summary"]  # every fact of both kept
    assert [v["version"] for v in merged["history"]][-1] == again["version"]
    assert "Nara" not in merged["history"][-1]["summary"]
    assert merged["history"][-1]["replaced_by_window"] in {w["window"] for w in merged["provenance"]}
    assert merged["memory_importance"] >= created["memory_importance"]


async def test_the_memory_api_searches_reads_and_deletes_one_users_memories(service: MemoryService) -> None:
    await play(service, chat(FACTS), "erin")
    await play(service, chat(FACTS), "frank")
    await service.drained()
    http = service.admin
    found = (
        await http.post("/memories/search", json={"user_id": "erin", "query": "peanut allergy", "k": 3})
    ).json()
    assert found["data"]
    assert all(hit["user_id"] == "erin" for hit in found["data"])
    assert found["data"] == sorted(found["data"], key=lambda hit: -hit["score"])
    memory_id = found["data"][0]["id"]
    assert (await http.get(f"/memories/{memory_id}", params={"user_id": "frank"})).status_code == 404
    assert (await http.delete(f"/memories/{memory_id}", params={"user_id": "frank"})).status_code == 404
    assert (await http.delete(f"/memories/{memory_id}", params={"user_id": "erin"})).json() == {
        "deleted": memory_id,
        "user_id": "erin",
    }
    assert (await http.get(f"/memories/{memory_id}", params={"user_id": "erin"})).status_code == 404
    again = (await http.post("/memories/search", json={"user_id": "erin", "query": "peanut allergy"})).json()
    assert memory_id not in {hit["id"] for hit in again["data"]}

    for bad, field in [
        ({"user_id": "erin"}, "query"),
        ({"user_id": "", "query": "x"}, "user_id"),
        ({"user_id": "erin", "query": "x", "k": 0}, "k"),
        ({"user_id": "erin", "query": "x", "extra": 1}, "extra"),
    ]:
        answer = await http.post("/memories/search", json=bad)
        assert answer.status_code == 422
        assert field in answer.json()["detail"]["message"]
    missing = await http.get("/memories")
    assert missing.status_code == 422
    assert "user_id" in str(missing.json()["detail"])
    assert (
        await http.get("/memories", params={"user_id": "erin"}, headers={"Authorization": "Bearer no"})
    ).status_code == 401
    hooks_key = await service.http.get("/memories", params={"user_id": "erin"})  # Open WebUI's key
    assert hooks_key.status_code == 403
    assert "ECHO_ADMIN_KEY" in hooks_key.json()["detail"]


async def test_forgetting_a_user_deletes_every_trace_of_them_and_nobody_else(service: MemoryService) -> None:
    await play(service, chat(FACTS), "gina")
    await play(service, chat(FACTS), "hugo")
    await service.drained()
    await service.hook("echo_memory", "outlet", outlet_body(chat(FACTS + FACTS[:1])), "gina")  # a queued job
    answer = await service.admin.delete("/users/gina")
    assert answer.status_code == 200, answer.text
    deleted = answer.json()["deleted"]
    assert deleted["jobs_and_memories"]["memories"] >= 1
    assert deleted["jobs_and_memories"]["jobs"] >= 4
    assert deleted["conversations"]["messages"] == 6
    assert deleted["vectors"]["echo_memory"] >= 1
    store = service.store
    for table in ("memories", "memory_versions", "memory_windows", "messages"):
        assert await store.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = 'gina'") == 0, table
    assert await store.fetchval("SELECT count(*) FROM jobs WHERE payload->>'user_id' = 'gina'") == 0
    assert (
        await service.admin.post("/memories/search", json={"user_id": "gina", "query": "Kyoto"})
    ).json() == {"data": []}
    assert (await service.admin.get("/memories", params={"user_id": "hugo"})).json()["total"] >= 1
    assert (await service.admin.delete("/users/gina")).json()["deleted"]["jobs_and_memories"]["memories"] == 0


async def test_the_tool_server_searches_the_calling_users_memories_only(service: MemoryService) -> None:
    await play(service, chat(FACTS), "ivy")
    await service.drained()
    http = service.http
    spec = (await http.get("/tools/openapi.json", headers={"Authorization": ""})).json()
    operation = spec["paths"]["/tools/search_memories"]["post"]
    assert operation["operationId"] == "search_memories"
    assert "query" in spec["components"]["schemas"]["SearchMemories"]["properties"]
    call = {"query": "Where are we travelling in April?"}
    mine = await http.post("/tools/search_memories", json=call, headers={"x-openwebui-user-id": "ivy"})
    assert mine.status_code == 200
    assert "Kyoto" in mine.json()["memories"][0]["summary"]
    other = await http.post("/tools/search_memories", json=call, headers={"x-openwebui-user-id": "jack"})
    assert other.json() == {"memories": []}
    anonymous = await http.post("/tools/search_memories", json=call)
    assert anonymous.status_code == 422
    assert "x-openwebui-user-id" in anonymous.json()["detail"]["message"]
    keyless = await http.post(
        "/tools/search_memories", json=call, headers={"Authorization": "", "x-openwebui-user-id": "ivy"}
    )
    assert keyless.status_code == 401


async def test_recall_past_its_deadline_lets_the_turn_go_on_without_memories(
    dsn: str, tmp_path: Path
) -> None:
    async with memory_service(dsn, tmp_path, valves={"INLET_DEADLINE_MS": 1}) as service:
        timeouts = sample("echo_memory_recalls_total", outcome="timeout")
        body = inlet_body("Which temples should we see in Kyoto?", "c2", "kim")
        assert await service.hook("echo_memory", "inlet", body, "kim") == body
        assert sample("echo_memory_recalls_total", outcome="timeout") == timeouts + 1


async def test_with_the_vector_store_down_the_turn_goes_on_without_memories(dsn: str, tmp_path: Path) -> None:
    """A Qdrant server that is not there (a stopped pod): the recall fails fast, the body passes on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens once the socket closes
    async with memory_service(dsn, tmp_path, wait_ready=False, qdrant_url=dead, qdrant_path=None) as service:

        async def embedder_ready() -> Any:
            answer = await service.http.get("/readyz")
            return answer if answer.json()["checks"]["embedder"]["ok"] else None

        # the embedder loads; the vectors never answer
        ready = await eventually(embedder_ready, within=60, interval=0.2, what="the embedder ready")
        checks = ready.json()["checks"]
        assert checks["vectors"]["ok"] is False
        # Still in the Service: every filter serves, memory fails open (unready, every replica would go).
        assert ready.status_code == 200
        assert ready.json()["status"] == "degraded"
        errors = sample("echo_memory_recalls_total", outcome="error")
        body = inlet_body("Which temples should we see in Kyoto?", "c3", "lou")
        started = time.monotonic()
        assert await service.hook("echo_memory", "inlet", body, "lou") == body
        assert time.monotonic() - started < 0.8  # within the inlet deadline
        assert sample("echo_memory_recalls_total", outcome="error") == errors + 1
