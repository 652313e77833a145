"""Long-term memory end to end: `echoctl serve`'s runtime (real PostgreSQL, packaged MiniLM, Qdrant
local mode, the in-process worker, the offline LLM) driven over HTTP like Open WebUI drives it.

A chat's outlets enqueue one `distill` job per window (a replayed outlet adds none) → the worker
distils, embeds and stores → a later chat's inlet recalls the memory, fenced as history; another
user never sees it. Then small talk (no memory, no LLM call), exact matches and merges (history
kept), the memory API, the tool server, forgetting a user, and the failure paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
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
    found = [m for m in body["messages"] if str(m.get("content", "")).startswith("<echo_memories")]
    assert len(found) <= 1
    if not found:
        return None
    assert found[0]["role"] == "system"
    return str(found[0]["content"])


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

    listed = (await service.http.get("/memories", params={"user_id": "alice"})).json()
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
    assert recalled["messages"][-1] == {"role": "user", "content": "Which temples should we see in Kyoto?"}
    assert recalled["messages"][-2]["content"] == block  # just before the user's message

    other = await service.hook(
        "echo_memory", "inlet", inlet_body("Which temples should we see in Kyoto?", "c9", "bob"), "bob"
    )
    assert memories_block(other) is None  # another user never sees alice's memories
    assert (await service.http.get("/memories", params={"user_id": "bob"})).json()["total"] == 0
