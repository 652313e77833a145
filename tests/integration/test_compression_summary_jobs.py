"""Summary jobs of one chat on a real PostgreSQL: serialised per chat, the later one building on the
earlier, a superseded one skipped; several handlers (as several workers) share the store; a stored
payload validated once before the handler runs, a malformed one dead at its first attempt."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fakes import hooks_service
from fakes.eventually import eventually
from fakes.metric_samples import sample

from echo.adapters.store import conversations
from echo.adapters.store.pool import Store
from echo.capabilities.compression import payloads, summary
from echo.domain import jobs as domain
from echo.domain import kinds
from echo.domain.compression import budgets
from echo.domain.compression import messages as msgs
from echo.ports import llm
from echo.queue import execution, queue
from echo.queue.registry import Registry

USER = "u1"
CHAT = "c1"
WINDOW = budgets.SummaryWindow(input_tokens=20_000, output_tokens=300, source="test")


class GatedLLM:
    """An LLM whose answers wait for `release`; it records every request and how many ran at once."""

    provider_name = "fake"

    def __init__(self) -> None:
        self.requests: list[llm.LLMRequest] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.running = 0
        self.most_at_once = 0

    async def generate(self, request: llm.LLMRequest) -> llm.LLMResult:
        self.requests.append(request)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        self.started.set()
        try:
            await asyncio.wait_for(self.release.wait(), 20)
        finally:
            self.running -= 1
        return llm.LLMResult(
            text=f"SUMMARY-{len(self.requests)} of the chat so far", provider="fake", model="m"
        )

    async def aclose(self) -> None:
        return None


def chat(exchanges: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(exchanges):
        items.extend(hooks_service.exchange(i, f"topic {i}"))
    return items


async def stored_chat(store: Store, exchanges: int) -> msgs.Turns:
    """A chat stored as the outlet stores it (messages and the chat head); its turns."""
    messages = chat(exchanges)
    turns = msgs.conversation_turns(messages)
    store_of = conversations.Conversations(store)
    await store_of.remember(
        USER,
        {
            link.invariant: conversations.stored_message(m)
            for link, m in zip(turns.links, messages, strict=True)
        },
    )
    await store_of.record_head(USER, CHAT, [link.invariant for link in turns.links])
    return turns


def job(turns: msgs.Turns, stop: int, job_id: int, chat_id: str | None = CHAT) -> domain.Job:
    """The summary job of turns 1..stop (turn 0 kept verbatim), folding no previous summary."""
    spec = payloads.SummaryPayload(
        user_id=USER,
        head_count=1,
        start=1,
        parent=turns.hashes[0],
        invariants=tuple(link.invariant for link in turns.links[1:stop]),
        covered_hash=turns.hashes[stop - 1],
        previous=None,
        model="m",
        window=WINDOW,
        chat_id=chat_id,
    )
    return domain.Job(id=job_id, kind="summary", payload=spec.to_payload(), attempts=1)


def handler(store: Store, model: GatedLLM) -> Callable[[domain.Job], Awaitable[None]]:
    """A summary handler as a worker runs it: the job's stored payload validated into its model first."""
    run = summary.SummaryHandler(
        conversations.Conversations(store), lambda: model, max_attempts=3, default_model="m"
    )
    return Registry().register(kinds.SUMMARY, run, payload=payloads.SummaryPayload).run


async def waiting_for_the_chat_lock(store: Store) -> int:
    """Sessions waiting for the summary lock of USER's chat CHAT (a bigint advisory key shows in
    pg_locks as its high and low 32 bits)."""
    return int(
        await store.fetchval(
            """
            SELECT count(*)
            FROM pg_locks
            WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
              AND ((classid::bigint << 32) | objid::bigint)
                  = hashtextextended('echo.summary:' || $1::text || ':' || $2::text || ':' || $3::text, 0)
            """,
            store.schema,
            USER,
            f"chat:{CHAT}",
        )
    )


async def summaries(store: Store) -> list[dict[str, Any]]:
    rows = await store.fetch("SELECT covered_count, text, refs FROM summaries ORDER BY covered_count")
    return [dict(row) for row in rows]


async def test_a_later_job_of_the_chat_waits_for_the_running_one_and_folds_its_summary(store: Store) -> None:
    turns = await stored_chat(store, 25)
    model = GatedLLM()
    first, second = handler(store, model), handler(store, model)  # two workers
    earlier = asyncio.create_task(first(job(turns, 40, 1)))
    await asyncio.wait_for(model.started.wait(), 20)
    later = asyncio.create_task(second(job(turns, 46, 2)))

    async def later_waits() -> bool:
        return await waiting_for_the_chat_lock(store) == 1

    await eventually(later_waits, within=20, what="the later job waiting for the chat's summary lock")
    assert len(model.requests) == 1  # the later job has not called the model
    model.release.set()
    await asyncio.wait_for(asyncio.gather(earlier, later), 20)

    assert model.most_at_once == 1
    assert len(model.requests) == 2
    prompt = model.requests[1].input_text
    assert "SUMMARY-1 of the chat so far" in prompt  # built on the earlier summary
    assert "Question 5:" not in prompt  # the turns it covers are not summarised again
    assert "Question 21:" in prompt
    assert "Question 22:" in prompt
    made = await summaries(store)
    assert [row["covered_count"] for row in made] == [40, 46]
    assert made[1]["refs"] == [link.invariant for link in turns.links[1:46]]


