"""One NUL or lone surrogate in a chat (issue 18, part 6): PostgreSQL refuses both (\\u0000 in text and
jsonb, a surrogate UTF-8 cannot encode), and the refusal used to turn compression and memory off for
that chat for good, every later outlet answering 200 and storing nothing, the status line blaming
"the store is unavailable". What is stored is made storable first (U+FFFD), the hash chain still
hashes the original text (so each turn finds the stored prefix again), and a store that refuses a
value says so.

Bodies are sent as ASCII JSON with escapes, as a browser or Open WebUI may send them: httpx's own
`json=` cannot encode a lone surrogate.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import hooks_service
from fakes.hooks_service import outlet_body, run_jobs
from fakes.memory_service import MemoryService, memory_service
from fakes.shared_data import API_KEY

from echo.adapters.store import conversations, errors
from echo.adapters.store.pool import Store
from echo.capabilities import handlers
from echo.capabilities.backends import on_store
from echo.config.settings import Settings
from echo.domain import chain

USER = {"id": "u1", "name": "Ada", "email": "ada@example.org", "role": "user"}
VALVES = {
    "compression_threshold_tokens": 800,
    "max_context_tokens": 6000,
    "keep_first": 1,
    "keep_last": 4,
    "max_summary_tokens": 150,
    "summary_model_max_context": 4000,
    "summary_temperature": 0.3,
}
TOPICS = ["the garden", "a bicycle trip", "the tax form", "a birthday cake", "the new laptop", "Rust"]
NUL = "Question 1 about a bicycle trip: my log says\x00 step 1 failed. Keep the constraints in mind."
SURROGATE = "Answer 2 about the tax form: the form reads \ud800 here, \udc00 there; fill it in by May."


def dirty_conversation(turns: int) -> list[dict[str, Any]]:
    """A chat as an outlet sends it, with a NUL in message 3 and lone surrogates in message 6."""
    items: list[dict[str, Any]] = [{"id": "s0", "role": "system", "content": "You are helpful."}]
    for i in range(turns):
        items.extend(hooks_service.exchange(i, TOPICS[i % len(TOPICS)]))
    items[3] = {**items[3], "content": NUL}
    items[6] = {**items[6], "content": SURROGATE}
    return items


def inlet_body(messages: list[dict[str, Any]], question: str) -> dict[str, Any]:
    sent = [{"role": m["role"], "content": m["content"]} for m in messages]
    sent.append({"role": "user", "content": question})
    return {
        "model": "gpt-x",
        "messages": sent,
        "stream": True,
        "metadata": {"chat_id": "c1", "user_id": "u1", "message_id": "next"},
    }


async def hook(http: httpx.AsyncClient, filter_id: str, phase: str, body: Any, user: Any = USER) -> Any:
    """The hook's answer with its status events: `{"body": ..., "events": [...]}`."""
    answer = await http.post(
        f"/{filter_id}/filter/{phase}",
        content=json.dumps({"body": body, "user": user}),  # ASCII with escapes
        headers={"Content-Type": "application/json", "X-Echo-Events": "1"},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def warnings(answer: dict[str, Any]) -> list[str]:
    return [event["description"] for event in answer["events"] if event["level"] != "info"]


@pytest.fixture
def offline(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "echo", api_key=API_KEY, llm_provider="offline")


@pytest.fixture
async def http(offline: Settings, dsn: str, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with hooks_service.serving(offline, dsn, store.schema, compression_valves=VALVES) as client:
        yield client


async def test_a_chat_with_a_nul_and_lone_surrogates_is_summarised_on_every_later_turn(
    http: httpx.AsyncClient, store: Store, offline: Settings
) -> None:
    registry = handlers.builtin_registry(offline, on_store(store))
    messages = dirty_conversation(12)
    answer = await hook(http, "echo_compression", "outlet", outlet_body(messages))
    assert warnings(answer) == []
    assert answer["body"]["messages"][3]["content"] == NUL  # the outlet changes nothing it shows
    stored = await store.fetch("SELECT message FROM messages WHERE user_id = 'u1'")
    assert len(stored) == 24
    texts = [row["message"]["content"] for row in stored]
    assert NUL.replace("\x00", "\ufffd") in texts
    assert SURROGATE.replace("\ud800", "\ufffd").replace("\udc00", "\ufffd") in texts
    # Stored under the hash of the original text, as every later turn computes it.
    invariant = chain.invariant_hash("user", NUL)
    assert await store.fetchval("SELECT count(*) FROM messages WHERE invariant = $1", invariant) == 1
    await run_jobs(store, registry)
    assert [row["state"] for row in await store.fetch("SELECT state FROM jobs")] == ["done"]

    first = await hook(http, "echo_compression", "inlet", inlet_body(messages, "And the garden?"))
    assert warnings(first) == []
    fenced = hooks_service.fence_of(first["body"])
    assert fenced is not None
    assert 'covers="20"' in fenced

    # Later turns: the chat goes on, its prefix (with the NUL) is found again, a second summary follows.
    longer = dirty_conversation(24)
    answer = await hook(http, "echo_compression", "outlet", outlet_body(longer))
    assert warnings(answer) == []
    await run_jobs(store, registry)
    covered = [
        r["covered_count"] for r in await store.fetch("SELECT covered_count FROM summaries ORDER BY id")
    ]
    assert len(covered) == 2
    assert covered[1] > 20
    later = await hook(http, "echo_compression", "inlet", inlet_body(longer, "And now?"))
    assert warnings(later) == []
    fenced = hooks_service.fence_of(later["body"])
    assert fenced is not None
    assert f'covers="{covered[1]}"' in fenced


async def test_a_value_the_store_refuses_is_not_called_an_unavailable_store(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(*_: Any, **__: Any) -> None:
        raise errors.DataRefused(
            'CharacterNotInRepertoireError: invalid byte sequence for encoding "UTF8": 0x00',
            sqlstate="22021",
        )

    monkeypatch.setattr(conversations.Conversations, "remember", refuse)
    answer = await hook(http, "echo_compression", "outlet", outlet_body(dirty_conversation(12)))
    [line] = warnings(answer)
    assert "unavailable" not in line
    assert line == (
        'ECHO compression: the summary store refused a value (invalid byte sequence for encoding "UTF8": '
        "0x00); the conversation was sent as it is"
    )


@pytest.fixture
async def memory(dsn: str, tmp_path: Path) -> AsyncIterator[MemoryService]:
    async with memory_service(dsn, tmp_path, valves={"WINDOW_SIZE": 2, "WINDOW_OVERLAP": 0}) as running:
        yield running


FACTS = [
    ("I am planning a trip to Kyoto in April 2027 with my sister Alice.", "Kyoto in April is lovely."),
    ("Alice is vegetarian\x00 and allergic to peanuts \ud83d.", "Noted: vegetarian, peanut allergy."),
    ("Our budget is 3000 euros each, flights from Lyon included.", "Plan 900 euros for flights."),
]


async def test_a_chat_with_a_nul_is_memorised_on_every_later_turn(
    memory: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages: list[dict[str, Any]] = [{"id": "s", "role": "system", "content": "You are helpful."}]
    for i, (question, reply) in enumerate(FACTS):
        messages += [
            {"id": f"u{i}", "role": "user", "content": question},
            {"id": f"a{i}", "role": "assistant", "content": reply},
        ]
    user = {"id": "alice", "name": "alice"}
    for end in range(3, len(messages) + 1, 2):  # every outlet of the chat, one turn after the other
        answer = await hook(memory.http, "echo_memory", "outlet", outlet_body(messages[:end]), user)
        assert warnings(answer) == []
    await memory.drained()
    jobs = await memory.jobs()
    assert [(job["kind"], job["state"]) for job in jobs] == [("distill", "done")] * 3, jobs
    stored = await memory.store.fetch("SELECT summary, provenance FROM memories WHERE user_id = 'alice'")
    assert stored
    windows = [w for row in stored for w in row["provenance"]]
    assert {m for w in windows for m in w["message_ids"]} == {m["id"] for m in messages[1:]}
    # one record per fact a memory holds (its provenance names it) and one per window, each distilled
    facts = {w["window"] for w in windows}
    recorded = await memory.store.fetch("SELECT window_key FROM memory_windows WHERE user_id = 'alice'")
    assert facts <= {r["window_key"] for r in recorded}
    assert len([r for r in recorded if r["window_key"] not in facts]) == 3

    # A value the store refuses all the same: the status line says so, not "unavailable".
    async def refuse(*_: Any, **__: Any) -> None:
        raise errors.DataRefused("NumericValueOutOfRangeError: value out of range", sqlstate="22003")

    monkeypatch.setattr(conversations.Conversations, "remember", refuse)
    messages += [
        {"id": "u3", "role": "user", "content": "We land in Osaka."},
        {"id": "a3", "role": "assistant", "content": "Take the Haruka train."},
    ]
    answer = await hook(memory.http, "echo_memory", "outlet", outlet_body(messages), user)
    assert warnings(answer) == [
        "ECHO memory: the store refused a value (value out of range); nothing was memorised"
    ]
