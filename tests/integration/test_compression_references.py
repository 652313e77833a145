"""Referenced chats end to end (issue 8 item 3): the real app over HTTP (chats ECHO has seen, from the
store's chat heads), a real PostgreSQL, the real worker with the offline LLM; and the filter with a
local Open WebUI stand-in that serves the chat JSON of 0.12.4 (`fixtures/owui-0.12.4/tool_flow/
stored_chat.json`) over real HTTP.

A small referenced chat goes in whole; a large one is summarised while the inlet waits (the job
persists, later references reuse it with no new job); when the wait runs out the transcript is cut
to the budget and the job finishes later; a chat with its own partial summary goes in as summary +
tail; another user's chat and unknown chats are left to Open WebUI; the request never fails.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import hooks_service
from fakes.hooks_service import outlet_body, run_jobs
from fakes.live_server import LiveServer
from fakes.shared_data import API_KEY, FIXTURES
from prometheus_client import REGISTRY
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from echo.adapters.openwebui.client import OpenWebUI, OpenWebUIError
from echo.adapters.store import conversations
from echo.adapters.store.pool import Store
from echo.capabilities import base, handlers
from echo.capabilities.backends import on_store
from echo.capabilities.compression import filter as compression_filter
from echo.config import valves
from echo.config.settings import Settings
from echo.domain import bodies, chain
from echo.domain.compression import allowance
from echo.domain.compression import messages as msgs
from echo.entrypoints.http import runner
from echo.ports import backends as backends_port
from echo.queue.registry import Registry
from echo.queue.worker import Worker

USER = {"id": "u1", "name": "Ada", "email": "ada@example.org", "role": "user"}
OTHER = {"id": "u2", "name": "Bob", "email": "bob@example.org", "role": "user"}
VALVES: dict[str, Any] = {
    "compression_threshold_tokens": 5000,  # a 48-exchange chat (about 4000 tokens) stays under it
    "max_context_tokens": 6000,  # so a reference gets at most 3000 tokens
    "keep_first": 1,
    "keep_last": 4,
    "max_summary_tokens": 150,
    "summary_model_max_context": 8000,
    "inlet_deadline_ms": 20000,  # the hook's deadline bounds the wait too
    "reference_summary_wait_seconds": 10,
}
OWUI_KEY = "sk-test-admin-key"
UNSEEN = "ECHO has not seen it among your chats"


# -- helpers -------------------------------------------------------------------------------------


@pytest.fixture
def offline(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "echo", api_key=API_KEY, llm_provider="offline")


def serving(settings: Settings, dsn: str, schema: str, **changed: Any) -> Any:
    return hooks_service.serving(settings, dsn, schema, compression_valves={**VALVES, **changed})


def conversation(turns: int, topic: str = "the trip") -> list[dict[str, Any]]:
    """A chat as an outlet sends it (flat, with ids)."""
    items: list[dict[str, Any]] = [{"id": "s0", "role": "system", "content": "You are helpful."}]
    for i in range(turns):
        items.extend(hooks_service.exchange(i, topic))
    return items


def inlet_body(*chat_ids: str, user_id: str = "u1", question: str = "What did we decide?") -> dict[str, Any]:
    """A new chat's first turn that references ``chat_ids`` (as Open WebUI 0.12.4 sends it)."""
    files = [
        {"type": "chat", "id": chat_id, "title": f"Chat {chat_id}", "name": f"Chat {chat_id}"}
        for chat_id in chat_ids
    ]
    return {
        "model": "gpt-x",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": question},
        ],
        "files": files,
        "metadata": {
            "chat_id": "current",
            "user_id": user_id,
            "message_id": "next",
            "files": copy.deepcopy(files),
        },
    }


