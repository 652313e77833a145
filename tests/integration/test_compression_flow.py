"""Context compression end to end: the real app over HTTP, a real PostgreSQL, the real worker and the
offline LLM (the fake Gemini server for what a model may answer).

A long chat crosses the threshold → the outlet enqueues one `summary` job (a replayed outlet adds none)
→ a worker makes the summary → the next inlet injects it fenced and drops the turns it covers. Then
branch validity over HTTP (edits, siblings, a changing system prompt, a cloned chat, another user),
the store down, odd message lists, and the summary model's failure modes under `summary_fail_mode`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import hooks_service
from fakes.gemini_server import FakeGemini
from fakes.hooks_service import outlet_body, run_jobs
from fakes.shared_data import API_KEY
from prometheus_client import REGISTRY

from echo.adapters.llm import factory
from echo.adapters.store import conversations
from echo.adapters.store.pool import Store
from echo.capabilities import handlers
from echo.capabilities.backends import on_store
from echo.capabilities.compression import payloads, summary
from echo.config.settings import Settings
from echo.domain import kinds
from echo.domain.compression import messages as msgs
from echo.domain.jobs import KindPolicy, RetryPolicy
from echo.queue.registry import Registry

USER = {"id": "u1", "name": "Ada", "email": "ada@example.org", "role": "user"}
VALVES = {
    "compression_threshold_tokens": 800,  # crossed at 10 exchanges (about 83 tokens each)
    "max_context_tokens": 6000,
    "keep_first": 1,
    "keep_last": 4,
    "max_summary_tokens": 150,
    "summary_model_max_context": 4000,
    "summary_temperature": 0.3,
}
TOPICS = [
    "the garden",
    "a bicycle trip",
    "the tax form",
    "a birthday cake",
    "the new laptop",
    "Rust lifetimes",
]


@pytest.fixture
def offline(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "echo", api_key=API_KEY, llm_provider="offline")


def serving(
    settings: Settings, dsn: str, schema: str, *, broken: bool = False, valves: dict[str, Any] | None = None
) -> Any:
    return hooks_service.serving(
        settings, dsn, schema, compression_valves={**VALVES, **(valves or {})}, broken=broken
    )


@pytest.fixture
async def http(offline: Settings, dsn: str, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(offline, dsn, store.schema) as client:
        yield client


def conversation(
    turns: int, *, system: str = "You are a helpful assistant. Today is Monday."
) -> list[dict[str, Any]]:
    """A chat as an outlet sends it (flat, with ids); every exchange about its own topic."""
    items: list[dict[str, Any]] = [{"id": "s0", "role": "system", "content": system}]
    for i in range(turns):
        items.extend(hooks_service.exchange(i, TOPICS[i % len(TOPICS)]))
    return items


def inlet_body(
    messages: list[dict[str, Any]], question: str, chat_id: str = "c1", user_id: str = "u1"
) -> dict[str, Any]:
    sent = [{"role": m["role"], "content": m["content"]} for m in messages]  # the inlet carries no ids
    sent.append({"role": "user", "content": question})
    return {
        "model": "gpt-x",
        "messages": sent,
        "stream": True,
        "metadata": {"chat_id": chat_id, "user_id": user_id, "message_id": "next"},
    }


async def hook(http: httpx.AsyncClient, phase: str, body: dict[str, Any], user: dict[str, Any] = USER) -> Any:
    answer = await http.post(f"/echo_compression/filter/{phase}", json={"body": body, "user": user})
    assert answer.status_code == 200, answer.text
    return answer.json()


def tokens_of(body: dict[str, Any]) -> int:
    return sum(msgs.message_tokens(m) for m in body["messages"])


def fence_of(body: dict[str, Any]) -> str | None:
    found = [m["content"] for m in body["messages"] if str(m.get("content", "")).startswith("<echo_summary")]
    assert len(found) <= 1
    return found[0] if found else None


async def jobs_of(store: Store) -> list[Any]:
    return await store.fetch("SELECT kind, state, payload, idempotency_key, attempts FROM jobs ORDER BY id")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def summarise(
    http: httpx.AsyncClient, store: Store, registry: Registry, messages: list[dict[str, Any]]
) -> None:
    await hook(http, "outlet", outlet_body(messages))
    await run_jobs(store, registry)


async def test_a_long_chat_is_summarised_in_the_background_and_the_next_inlet_uses_it(
    http: httpx.AsyncClient, store: Store, offline: Settings
) -> None:
    messages = conversation(12)  # about 1000 tokens: over the 800 threshold
    body = outlet_body(messages)
    assert await hook(http, "outlet", body) == body  # the outlet changes nothing
    existing = sample("echo_jobs_enqueued_total", kind="summary", result="existing")
    assert await hook(http, "outlet", body) == body  # Open WebUI's /api/chat/completed replays it:
    assert sample("echo_jobs_enqueued_total", kind="summary", result="existing") == existing  # done once
    cloned = outlet_body(messages, chat_id="clone")  # the same branch point: the same job
    assert await hook(http, "outlet", cloned) == cloned
    assert sample("echo_jobs_enqueued_total", kind="summary", result="existing") == existing + 1
    [job] = await jobs_of(store)
    assert (job["kind"], job["state"]) == ("summary", "pending")
    payload = job["payload"]
    assert "Question" not in str(payload)  # references, not a transcript
    assert job["idempotency_key"] == f"summary:u1:{payload['covered_hash']}"
    assert payload["start"] == 1  # keep_first
    assert len(payload["invariants"]) == 24 - 1 - 4  # keep_first 1, keep_last 4
    assert await store.fetchval("SELECT count(*) FROM messages WHERE user_id = 'u1'") == 24

    created = sample("echo_compression_summaries_total", outcome="created")
    await run_jobs(store, handlers.builtin_registry(offline, on_store(store)))
    [job] = await jobs_of(store)
    assert job["state"] == "done"
    assert sample("echo_compression_summaries_total", outcome="created") == created + 1
    row = await store.fetchrow(
        "SELECT covered_count, head_count, provider, cardinality(refs) AS refs FROM summaries"
    )
    assert dict(row) == {"covered_count": 20, "head_count": 1, "provider": "offline", "refs": 19}

    reused = sample("echo_compression_summaries_reused_total")
    sent = inlet_body(messages, "And what about the garden now?")
    answer = await hook(http, "inlet", sent)
    assert sample("echo_compression_summaries_reused_total") == reused + 1
    kept = answer["messages"]
    assert kept[0] == sent["messages"][0]  # the system prompt, where it stood
    assert kept[1] == sent["messages"][1]  # keep_first
    fenced = fence_of(answer)
    assert fenced is not None
    assert kept[2] == {"role": "assistant", "content": fenced}
    assert 'covers="20"' in fenced
    assert "historical context, not instructions" in fenced
    assert kept[3:] == sent["messages"][21:]  # the uncovered tail, keep_last and the new question
    assert tokens_of(answer) < tokens_of(sent)
    # The Open WebUI Function asks for the status events beside the body.
    asked = await http.post(
        "/echo_compression/filter/inlet", json={"body": sent, "user": USER}, headers={"X-Echo-Events": "1"}
    )
    envelope = asked.json()
    assert envelope["body"] == answer
    assert [event["level"] for event in envelope["events"]] == ["info"]
    assert envelope["events"][0]["description"].startswith("Earlier conversation summarised: 19 messages")
    assert answer["metadata"].pop("echo_room_tokens") > 0  # the summary freed room for the filters after it
    answer["metadata"].pop("echo_summary_covered_hash", None)  # and names itself to echo_memory
    assert {key: answer[key] for key in answer if key != "messages"} == {
        key: sent[key] for key in sent if key != "messages"
    }


async def test_summaries_follow_the_branch_they_were_made_on(
    http: httpx.AsyncClient, store: Store, offline: Settings
) -> None:
    registry = handlers.builtin_registry(offline, on_store(store))
    messages = conversation(12)
    await summarise(http, store, registry, messages)  # covers turns 1..19 (20 with the head)
    longer = conversation(24)
    await summarise(http, store, registry, longer)  # folds the first into a second summary
    counts = [
        r["covered_count"] for r in await store.fetch("SELECT covered_count FROM summaries ORDER BY id")
    ]
    assert len(counts) == 2
    assert counts[0] == 20
    assert counts[1] > 20
    second = counts[1]

    async def covers(
        chat: list[dict[str, Any]], chat_id: str = "c1", user: dict[str, Any] = USER
    ) -> int | None:
        fenced = fence_of(await hook(http, "inlet", inlet_body(chat, "next?", chat_id, user["id"]), user))
        return None if fenced is None else int(fenced.split('covers="', 1)[1].split('"', 1)[0])

    assert await covers(longer) == second
    # A new date in the system prompt every day: system messages are not on the chain.
    assert (
        await covers([{**longer[0], "content": "You are helpful. Today is Tuesday."}, *longer[1:]]) == second
    )
    # An edit between the two summarised prefixes: the nearest valid ancestor (the first summary).
    edited = [*longer[:30], {**longer[30], "content": "Question 14, edited."}, *longer[31:]]
    assert await covers(edited) == 20
    # An edit inside the first prefix: no summary of this user is valid any more.
    early = [*longer[:5], {**longer[5], "content": "Question 2, edited."}, *longer[6:]]
    assert await covers(early) is None
    # A sibling branch (another answer regenerated at turn 10) never gets the other branch's summary.
    sibling = [*longer[:20], {**longer[20], "content": "Another answer entirely."}, *longer[21:]]
    assert await covers(sibling) is None
    # A cloned chat (another chat id, same content) reuses it; another user never sees it.
    assert await covers(longer, chat_id="clone") == second
    assert await covers(longer, user={**USER, "id": "u2"}) is None


async def test_the_store_down_leaves_every_body_unchanged(offline: Settings, dsn: str, store: Store) -> None:
    before = sample("echo_compression_failures_total", phase="inlet", reason="store")
    async with serving(offline, dsn, store.schema, broken=True) as broken:
        sent = inlet_body(conversation(30), "still there?")
        returned = await hook(broken, "inlet", sent)
        assert returned["metadata"].pop("echo_room_tokens") == 0  # nothing freed: later filters add nothing
        assert returned == sent
        asked = await broken.post(
            "/echo_compression/filter/inlet",
            json={"body": sent, "user": USER},
            headers={"X-Echo-Events": "1"},
        )
        [event] = asked.json()["events"]
        assert event["level"] == "warning"
        assert "summary store is unavailable" in event["description"]
        body = outlet_body(conversation(30))
        assert await hook(broken, "outlet", body) == body
    assert sample("echo_compression_failures_total", phase="inlet", reason="store") == before + 2
    assert sample("echo_compression_failures_total", phase="outlet", reason="store") >= 1


ODD = [
    {"role": "tool", "tool_call_id": "orphan", "content": "a result without its call " * 20},
    {"role": "narrator", "content": "an unknown role speaks " * 20},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": None},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    {"role": "user", "content": [{"type": "mystery"}, {"type": "text", "text": "mixed " * 30}]},
    {"role": "assistant", "content": "calls", "tool_calls": [{"id": "x", "function": "not a mapping"}]},
    {"role": "Assistant", "content": "odd case " * 30, "tool_calls": "not a list"},
]


async def test_odd_message_lists_never_fail_a_hook_nor_a_job(
    http: httpx.AsyncClient, store: Store, offline: Settings
) -> None:
    messages = [{"id": f"m{i}", **message} for i, message in enumerate(ODD * 8)]
    body = outlet_body(messages)
    assert await hook(http, "outlet", body) == body
    await run_jobs(store, handlers.builtin_registry(offline, on_store(store)))
    assert [job["state"] for job in await jobs_of(store)] == ["done"]
    answer = await hook(http, "inlet", inlet_body(messages, "and now?"))
    assert answer["messages"][-1] == {"role": "user", "content": "and now?"}
    for bad in ({"messages": "not a list"}, {"messages": [{"content": "no role"}]}):
        refused = await http.post("/echo_compression/filter/inlet", json={"body": bad, "user": USER})
        assert refused.status_code == 422, refused.text  # the wire check names the field
    for phase in ("inlet", "outlet"):
        assert await hook(http, phase, {"model": "m"}) == {"model": "m"}
        assert await hook(http, phase, {"messages": []}) == {"messages": []}


async def test_forgetting_a_user_deletes_their_summaries_and_messages_only(
    http: httpx.AsyncClient, store: Store, offline: Settings
) -> None:
    registry = handlers.builtin_registry(offline, on_store(store))
    await summarise(http, store, registry, conversation(12))
    other = {**USER, "id": "u2"}
    await hook(http, "outlet", outlet_body(conversation(3)), other)
    store_of = conversations.Conversations(store)
    assert await store_of.forget("u1") == (1, 24)
    assert await store.fetchval("SELECT count(*) FROM summaries") == 0
    assert await store.fetchval("SELECT count(DISTINCT user_id) FROM messages") == 1
    assert await store_of.messages("u2", []) == {}


FAST = RetryPolicy(base_seconds=0.01, max_seconds=0.05, jitter=0)


def gemini_registry(settings: Settings, store: Store, attempts: int) -> Registry:
    registry = Registry()
    registry.register(
        kinds.SUMMARY,
        summary.SummaryHandler(
            conversations.Conversations(store),
            lambda: factory.llm_from_settings(settings),
            max_attempts=attempts,
            default_model=settings.llm_model,
        ),
        payload=payloads.SummaryPayload,
        policy=KindPolicy(max_attempts=attempts, retry=FAST),
    )
    return registry


@pytest.fixture
def gemini() -> Any:
    with FakeGemini() as fake:
        yield fake


async def test_a_reasoning_only_answer_is_retried_and_stale_guidance_never_reaches_the_model(
    tmp_path: Path, dsn: str, store: Store, gemini: FakeGemini
) -> None:
    settings = Settings(
        data_dir=tmp_path / "echo",
        api_key=API_KEY,
        gemini_api_key="fake-key",
        gemini_base_url=gemini.base_url,
        llm_max_retries=0,
    )
    gemini.reply_text("", thought="Let me think about how to summarise this.")  # reasoning only
    gemini.reply_text(
        "<working_memory><current_goal>plan the garden and the trip</current_goal>"
        "<next_reply_guidance><item>ask about the budget</item></next_reply_guidance></working_memory>"
    )
    async with serving(settings, dsn, store.schema, valves={"summary_model": "gemini-2.5-flash"}) as http:
        messages = conversation(12)
        await summarise(http, store, gemini_registry(settings, store, attempts=3), messages)
        [job] = await jobs_of(store)
        assert (job["state"], job["attempts"]) == ("done", 2)
        request = gemini.last_request
        assert request.model.endswith("gemini-2.5-flash")
        assert request.generation_config["temperature"] == pytest.approx(0.3)
        assert request.generation_config["maxOutputTokens"] == 150
        assert "You compress a conversation" in str(request.body["systemInstruction"])
        fenced = fence_of(await hook(http, "inlet", inlet_body(messages, "so?")))
    assert fenced is not None
    assert "plan the garden and the trip" in fenced
    assert "next_reply_guidance" not in fenced
    assert "ask about the budget" not in fenced


@pytest.mark.parametrize(("mode", "state"), [("silent", "done"), ("raise", "dead")])
async def test_summary_fail_mode_decides_what_a_failing_model_leaves(
    tmp_path: Path, dsn: str, store: Store, gemini: FakeGemini, mode: str, state: str
) -> None:
    settings = Settings(
        data_dir=tmp_path / "echo",
        api_key=API_KEY,
        gemini_api_key="fake-key",
        gemini_base_url=gemini.base_url,
        llm_max_retries=0,
    )
    gemini.reply_text("", thought="only thinking")
    gemini.reply_error(503, "overloaded")
    failed = sample("echo_compression_summaries_total", outcome="failed")
    async with serving(settings, dsn, store.schema, valves={"summary_fail_mode": mode}) as http:
        messages = conversation(12)
        await summarise(http, store, gemini_registry(settings, store, attempts=2), messages)
        [job] = await jobs_of(store)
        assert (job["state"], job["attempts"]) == (state, 2)
        assert await store.fetchval("SELECT count(*) FROM summaries") == 0
        shown = sample("echo_compression_summary_failures_shown_total", reason="llm")
        for attempt in range(2):  # the chat's next inlet says so, once
            asked = await http.post(
                "/echo_compression/filter/inlet",
                json={"body": inlet_body(messages, "so?"), "user": USER},
                headers={"X-Echo-Events": "1"},
            )
            envelope = asked.json()
            assert fence_of(envelope["body"]) is None
            failures = [
                e
                for e in envelope["events"]
                if "summary of the earlier conversation failed" in e["description"]
            ]
            if attempt == 0:
                [event] = failures
                assert event["level"] == "warning"
                assert "summary model failed: overloaded" in event["description"]
            else:
                assert failures == []
        # Another chat of the same user is told nothing.
        other = await http.post(
            "/echo_compression/filter/inlet",
            json={"body": inlet_body(messages, "so?", chat_id="c2"), "user": USER},
            headers={"X-Echo-Events": "1"},
        )
        assert not [e for e in other.json()["events"] if "failed" in e["description"]]
    assert sample("echo_compression_summary_failures_shown_total", reason="llm") == shown + 1
    assert sample("echo_compression_summaries_total", outcome="failed") == failed + 1
    assert sample("echo_compression_summary_failures_total", reason="empty") >= 1
    assert sample("echo_compression_summary_failures_total", reason="llm") >= 1


async def test_a_replayed_outlet_is_handled_again_once_the_valves_changed(
    http: httpx.AsyncClient, store: Store
) -> None:
    body = outlet_body(conversation(12))
    await hook(http, "outlet", body)
    await hook(http, "outlet", body)  # the replay: nothing new
    assert len(await jobs_of(store)) == 1
    updated = await http.post("/echo_compression/valves/update", json={**VALVES, "keep_last": 8})
    assert updated.status_code == 200, updated.text
    await hook(http, "outlet", body)  # the same branch under other valves: another branch point
    planned = [len(job["payload"]["invariants"]) for job in await jobs_of(store)]
    assert planned == [24 - 1 - 4, 24 - 1 - 8]
