"""Large requests leave the event loop free (issue 18, part 9): a large body is decoded, parsed, checked
and answered on worker threads, in bounded steps; the in-process worker's CPU-bound steps (a summary
of thousands of turns, a large window's distillation) run on threads too. Checked by where the work
runs (spies on the functions that do it), not by how long anything takes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.live_server import LiveServer

from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.llm.offline import OfflineLLM
from echo.adapters.store import conversations, memories
from echo.adapters.store.pool import Store
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities.compression import payloads as compression_payloads
from echo.capabilities.compression import summary
from echo.capabilities.masking import filter as masking_filter
from echo.capabilities.memory import distill
from echo.capabilities.memory import filter as memory_filter
from echo.capabilities.memory import payloads as memory_payloads
from echo.config.settings import Settings
from echo.domain import chain, kinds
from echo.domain import jobs as domain
from echo.domain.compression import budgets, fitting
from echo.domain.compression import messages as msgs
from echo.domain.memory import cleaning
from echo.entrypoints.http import create_app, stepwise_json, wire
from echo.ports import llm
from echo.queue import queue

LOOP_THREAD = "loop-under-test"
GOOGLE_KEY = "AIza" + "SyD" + "x7" * 16


class Threads:
    """The names of the threads each spied function ran on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.seen: dict[str, list[str]] = {}

    def spy(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)
        key = f"{owner.__name__}.{name}"

        def spied(*args: Any, **kwargs: Any) -> Any:
            self.seen.setdefault(key, []).append(threading.current_thread().name)
            return original(*args, **kwargs)

        self.monkeypatch.setattr(owner, name, spied)

    def ran_off(self, key: str, loop_thread: str) -> bool:
        names = self.seen.get(key, [])
        return bool(names) and loop_thread not in names


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> Threads:
    return Threads(monkeypatch)


@pytest.fixture
def server(settings: Settings) -> Iterator[LiveServer]:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    valves = {"echo_context": {"OUTLET_DEADLINE_MS": 1}}  # its outlets fail: the fallback is measured too
    (settings.data_dir / "valves.json").write_text(json.dumps(valves))
    with LiveServer(create_app(settings), name=LOOP_THREAD) as live:
        yield live


def filter_request(messages: list[dict[str, Any]]) -> bytes:
    body = {"model": "gemini-2.5-flash", "chat_id": "c1", "messages": messages}
    return json.dumps({"body": body, "user": {"id": "u1"}}).encode()


def many(count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about rivers"}
        for i in range(count)
    ]


def post(server: LiveServer, auth: dict[str, str], path: str, raw: bytes) -> httpx.Response:
    headers = {**auth, "Content-Type": "application/json"}
    return httpx.post(f"{server.url}{path}", content=raw, headers=headers, timeout=60)


def test_a_large_body_is_read_checked_and_answered_off_the_loop(
    server: LiveServer, auth: dict[str, str], threads: Threads
) -> None:
    threads.spy(wire, "_parsed_and_checked")
    threads.spy(wire, "plainly_a_filter_request")
    threads.spy(stepwise_json, "render")
    messages = many(6000)
    raw = filter_request(messages)
    assert len(raw) > wire.THREAD_BYTES
    answer = post(server, auth, "/echo_memory/filter/inlet", raw)  # no store: the body comes back
    assert answer.status_code == 200
    assert answer.content == wire.render_json(json.loads(raw)["body"])
    for step in ("_parsed_and_checked", "plainly_a_filter_request", "render"):
        owner = "echo.entrypoints.http.stepwise_json" if step == "render" else "echo.entrypoints.http.wire"
        assert threads.ran_off(f"{owner}.{step}", LOOP_THREAD), (step, threads.seen)


def test_a_small_body_is_read_on_the_loop(server: LiveServer, auth: dict[str, str], threads: Threads) -> None:
    threads.spy(wire, "_parsed_and_checked")
    threads.spy(stepwise_json, "render")
    raw = filter_request(many(20))
    answer = post(server, auth, "/echo_memory/filter/inlet", raw)
    assert answer.status_code == 200
    assert answer.content == wire.render_json(json.loads(raw)["body"])
    assert threads.seen == {}  # below wire.THREAD_BYTES, the hop to a thread costs more than it frees


def test_a_large_malformed_body_gets_the_422_a_small_one_gets(
    server: LiveServer, auth: dict[str, str]
) -> None:
    messages = many(6000)
    del messages[4321]["role"]
    answer = post(server, auth, "/echo_memory/filter/inlet", filter_request(messages))
    assert answer.status_code == 422
    assert "body.body.messages.4321.role: Field required" in answer.json()["detail"]["message"]
    raw = filter_request(many(6000))
    broken = raw.replace(b'}, {"id": "m4000"', b'} {"id": "m4000"', 1)  # a comma left out, far in
    assert len(broken) == len(raw) - 1
    answer = post(server, auth, "/echo_memory/filter/inlet", broken)
    assert answer.status_code == 422
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(broken)
    assert answer.json()["detail"]["message"] == f"body: malformed JSON: {expected.value}"