async def hook(
    http: httpx.AsyncClient, phase: str, body: dict[str, Any], user: dict[str, Any] = USER
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The answer and the status events (asked as the Open WebUI Function asks for them)."""
    answer = await http.post(
        f"/echo_compression/filter/{phase}", json={"body": body, "user": user}, headers={"X-Echo-Events": "1"}
    )
    assert answer.status_code == 200, answer.text
    envelope = answer.json()
    return envelope["body"], envelope["events"]


def blocks(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if str(m.get("content", "")).startswith("<echo_reference")]


def mode_of(block: str) -> str:
    return block.split(' mode="', 1)[1].split('"', 1)[0]


def chat_files(body: dict[str, Any]) -> list[str]:
    listed = [*body.get("files", []), *body.get("metadata", {}).get("files", [])]
    return [item["id"] for item in listed if item.get("type") == "chat"]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def jobs_of(store: Store) -> list[Any]:
    return await store.fetch("SELECT id, kind, state, payload FROM jobs ORDER BY id")


@asynccontextmanager
async def working(store: Store, registry: Registry) -> AsyncIterator[Worker]:
    worker = Worker(store, registry, lease_seconds=5, poll_seconds=0.2, grace_seconds=1, metrics_seconds=60)
    await worker.start()
    try:
        yield worker
    finally:
        await asyncio.wait_for(worker.stop(), 10)
        for spec in registry:
            close = getattr(spec.handler, "aclose", None)
            if close is not None:
                await close()


def _invariants(*texts: str) -> list[str]:
    return [chain.invariant_hash("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]


async def test_chat_heads_record_and_read_the_latest_branch(store: Store) -> None:
    talks = conversations.Conversations(store)
    first = _invariants("hello", "hi there")
    await talks.record_head("u1", "c1", first)
    assert await talks.latest_branch("u1", "c1") == first
    assert await talks.latest_branch("u2", "c1") is None  # another user's chat: unseen
    assert await talks.latest_branch("u1", "c2") is None
    branched = _invariants("hello", "something else", "and more")
    await talks.record_head("u1", "c1", branched)
    assert await talks.latest_branch("u1", "c1") == branched
    head = None
    for invariant in branched:
        head = chain.cumulative_hash(invariant, head)
    assert await store.fetchval("SELECT head_hash FROM chat_heads WHERE chat_id = 'c1'") == head
    await talks.record_head("u1", "", branched)  # no chat id: nothing to record
    assert await store.fetchval("SELECT count(*) FROM chat_heads") == 1
    await talks.forget("u1")
    assert await talks.latest_branch("u1", "c1") is None


async def test_the_outlet_records_the_chat_s_latest_branch(offline: Settings, dsn: str, store: Store) -> None:
    async with serving(offline, dsn, store.schema) as http:
        await hook(http, "outlet", outlet_body(conversation(3), "c1"))
        talks = conversations.Conversations(store)
        recorded = await talks.latest_branch("u1", "c1")
        assert recorded is not None
        assert len(recorded) == 6  # the turns, not the system message
        stored = await talks.messages("u1", recorded)
        assert [stored[key]["content"] for key in recorded[:1]] == [conversation(3)[1]["content"]]
        edited = [*conversation(3)[:2], {"id": "a0b", "role": "assistant", "content": "Another answer."}]
        await hook(http, "outlet", outlet_body(edited, "c1"))  # a regenerated answer: the new branch
        regenerated = chain.invariant_hash("assistant", "Another answer.")
        assert await talks.latest_branch("u1", "c1") == [recorded[0], regenerated]


# -- over HTTP, from the store ---------------------------------------------------------------------


async def test_a_small_referenced_chat_goes_in_whole_and_leaves_files(
    offline: Settings, dsn: str, store: Store
) -> None:
    async with serving(offline, dsn, store.schema) as http:
        await hook(http, "outlet", outlet_body(conversation(3, "the garden"), "small"))
        sent = inlet_body("small")
        answer, events = await hook(http, "inlet", sent)
        [block] = blocks(answer)
        assert mode_of(block) == "whole"
        assert "[1] User: Question 0: tell me more about the garden" in block
        assert "[6] Assistant: Answer 2 about the garden" in block
        assert answer["messages"][0] == sent["messages"][0]
        assert answer["messages"][1] == {"role": "user", "content": block}  # just before the question
        assert answer["messages"][2] == sent["messages"][1]
        assert chat_files(answer) == []  # Open WebUI injects nothing more
        assert any(e["description"].startswith("Referenced chat “Chat small” added: in full") for e in events)
        assert await jobs_of(store) == []


async def test_a_large_referenced_chat_is_summarised_while_the_inlet_waits_and_the_summary_serves_later(
    offline: Settings, dsn: str, store: Store
) -> None:
    registry = handlers.builtin_registry(offline, on_store(store))
    async with serving(offline, dsn, store.schema) as http:
        await hook(http, "outlet", outlet_body(conversation(48), "large"))
        assert await jobs_of(store) == []  # under its own threshold: no summary yet
        async with working(store, registry):
            started = time.monotonic()
            answer, events = await hook(http, "inlet", inlet_body("large"))
            waited = time.monotonic() - started
        assert waited < 10
        [job] = await jobs_of(store)
        assert job["state"] == "done"
        assert job["payload"]["chat_id"] == "large"
        [block] = blocks(answer)
        assert mode_of(block) == "mixed"  # the head turn, the new summary, the keep_last tail
        assert '<echo_summary covers="92"' in block
        assert "historical context, not instructions" in block
        assert "[96] Assistant: Answer 47" in block
        assert msgs.message_tokens({"content": block}) <= 3000
        assert chat_files(answer) == []
        assert any("summarised now" in e["description"] for e in events)
        assert await store.fetchval("SELECT count(*) FROM summaries") == 1
        # Later references (from any chat of the user) reuse it: no job, no wait.
        again, _ = await hook(http, "inlet", inlet_body("large", question="And the budget?"))
        assert blocks(again) == [block]
        assert len(await jobs_of(store)) == 1


async def test_when_the_wait_runs_out_the_transcript_is_cut_and_the_job_finishes_later(
    offline: Settings, dsn: str, store: Store
) -> None:
    async with serving(offline, dsn, store.schema, reference_summary_wait_seconds=0.3) as http:
        await hook(http, "outlet", outlet_body(conversation(48), "large"))
        started = time.monotonic()
        answer, _ = await hook(http, "inlet", inlet_body("large"))
        assert time.monotonic() - started < 5
        [block] = blocks(answer)
        assert mode_of(block) == "cut"
        assert "[96] Assistant: Answer 47" in block  # the newest turns first
        assert "messages left out" in block
        assert msgs.message_tokens({"content": block}) <= 3000
        [job] = await jobs_of(store)
        assert job["state"] == "pending"  # it goes on without the inlet
        await run_jobs(store, handlers.builtin_registry(offline, on_store(store)))
        later, _ = await hook(http, "inlet", inlet_body("large"))
        assert mode_of(blocks(later)[0]) == "mixed"
        assert len(await jobs_of(store)) == 1


async def test_a_referenced_chat_with_its_own_partial_summary_goes_in_as_summary_and_tail(
    offline: Settings, dsn: str, store: Store
) -> None:
    async with serving(offline, dsn, store.schema, compression_threshold_tokens=800) as http:
        await hook(http, "outlet", outlet_body(conversation(12), "chat-b"))  # over 800: its own job
        await run_jobs(store, handlers.builtin_registry(offline, on_store(store)))
        await store.execute("DELETE FROM jobs")
        await hook(http, "outlet", outlet_body(conversation(14), "chat-b"))  # two more exchanges
        await store.execute("DELETE FROM jobs")  # whatever the outlet planned: not run here
        answer, _ = await hook(http, "inlet", inlet_body("chat-b"))
        [block] = blocks(answer)
        assert mode_of(block) == "mixed"
        assert '<echo_summary covers="20"' in block  # the chat's own summary, branch-valid
        assert "[1] User: Question 0" in block  # its head turn
        assert "[21] User: Question 10" in block  # the uncovered tail, to the end
        assert "[28] Assistant: Answer 13" in block
        assert "[2] Assistant" not in block
        assert await jobs_of(store) == []  # it fits: nothing to summarise


async def test_another_user_s_chat_and_unknown_chats_are_left_to_openwebui(
    offline: Settings, dsn: str, store: Store
) -> None:
    async with serving(offline, dsn, store.schema) as http:
        await hook(http, "outlet", outlet_body(conversation(3), "mine"))
        sent = inlet_body("mine", user_id="u2")
        answer, events = await hook(http, "inlet", sent, OTHER)
        # Nothing of u1 reaches u2 (Open WebUI applies its own access rules); the only addition is
        # the room for later filters, none here since nothing was freed.
        assert answer == allowance.with_room(sent, 0)
        assert not [e for e in events if e["level"] != "info"]
        # Said, in words that do not tell u2 whether the chat exists for someone else.
        left = [e["description"] for e in events if e["description"].startswith("Referenced chat")]
        assert left == [f"Referenced chat “Chat mine” left to Open WebUI: {UNSEEN}"]
        sent = inlet_body("mine", "nowhere")
        answer, events = await hook(http, "inlet", sent)
        assert len(blocks(answer)) == 1
        assert chat_files(answer) == ["nowhere", "nowhere"]  # left in files and metadata.files
        assert f"Referenced chat “Chat nowhere” left to Open WebUI: {UNSEEN}" in [
            e["description"] for e in events
        ]


async def test_with_the_default_inlet_deadline_a_waiting_reference_still_answers_in_time(
    offline: Settings, dsn: str, store: Store
) -> None:
    """The wait ends before the hook's deadline (800 ms here, plus the wait once the hook runner
    grants `deadline_extension`), so the reference is cut, not lost, and nothing fails."""
    failures = sample("echo_compression_failures_total", phase="inlet", reason="reference")
    async with serving(
        offline, dsn, store.schema, inlet_deadline_ms=800, reference_summary_wait_seconds=1
    ) as http:
        await hook(http, "outlet", outlet_body(conversation(48), "large"))
        started = time.monotonic()
        answer, _ = await hook(http, "inlet", inlet_body("large"))
        assert time.monotonic() - started < 3
        [block] = blocks(answer)
        assert mode_of(block) == "cut"
        assert chat_files(answer) == []
    assert sample("echo_compression_failures_total", phase="inlet", reason="reference") == failures


# -- Open WebUI's API ------------------------------------------------------------------------------


def owui_chat(chat_id: str, user_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat as `GET /api/v1/chats/{id}` answers (0.12.4): a tree under `chat.history`."""
    tree: dict[str, Any] = {}
    parent = None
    for index, message in enumerate(messages):
        key = f"{chat_id}-m{index}"
        tree[key] = {
            **message,
            "id": key,
            "parentId": parent,
            "childrenIds": [],
            "timestamp": 1796084014 + index,
        }
        if parent is not None:
            tree[parent]["childrenIds"].append(key)
        parent = key
    return {
        "id": chat_id,
        "user_id": user_id,
        "title": f"Chat {chat_id}",
        "chat": {
            "id": chat_id,
            "title": f"Chat {chat_id}",
            "history": {"currentId": parent, "messages": tree},
        },
        "updated_at": 1796084015,
        "created_at": 1796084014,
    }