async def test_a_job_whose_branch_point_a_later_summary_covers_makes_no_call(store: Store) -> None:
    turns = await stored_chat(store, 25)
    model = GatedLLM()
    model.release.set()
    await handler(store, model)(job(turns, 46, 2))  # the later job ran first
    superseded = sample("echo_compression_summaries_total", outcome="superseded")
    await handler(store, model)(job(turns, 40, 1))
    assert len(model.requests) == 1
    assert [row["covered_count"] for row in await summaries(store)] == [46]
    assert sample("echo_compression_summaries_total", outcome="superseded") == superseded + 1


async def test_jobs_of_other_chats_run_at_once(store: Store) -> None:
    turns = await stored_chat(store, 25)
    model = GatedLLM()
    first = asyncio.create_task(handler(store, model)(job(turns, 40, 1, chat_id="c1")))
    second = asyncio.create_task(handler(store, model)(job(turns, 46, 2, chat_id="c2")))

    async def both_called() -> bool:
        return len(model.requests) == 2

    await eventually(both_called, within=20, what="both jobs calling the model")
    model.release.set()
    await asyncio.wait_for(asyncio.gather(first, second), 20)
    assert model.most_at_once == 2


async def test_a_failure_is_read_once_by_its_chat_and_a_later_success_clears_it(store: Store) -> None:
    turns = await stored_chat(store, 25)
    store_of = conversations.Conversations(store)
    await store_of.record_summary_failure(USER, CHAT, "llm", "summary model failed: " + "x" * 500)
    await store_of.record_summary_failure(USER, CHAT, "empty", "the summary model answered no usable text")
    assert (await store_of.inlet_lookup(USER, turns.hashes, "other chat")).failure is None
    assert (await store_of.inlet_lookup("u2", turns.hashes, CHAT)).failure is None
    found = await store_of.inlet_lookup(USER, turns.hashes, CHAT)
    assert found.summary is None
    assert found.failure == conversations.SummaryFailure(
        "empty", "the summary model answered no usable text", 2
    )
    assert (await store_of.inlet_lookup(USER, turns.hashes, CHAT)).failure is None  # shown once

    await store_of.record_summary_failure(USER, CHAT, "llm", "summary model failed: " + "x" * 500)
    model = GatedLLM()
    model.release.set()
    await handler(store, model)(job(turns, 40, 1))
    found = await store_of.inlet_lookup(USER, turns.hashes, CHAT)
    assert found.failure is None  # the chat has its summary now: the failure is no news
    assert found.summary is not None
    assert found.summary.summary.covered_count == 40

    await store_of.record_summary_failure(USER, CHAT, "llm", "summary model failed: " + "x" * 500)
    detail = await store.fetchval("SELECT detail FROM summary_failures")
    assert len(detail) == conversations.FAILURE_DETAIL_CHARS
    await store_of.forget(USER)
    assert await store.fetchval("SELECT count(*) FROM summary_failures") == 0


async def test_a_cancelled_holder_leaves_the_chat_lock_free(store: Store) -> None:
    store_of = conversations.Conversations(store)
    held = asyncio.Event()

    async def hold() -> None:
        async with store_of.summary_lock(USER, "chat:c1"):
            held.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(hold())
    await asyncio.wait_for(held.wait(), 10)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    async with asyncio.timeout(10), store_of.summary_lock(USER, "chat:c1"):
        assert await waiting_for_the_chat_lock(store) == 0


async def test_the_lookup_finds_the_summary_covering_most_near_the_end_or_far_from_it(store: Store) -> None:
    # The newest 128 positions are probed first, the rest at once: both paths, on all three lookups.
    store_of = conversations.Conversations(store)
    turns = msgs.conversation_turns(chat(150))  # 300 turns
    hashes = turns.hashes

    def new(count: int, key: str | None = None) -> conversations.NewSummary:
        return conversations.NewSummary(
            user_id=USER,
            covered_hash=key or hashes[count - 1],
            covered_count=count,
            head_count=1,
            text=f"covers {count}",
            locale="en-US",
            model="m",
            provider="fake",
            refs=[],
        )

    async def best() -> set[int | None]:
        found = [
            await store_of.best_summary(USER, hashes),
            (await store_of.inlet_lookup(USER, hashes, CHAT)).summary,
            await store_of.outlet_statement(
                USER, {}, chat_id=None, invariants=(), head_hash=None, lookup=hashes
            ),
        ]
        return {row.summary.covered_count if row is not None else None for row in found}

    assert await best() == {None}
    for count in (10, 100):
        assert await store_of.save_summary(new(count))
    assert await best() == {100}  # 200 positions from the end: found by the probe of all positions
    other = msgs.conversation_turns([*chat(150)[:-1], {"role": "assistant", "content": "another"}])
    assert await store_of.save_summary(new(300, other.hashes[-1]))  # a sibling branch's: not valid here
    assert await best() == {100}
    assert await store_of.save_summary(new(250))
    assert await best() == {250}  # among the last 128 positions
    shorter = await store_of.best_summary(USER, hashes[:99])  # an earlier point of the branch
    assert shorter is not None
    assert shorter.summary.covered_count == 10
    assert await store_of.best_summary("u2", hashes) is None


