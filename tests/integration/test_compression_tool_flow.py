"""Native tool calls through echo_compression, replayed from what Open WebUI 0.12.4 really sent
(tests/fixtures/owui-0.12.4/tool_flow: turn 1's outlet, turn 2's inlet and outlet).

The outlet hashes the tool calls it unfolds from `output` items; the next inlet hashes the
`tool_calls` and `tool` messages Open WebUI rebuilt from them (arguments re-serialised). Both sides
must agree, or the summary the outlet planned never matches the next inlet.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import hooks_service
from fakes.shared_data import API_KEY, load_fixture

from echo.adapters.store.pool import Store
from echo.capabilities import handlers
from echo.capabilities.backends import on_store
from echo.config.settings import Settings

VALVES = {
    "compression_threshold_tokens": 10,  # the fixture chat is small: summarise it at once
    "max_context_tokens": 6000,
    "keep_first": 0,
    "keep_last": 1,
    "max_summary_tokens": 150,
    "summary_model_max_context": 4000,
}


@pytest.fixture
def offline(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "echo", api_key=API_KEY, llm_provider="offline")


@pytest.fixture
async def http(offline: Settings, dsn: str, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with hooks_service.serving(offline, dsn, store.schema, compression_valves=VALVES) as client:
        yield client


def captured(name: str) -> dict[str, Any]:
    """The request Open WebUI sent (`{"body", "user"}`), as it sent it."""
    return load_fixture(f"tool_flow/{name}")["body"]


QUESTION = "What is the weather in Paris?"
DETAIL = (
    " I land at Charles de Gaulle on Friday morning, spend the afternoon walking from the Louvre"
    " along the Seine to the Eiffel Tower, have dinner on a terrace in the Marais, and on Saturday"
    " take the train to Versailles for the gardens, then come back for a concert at the"
    " Philharmonie in the evening. On Sunday I would like to cycle through the Bois de Boulogne,"
    " visit the flea market at Saint-Ouen, picnic in the Buttes-Chaumont park and watch the sunset"
    " from Montmartre before my evening flight home, so tell me about rain, wind and the"
    " temperature at each of those times, and whether I need an umbrella or a warm coat."
)


def with_long_question(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` (a copy) whose first question, as each captured request holds it, is long enough
    that a summary of the turns covered costs less than they do (``max_summary_share``); the tool
    turns stay as Open WebUI sent them."""
    padded = copy.deepcopy(request)
    for message in padded["body"]["messages"]:
        if message["role"] == "user" and message["content"] == QUESTION:
            message["content"] = QUESTION + DETAIL
    return padded


async def post(http: httpx.AsyncClient, phase: str, request: dict[str, Any]) -> dict[str, Any]:
    answer = await http.post(
        f"/echo_compression/filter/{phase}",
        content=json.dumps(request),
        headers={"X-Echo-Events": "1", "content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    envelope: dict[str, Any] = answer.json()
    return envelope


async def head(store: Store) -> list[str]:
    return list(await store.fetchval("SELECT invariants FROM chat_heads"))


async def test_the_summary_the_outlet_planned_matches_the_next_inlet_of_a_tool_call_chat(
    http: httpx.AsyncClient, store: Store, offline: Settings
) -> None:
    first_outlet = with_long_question(captured("004_outlet.json"))
    assert (await post(http, "outlet", first_outlet))["body"] == first_outlet["body"]
    assert len(await head(store)) == 4  # user, assistant with its call, the tool result, the answer
    [payload] = await store.fetch("SELECT payload FROM jobs WHERE kind = 'summary'")
    assert len(payload["payload"]["invariants"]) == 3  # the call and its result stay together
    await hooks_service.run_jobs(store, handlers.builtin_registry(offline, on_store(store)))

    inlet = with_long_question(captured("005_inlet.json"))
    sent = inlet["body"]["messages"]
    assert "tool_calls" in sent[1]
    assert sent[2]["role"] == "tool"
    answer = await post(http, "inlet", inlet)
    fenced = hooks_service.fence_of(answer["body"])
    assert fenced is not None  # the inlet's hashes of the tool turns are the outlet's
    assert 'covers="3"' in fenced
    assert answer["body"]["messages"][1:] == sent[3:]  # the answer after the tool result, and the question
    assert any(
        event["description"].startswith("Earlier conversation summarised") for event in answer["events"]
    )

    second_outlet = with_long_question(captured("008_outlet.json"))
    first = await head(store)
    await post(http, "outlet", second_outlet)
    second = await head(store)
    assert second[: len(first)] == first  # turn 2's outlet extends the branch turn 1's recorded
    assert len(second) == 8
    assert second[1] == second[5]  # the same call with the same arguments: one stored message
    stored = await store.fetchval("SELECT count(*) FROM messages")
    assert stored == len(set(second))


async def test_one_text_with_other_tool_calls_is_stored_as_two_messages(
    http: httpx.AsyncClient, store: Store
) -> None:
    request = copy.deepcopy(captured("008_outlet.json"))
    calls = request["body"]["messages"][3]["output"]
    calls[0]["arguments"] = '{"city":"Lyon"}'  # the same answer text, another call
    await post(http, "outlet", request)
    invariants = await head(store)
    assert invariants[1] != invariants[5]
    assert invariants[2] == invariants[6]  # the same result of the same call id: one message
    rows = await store.fetch(
        "SELECT message FROM messages WHERE role = 'assistant' AND message ? 'tool_calls'"
    )
    arguments = sorted(row["message"]["tool_calls"][0]["function"]["arguments"] for row in rows)
    assert arguments == ['{"city":"Lyon"}', '{"city":"Paris"}']