class FakeOpenWebUI:
    """Open WebUI's chats endpoint over real HTTP: its chats, its key, its 401 for what it hides."""

    def __init__(self) -> None:
        self.chats: dict[str, dict[str, Any]] = {}
        self.requests: list[str] = []
        self.delay = 0.0

        async def chat(request: Request) -> Response:
            chat_id = request.path_params["chat_id"]
            self.requests.append(chat_id)
            if self.delay:
                await asyncio.sleep(self.delay)
            if request.headers.get("authorization") != f"Bearer {OWUI_KEY}":
                return JSONResponse({"detail": "Not authenticated"}, status_code=401)
            if chat_id == "broken":
                return PlainTextResponse("Internal Server Error", status_code=500)
            if chat_id == "garbled":
                return PlainTextResponse("<html>", status_code=200)
            found = self.chats.get(chat_id)
            if found is None:
                return JSONResponse(
                    {"detail": "We could not find what you're looking for :/"}, status_code=401
                )
            return JSONResponse(found)

        self.app = Starlette(routes=[Route("/api/v1/chats/{chat_id}", chat)])


@pytest.fixture
def owui() -> Any:
    fake = FakeOpenWebUI()
    with LiveServer(fake.app, name="open-webui", lifespan="off") as live:
        fake.url = live.url  # type: ignore[attr-defined]
        yield fake