async def test_a_stored_payload_is_validated_once_and_a_malformed_one_is_dead_at_its_first_attempt(
    store: Store,
) -> None:
    turns = await stored_chat(store, 25)
    model = GatedLLM()
    model.release.set()
    spec = Registry().register(
        kinds.SUMMARY,
        summary.SummaryHandler(
            conversations.Conversations(store), lambda: model, max_attempts=3, default_model="m"
        ),
        payload=payloads.SummaryPayload,
    )
    jobs = queue.JobQueue(store)
    stored = dict(job(turns, 40, 1).payload)
    malformed = {**stored, "window": {"input_tokens": 0, "output_tokens": 300}}
    good_id = await jobs.enqueue(kinds.SUMMARY, stored, idempotency_key="good")
    bad_id = await jobs.enqueue(kinds.SUMMARY, malformed, idempotency_key="bad")
    for _ in range(2):
        claimed = await jobs.claim("w1", [kinds.SUMMARY], 30)
        assert claimed is not None
        assert await jobs.finish("w1", claimed.job, await execution.attempt(claimed.job, spec, 0.0))
    good, bad = await jobs.get(good_id), await jobs.get(bad_id)
    assert good is not None
    assert bad is not None
    assert (good.state, good.attempts) == (domain.JobState.DONE, 1)  # the JSON as PostgreSQL gives it back
    assert (bad.state, bad.attempts) == (domain.JobState.DEAD, 1)  # never retried
    assert bad.last_error == "PermanentJobError: malformed summary payload: window: positive token budgets"
    assert len(model.requests) == 1  # the malformed job's handler never ran


class LongWindedLLM:
    """Answers every summary request with far more lines than it was asked for."""

    provider_name = "fake"

    def __init__(self) -> None:
        self.requests: list[llm.LLMRequest] = []

    async def generate(self, request: llm.LLMRequest) -> llm.LLMResult:
        self.requests.append(request)
        lines = [f"Line {i}: the user said fact number {i} about project {i} on day {i}." for i in range(400)]
        return llm.LLMResult(text="\n".join(lines), provider="fake", model="m")

    async def aclose(self) -> None:
        return None


async def test_a_summary_never_exceeds_its_share_of_the_turns_it_covers(store: Store) -> None:
    turns = await stored_chat(store, 25)
    model = LongWindedLLM()
    wide = budgets.SummaryWindow(input_tokens=50_000, output_tokens=16_000, source="test")
    run = summary.SummaryHandler(
        conversations.Conversations(store), lambda: model, max_attempts=3, default_model="m"
    )
    messages = chat(25)
    first = payloads.SummaryPayload.model_validate(
        {**payloads.SummaryPayload.model_validate(job(turns, 40, 1).payload).model_dump(), "window": wide}
    )
    await run(domain.Job(id=1, kind="summary", payload=first.to_payload(), attempts=1), first)
    covered_first = sum(msgs.message_tokens(m) for m in messages[1:40])
    [row] = await summaries(store)
    assert model.requests[0].max_output_tokens == int(0.25 * covered_first)
    assert msgs.message_tokens({"role": "assistant", "content": row["text"]}) <= 0.25 * covered_first + 4
    assert row["text"].startswith("Line 0:")  # trimmed from the end, not refused

    second = payloads.SummaryPayload(
        user_id=USER,
        head_count=1,
        start=40,
        parent=turns.hashes[39],
        invariants=tuple(link.invariant for link in turns.links[40:46]),
        covered_hash=turns.hashes[45],
        previous=turns.hashes[39],
        model="m",
        window=wide,
        max_share=0.2,
        chat_id=CHAT,
    )
    await run(domain.Job(id=2, kind="summary", payload=second.to_payload(), attempts=1), second)
    covered = covered_first + sum(msgs.message_tokens(m) for m in messages[40:46])
    assert model.requests[1].max_output_tokens == int(0.2 * covered)  # the first one's turns count too
    assert [r["covered_count"] for r in await summaries(store)] == [40, 46]