def test_a_large_outlet_that_fails_withholds_off_the_loop(
    server: LiveServer, auth: dict[str, str], threads: Threads
) -> None:
    threads.spy(masking_filter, "withhold_suspect")
    messages = [*many(6000), {"id": "a", "role": "assistant", "content": f"the key: {GOOGLE_KEY}"}]
    answer = post(server, auth, "/echo_context/filter/outlet", filter_request(messages))
    assert answer.status_code == 200
    assert GOOGLE_KEY not in answer.text  # its 1 ms deadline passed: what may hold a secret is withheld
    assert threads.ran_off("echo.capabilities.masking.filter.withhold_suspect", LOOP_THREAD), threads.seen


class _Answering:
    """An LLM that answers at once."""

    provider_name = "fake"

    async def generate(self, request: llm.LLMRequest) -> llm.LLMResult:
        return llm.LLMResult(
            text="The user and the assistant talked about rivers.", provider="fake", model="m"
        )

    async def aclose(self) -> None:
        return None


async def test_a_summary_jobs_cpu_bound_steps_run_off_the_loop(
    store: Store, threads: Threads, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary, "THREAD_TURNS", 4)
    threads.spy(fitting, "fit_summary_input")
    threads.spy(chain, "cumulative_hash")
    messages = many(24)
    turns = msgs.conversation_turns(messages)
    known = conversations.Conversations(store)
    stored = {
        link.invariant: conversations.stored_message(m) for link, m in zip(turns.links, messages, strict=True)
    }
    await known.remember("u1", stored)
    await known.record_head("u1", "c1", [link.invariant for link in turns.links[:20]])
    spec = compression_payloads.SummaryPayload(
        user_id="u1",
        head_count=1,
        start=1,
        parent=turns.hashes[0],
        invariants=tuple(link.invariant for link in turns.links[1:20]),
        covered_hash=turns.hashes[19],
        previous=None,
        model="m",
        window=budgets.SummaryWindow(input_tokens=20_000, output_tokens=300, source="test"),
        chat_id="c1",
    )
    handler = summary.SummaryHandler(known, _Answering, max_attempts=3, default_model="m")
    here = threading.current_thread().name
    threads.seen.clear()  # the chat was hashed and stored here
    await handler(domain.Job(id=1, kind="summary", payload=spec.to_payload(), attempts=1), spec)
    assert await store.fetchval("SELECT count(*) FROM summaries") == 1
    assert threads.ran_off("echo.domain.compression.fitting.fit_summary_input", here), threads.seen
    assert threads.ran_off("echo.domain.chain.cumulative_hash", here), threads.seen


class _Backends:
    def __init__(self) -> None:
        self._embedder, self._vectors = FakeEmbedder(dimension=16), InMemoryVectorStore(dimension=16)

    def embedder(self) -> Any:
        return self._embedder

    async def vectors(self) -> Any:
        return self._vectors


async def test_a_large_windows_distillation_cleans_and_checks_off_the_loop(
    store: Store, threads: Threads, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(distill, "THREAD_MESSAGES", 4)
    threads.spy(cleaning, "clean_messages")
    threads.spy(chain, "cumulative_hash")
    messages = [
        {"role": "user", "content": "I moved to Lyon last spring and I work as a nurse at the hospital."},
        {"role": "assistant", "content": "Lyon is a lovely city; how do you like the night shifts?"},
        {"role": "user", "content": "I like them, and my sister Claire visits me every month."},
        {"role": "assistant", "content": "That sounds lovely. Does Claire live far from Lyon?"},
        {"role": "user", "content": "She lives in Grenoble, an hour away by train."},
    ]
    links = chain.build_chain(messages)
    await conversations.Conversations(store).remember(
        "u1",
        {link.invariant: conversations.stored_message(m) for link, m in zip(links, messages, strict=True)},
    )
    spec = memory_payloads.DistillPayload(
        user_id="u1",
        chat_id="c1",
        key=links[-1].cumulative,
        start=0,
        parent=None,
        invariants=tuple(link.invariant for link in links),
    )
    jobs = queue.JobQueue(store)
    await jobs.enqueue(
        kinds.DISTILL, spec.to_payload(), idempotency_key=memory_filter.distill_job_key("u1", spec.key)
    )
    claimed = await jobs.claim("w1", [kinds.DISTILL], 30)
    assert claimed is not None
    here = threading.current_thread().name
    threads.seen.clear()  # build_chain above hashed here
    run = distill.DistillHandler(
        conversations.Conversations(store), memories.Memories(store), store, OfflineLLM, _Backends()
    )
    await run(claimed.job, spec)
    # the window is recorded once, and each of its facts once beside it (one memory per fact)
    assert await store.fetchval("SELECT count(*) FROM memory_windows WHERE window_key = $1", spec.key) == 1
    facts = await store.fetchval("SELECT count(*) FROM memory_windows WHERE window_key <> $1", spec.key)
    assert facts >= 1
    assert facts == await store.fetchval("SELECT count(*) FROM memories WHERE user_id = 'u1'")
    assert threads.ran_off("echo.domain.memory.cleaning.clean_messages", here), threads.seen
    assert threads.ran_off("echo.domain.chain.cumulative_hash", here), threads.seen