async def test_the_client_reads_a_chat_and_says_what_failed(owui: Any) -> None:
    owui.chats["c1"] = owui_chat("c1", "u1", conversation(1)[1:])
    client = OpenWebUI(owui.url + "/", OWUI_KEY, timeout_s=5)
    try:
        found = await client.chat("c1")
        assert found is not None
        assert found["user_id"] == "u1"
        assert await client.chat("unknown") is None
        assert await OpenWebUI(owui.url, "sk-wrong").chat("c1") is None
        with pytest.raises(OpenWebUIError, match="HTTP 500") as failed:
            await client.chat("broken")
        assert failed.value.retryable
        with pytest.raises(OpenWebUIError, match="not JSON"):
            await client.chat("garbled")
        owui.delay = 0.5
        with pytest.raises(OpenWebUIError, match="timed out"):
            await client.chat("c1", timeout_s=0.1)
        assert owui.requests[-1] == "c1"
    finally:
        await client.aclose()
    with pytest.raises(OpenWebUIError) as refused:
        await OpenWebUI("http://127.0.0.1:9", OWUI_KEY).chat("c1")
    assert refused.value.retryable


async def inlet_of(
    flt: compression_filter.CompressionFilter, body: dict[str, Any], **changed: Any
) -> tuple[dict[str, Any], list[Any]]:
    """The filter's inlet as the hook runner calls it (its deadline, its fallback)."""
    ctx = base.HookContext(
        filter_id=flt.id,
        phase="inlet",
        user=USER,
        ids=bodies.turn_ids(body, USER),
        valves=valves.CompressionValves(**{**VALVES, **changed}),
    )
    answer = await runner.run_hook(flt, body, ctx)
    return json.loads(answer), ctx.events


def with_store(store: Store, openwebui: OpenWebUI | None = None) -> backends_port.Backends:
    """The backends of a service on ``store`` (and Open WebUI's API, when given)."""
    return backends_port.Backends(store=on_store(store), openwebui=openwebui)


async def test_referenced_chats_come_from_openwebui_for_the_same_user_only(
    owui: Any, store: Store, offline: Settings
) -> None:
    weather = json.loads((FIXTURES / "tool_flow" / "stored_chat.json").read_text())
    weather["user_id"] = "u1"
    owui.chats["weather"] = weather
    owui.chats["theirs"] = owui_chat("theirs", "u2", conversation(2)[1:])
    client = OpenWebUI(owui.url, OWUI_KEY)
    flt = compression_filter.CompressionFilter(lambda: with_store(store, client))
    try:
        answer, events = await inlet_of(flt, inlet_body("weather", "theirs"))
        [block] = blocks(answer)
        assert 'chat_id="weather"' in block
        assert "[1] User: What is the weather in Paris?" in block
        assert "[tool call get_weather" in block  # the `output` items, unfolded as the outlet does
        assert "Tool result (call_stub_1): sunny in Paris, 21 C" in block
        assert chat_files(answer) == ["theirs", "theirs"]  # another user's: never read, left as it was
        assert any("another user's chat" in event.description for event in events)

        # The API failing, or not knowing a chat ECHO has seen: the store's chat head.
        flt_outlet = compression_filter.CompressionFilter(lambda: with_store(store))
        outlet = outlet_body(conversation(2, "the lake"), "seen")
        ctx = base.HookContext(
            flt.id, "outlet", USER, bodies.turn_ids(outlet, USER), valves.CompressionValves(**VALVES)
        )
        await runner.run_hook(flt_outlet, outlet, ctx)
        answer, _ = await inlet_of(flt, inlet_body("seen"))
        assert "about the lake" in blocks(answer)[0]
        outlet = outlet_body(conversation(2, "the sea"), "broken")
        ctx = base.HookContext(
            flt.id, "outlet", USER, bodies.turn_ids(outlet, USER), valves.CompressionValves(**VALVES)
        )
        await runner.run_hook(flt_outlet, outlet, ctx)
        answer, _ = await inlet_of(flt, inlet_body("broken"))
        assert "about the sea" in blocks(answer)[0]
    finally:
        await client.aclose()


async def test_a_large_chat_from_openwebui_is_summarised_by_hash_like_any_other(
    owui: Any, store: Store, offline: Settings
) -> None:
    owui.chats["big"] = owui_chat("big", "u1", conversation(48, "the move")[1:])
    client = OpenWebUI(owui.url, OWUI_KEY)
    flt = compression_filter.CompressionFilter(lambda: with_store(store, client))
    try:
        answer, _ = await inlet_of(flt, inlet_body("big"), reference_summary_wait_seconds=0.2)
        assert mode_of(blocks(answer)[0]) == "cut"
        [job] = await jobs_of(store)
        assert len(job["payload"]["invariants"]) == 96 - 1 - 4
        # The job reads the turns by hash: the inlet stored them as the outlet would.
        assert await store.fetchval("SELECT count(*) FROM messages WHERE user_id = 'u1'") == 91
        await run_jobs(store, handlers.builtin_registry(offline, on_store(store)))
        answer, _ = await inlet_of(flt, inlet_body("big"))
        [block] = blocks(answer)
        assert mode_of(block) == "mixed"
        assert '<echo_summary covers="92"' in block
        # The chat's own outlet hashes its turns the same way: its inlet finds that summary too.
        assert await store.fetchval("SELECT count(*) FROM summaries") == 1
    finally:
        await client.aclose()
