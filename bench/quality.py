"""What ECHO's context is worth on LoCoMo: tokens sent, memory recall, and retention after compression.

Each LoCoMo conversation (`../shared/data/locomo/`, else `tests/fixtures/locomo/`; `--data DIR`) is
played as one user's chat through echo-hooks as `echoctl serve` runs it, in this process: the real app
(`create_app` over `open_runtime`), the offline LLM, the packaged MiniLM embedder, Qdrant local mode,
PostgreSQL (ECHO_DATABASE_URL, else an embedded one), the in-process worker. Every turn goes through
the public surface Open WebUI's Function calls: `POST /hooks/inlet` with the branch so far, the
recorded reply, `POST /hooks/outlet` (each message with a `timestamp`, as Open WebUI's carry one: its
LoCoMo session's time, `locomo.with_timestamps`); then the bench waits until the queue is idle, so
each turn finds the summaries and memories a real deployment would have by then. Compression runs
with small windows (`--windows THRESHOLD:MAX_CONTEXT,…`, default 4,000:6,000 and 1,500:2,250, each a
run of its own, set through `POST /echo_compression/valves/update`) so that LoCoMo's 15–25 k-token
chats are compressed at all; every other valve is the default (`--memory-valves`,
`--compression-valves`: JSON of valves to set, for calibration).

Each conversation is judged twice: after its first 30 turns (the short chat) and after all of them
(the long chat), a turn being one request (a user message and its reply). At each point:

(a) tokens per turn: the messages Open WebUI would send without ECHO (the whole branch) against the
    body the inlet answers (estimated as ECHO estimates them), at every turn of the short chat and every
    `--every`-th turn after; ECHO's AEC block (`<environnement_contexte>`, a fixed-size addition)
    is counted apart. Goal: with ECHO never more than without, the AEC block aside.
(b) memory recall, QA pairs of categories 1–4 whose evidence was played, scored by answer recall
    (`bench/locomo.py`: at least half of the answer's content words in the text): the `<echo_memories>`
    block the inlet injects against raw turns ranked by MiniLM over the played messages, taken in
    order while they fit, at the same tokens, question by question: the tokens of the block's memory
    lines (its fence and guard left out: the raw turns get no fence). When the block is empty the
    baseline gets what the block could have held: `RECALL_MAX_TOKENS` (read from
    `GET /echo_memory/valves`) within the room echo_compression left (`ROOM_KEY` in the answer's
    metadata; a chat's own memories keep to it), less the fence: a block left empty because no memory
    reached the floor does not empty the baseline too (one left empty because the room is 0 does).
    - this chat: the question sent as the chat's next user message. The raw turns obey the block's
      provenance rule, `echo.domain.memory.context.holds` itself, each turn taken as a memory of one
      source (its invariant hash, as the outlet gives a window's memories theirs): no turn the
      request carries, none that the summary it carries (the row echo_compression names in the
      answer's metadata) covers and states in full. On a short chat the request holds every turn:
      neither side has anything to add and the goal reads "n/a".
    - new chat: the question alone, as the first turn of a new chat of the same user, through the
      same `POST /hooks/inlet`; the block (the memories of the earlier chat) against any played turn
      of that chat. This is the case memory exists for.
    Goal: ECHO at least the baseline, in both, on every conversation. Beside them, nothing hidden:
    raw turns filled to the whole recall budget (under the block's rule, and any played turn: the
    figure of the earlier runs), `POST /tools/search_memories` (the model's tool, its most, 20, within
    the recall budget: what the memories hold, whatever the chat), how many blocks were empty, and
    the filter's recall outcomes (a timeout empties a block).
(c) retention: the same inlet answer as the final context (the question's own text left out) against
    plain truncation of what Open WebUI would send (system messages, the question, then the newest
    messages that fit) to the same token count. Goal on the long chats: ECHO at least 1.5x truncation.
    "ceiling" is the most any context could reach, every answer kept over truncation's share
    (100% / trunc); a goal beyond it is reported "NOT MET (ceiling N.NNx)".
    "compression only" scores the answer without its memories block, truncation at that size.

    .venv/bin/python bench/quality.py [--quick] [--data DIR] [--conversations 26,30,44] [--every 5]
        [--windows 4000:6000,1500:2250] [--memory-valves JSON] [--compression-valves JSON]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import locomo
import numpy as np
import prometheus_client
import stores

from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.embeddings import local
from echo.adapters.store import conversations, pool, testing
from echo.adapters.store import memories as memory_store
from echo.capabilities.compression import costs as compression_costs
from echo.config import tenancy
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import tokens, transcripts
from echo.domain.aec import rendering as aec_rendering
from echo.domain.compression import allowance
from echo.domain.compression import messages as msgs
from echo.domain.memory import context as memory_context
from echo.domain.memory import recall
from echo.entrypoints import runtime
from echo.entrypoints.http import create_app
from echo.entrypoints.replay import driver
from echo.queue import queue
from echo.support import supervision

KEY = "bench-quality-key"
SHORT_TURNS = 30
RETENTION_GOAL = 1.5
_MEMORIES = re.compile(rf"<{recall.MEMORIES_TAG}\b.*?</{recall.MEMORIES_TAG}\s*>\s*", re.DOTALL)
_BLOCK_LINES = re.compile(rf"\n\n(.*)\n</{recall.MEMORIES_TAG}\s*>", re.DOTALL)
_FENCE_TOKENS = tokens.estimate_tokens(recall.GUARDS["en-US"]) + 16  # as `recall.select` counts them
_AEC = re.compile(  # with the blank line that parts it from the user's text
    rf"{re.escape(aec_rendering.BLOCK_OPEN)}.*?{re.escape(aec_rendering.BLOCK_CLOSE)}\s*", re.DOTALL
)


@dataclass
class Point:
    """One chat judged: a conversation after ``turns`` turns."""

    name: str
    turns: int
    without: list[int] = field(default_factory=list)  # tokens per sampled turn, Open WebUI alone
    with_echo: list[int] = field(default_factory=list)  # tokens the inlet answered, same turns
    aec: list[int] = field(default_factory=list)  # of which the AEC block
    questions: int = 0
    memory_hits: int = 0  # the block, the question asked in this chat
    search_hits: int = 0  # search_memories at the recall budget
    raw_hits: int = 0  # raw turns the block's rule lets back, at the block's tokens
    raw_rule_full_hits: int = 0  # the same turns at the whole recall budget
    raw_any_hits: int = 0  # raw turns, any played one, at the whole recall budget (the old baseline)
    new_hits: int = 0  # the block, the question asked in a new chat of the same user
    new_raw_hits: int = 0  # raw turns, any played one, at the new chat's block's tokens
    block_tokens: list[int] = field(default_factory=list)  # the block as injected, fence included
    raw_tokens: list[int] = field(default_factory=list)  # what the same-tokens baseline was given
    new_block_tokens: list[int] = field(default_factory=list)
    new_raw_tokens: list[int] = field(default_factory=list)
    empty: int = 0  # questions whose block was empty, this chat
    new_empty: int = 0  # and in the new chat
    raw_eligible: list[int] = field(default_factory=list)  # raw turns the same-chat baseline may take
    summarised: int = 0  # questions whose request carried a summary (its row found): covered turns judged
    recalls: Counter[str] = field(default_factory=Counter)  # the filter's recall outcomes while judged
    echo_kept: int = 0
    truncation_kept: int = 0
    compression_kept: int = 0
    compression_truncation_kept: int = 0
    final_tokens: list[int] = field(default_factory=list)
    full_tokens: list[int] = field(default_factory=list)

    @property
    def excess(self) -> int:
        """The most a sampled turn sent with ECHO over without, the AEC block aside."""
        return max((w - a - o for w, a, o in zip(self.with_echo, self.aec, self.without, strict=True)),
                   default=0)  # fmt: skip


class Service:
    """echo-hooks in this process, reached through httpx's ASGI transport with the hooks' key."""

    def __init__(self, http: httpx.AsyncClient, store: pool.Store) -> None:
        self.http = http
        self.store = store
        self.jobs = queue.JobQueue(store)
        self.conversations = conversations.Conversations(store)
        self.drain = driver.QueueDrain(self.jobs, within=300)

    async def outcomes(self) -> Counter[str]:
        """Jobs of the tenant so far, by kind and state ("distill dead": 3)."""
        return Counter({f"{d.kind} {d.state.value}": d.jobs for d in await self.jobs.depths()})

    async def hook(self, phase: str, body: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
        answer = await self.http.post(f"/hooks/{phase}", json={"body": dict(body), "user": dict(user)})
        answer.raise_for_status()
        found: dict[str, Any] = answer.json()
        return found

    async def search_memories(self, user_id: str, query: str, k: int) -> list[str]:
        """What the tool `search_memories` answers the model: the memories' texts, nearest first."""
        answer = await self.http.post(
            "/tools/search_memories", json={"query": query, "k": k}, headers={"x-openwebui-user-id": user_id}
        )
        answer.raise_for_status()
        return [str(found["summary"]) for found in answer.json()["memories"]]

    async def idle(self) -> None:
        if not await self.drain():
            raise RuntimeError("the job queue did not drain in 300 s")


@contextlib.asynccontextmanager
async def serving(
    dsn: str, workdir: Path, compression: Mapping[str, Any], memory: Mapping[str, Any]
) -> AsyncIterator[Service]:
    tenant = f"bench-quality-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        data_dir=workdir / "echo",
        database_url=dsn,
        tenant=tenant,
        inprocess_worker=True,
        qdrant_path=workdir / "qdrant",
        api_key=KEY,
        llm_provider="offline",
        log_level="ERROR",
        job_poll_seconds=0.2,
    )
    supervisor = supervision.Supervisor()
    app = create_app(
        settings, backends=lambda s: runtime.open_runtime(s, supervisor=supervisor), supervisor=supervisor
    )
    transport = httpx.ASGITransport(app)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=transport,
                base_url="http://echo-hooks",
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=120,
            ) as http,
        ):
            deadline = time.monotonic() + 120
            while (await http.get("/readyz")).status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"echo-hooks not ready: {(await http.get('/readyz')).text}")
                await asyncio.sleep(0.2)
            updated = await http.post("/echo_compression/valves/update", json=dict(compression))
            updated.raise_for_status()
            if memory:
                current = (await http.get("/echo_memory/valves")).json()
                updated = await http.post("/echo_memory/valves/update", json={**current, **memory})
                updated.raise_for_status()
            store = await pool.Store.open(dsn, schema=tenancy.schema_for(tenant), max_size=2)
            try:
                yield Service(http, store)
            finally:
                await store.close()
    finally:
        await testing.drop_schema(dsn, tenancy.schema_for(tenant))


def _text(message: Mapping[str, Any]) -> str:
    return msgs.content_text(message.get("content"))


def _memories_block(answer_messages: Sequence[Mapping[str, Any]]) -> str:
    """The memories block the inlet put in its last user message ("" when none)."""
    last = next((m for m in reversed(answer_messages) if m.get("role") == "user"), None)
    found = _MEMORIES.search(_text(last)) if last is not None else None
    return found.group(0) if found else ""


def _raw_won(answer: str, block: str, nearest: list[str]) -> bool:
    """Whether the raw turns hold the answer where the block does not (what `--explain` prints)."""
    return not locomo.answer_recalled(answer, block) and bool(
        locomo.answer_recalled(answer, "\n".join(nearest))
    )


def _lines_tokens(block: str) -> int:
    """The tokens of a memories block's memory lines (its fence and guard left out)."""
    found = _BLOCK_LINES.search(block)
    return tokens.estimate_tokens(found.group(1)) if found else 0


def _recall_outcomes() -> Counter[str]:
    """echo_memory's recall outcomes so far in this process (hit, miss, timeout, error, skipped)."""
    counts: Counter[str] = Counter()
    for outcome in ("hit", "miss", "timeout", "error", "skipped"):
        value = prometheus_client.REGISTRY.get_sample_value("echo_memory_recalls_total", {"outcome": outcome})
        counts[outcome] = int(value or 0)
    return counts


def _context_words(messages: Sequence[Mapping[str, Any]], extra: str = "") -> set[str]:
    """The words of every message but the last (the question) and of ``extra``."""
    return locomo.words_of("\n".join([*(_text(m) for m in messages[:-1]), extra]))


def _without(messages: Sequence[Mapping[str, Any]], block: re.Pattern[str]) -> list[Mapping[str, Any]]:
    """``messages`` with ``block`` taken out of the last user message (where ECHO puts its blocks)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [{**m, "content": block.sub("", _text(m), count=1)} if i == last else m
            for i, m in enumerate(messages)]  # fmt: skip


class Replay:
    """One conversation through the service, judged after its short and long chat."""

    def __init__(
        self,
        service: Service,
        embedder: local.LocalEmbedder,
        transcript: transcripts.Transcript,
        *,
        every: int,
        recall_budget: int,
        recall_k: int,
        explain: bool = False,
    ) -> None:
        self.service = service
        self.embedder = embedder
        self.transcript = transcript
        self.every = every
        self.recall_budget = recall_budget
        self.recall_k = recall_k
        self.user = {"id": f"quality-{transcript.id}-{uuid.uuid4().hex[:6]}", "name": "bench", "role": "user"}
        self.vectors: dict[str, np.ndarray] = {}
        self.costs = compression_costs.Costs()
        self.explain = explain
        self.losses: Counter[str] = Counter()

    def _sampled(self, turn: int, last: int) -> bool:
        return turn <= SHORT_TURNS or turn == last or turn % self.every == 0

    async def run(self, checkpoints: Sequence[int]) -> list[Point]:
        exchanges = self.transcript.exchanges
        points = {turns: Point(self.transcript.id, turns) for turns in checkpoints}
        history: list[transcripts.Message] = []
        for turn, exchange in enumerate(exchanges, start=1):
            history.extend(exchange.sent)
            if self._sampled(turn, len(exchanges)):
                await self._measure_turn(history, turn, [p for t, p in points.items() if turn <= t])
            history.extend(exchange.replies)
            await self.service.hook("outlet", driver.outlet_body(self.transcript, history), self.user)
            await self.service.idle()
            if turn % 50 == 0:
                print(f"  {self.transcript.id}: turn {turn} of {len(exchanges)}", file=sys.stderr)
            if turn in points:
                await self._judge(points[turn], history)
        return [points[turns] for turns in checkpoints]

    async def _measure_turn(
        self, history: Sequence[transcripts.Message], turn: int, into: Sequence[Point]
    ) -> None:
        body = driver.inlet_body(
            self.transcript, history, user_id=self.user["id"], reply_id=f"{self.transcript.id}-reply-{turn}"
        )
        sent = (await self.service.hook("inlet", body, self.user))["messages"]
        with_echo = driver.tokens_of(sent)
        # what the AEC block costs: the request with it against the request without it (the
        # estimate of a text is not the sum of its parts' estimates)
        aec = with_echo - driver.tokens_of(_without(sent, _AEC))
        for point in into:
            point.without.append(driver.tokens_of(body["messages"]))
            point.with_echo.append(with_echo)
            point.aec.append(aec)

    async def _embedded(self, texts: Mapping[str, str]) -> None:
        missing = [key for key in texts if key not in self.vectors]
        if missing:
            found = await self.embedder.embed([texts[key] for key in missing])
            for key, vector in zip(missing, found, strict=True):
                array = np.asarray(vector, dtype=np.float32)
                self.vectors[key] = array / (np.linalg.norm(array) or 1.0)

    async def _judge(self, point: Point, history: Sequence[transcripts.Message]) -> None:
        questions = locomo.judged(self.transcript, point.turns)
        raw = {message.id: msgs.content_text(message.content) for message in history}
        sources = self._invariants(history)
        await self._embedded(raw)
        await self._embedded({f"q:{q.text}": q.text for q in questions})
        ids = list(raw)
        matrix = np.stack([self.vectors[key] for key in ids]) if ids else np.zeros((0, 1))
        before = _recall_outcomes()
        for index, question in enumerate(questions):
            asked = [
                *history,
                transcripts.Message(id=f"{self.transcript.id}-q{point.turns}-{index}", role="user",
                                    content=question.text),
            ]  # fmt: skip
            body = driver.inlet_body(
                self.transcript, asked, user_id=self.user["id"], reply_id=f"{self.transcript.id}-a{index}"
            )
            answer = await self.service.hook("inlet", body, self.user)
            sent = answer["messages"]
            memories = _memories_block(sent)
            point.questions += 1
            point.memory_hits += locomo.answer_recalled(question.answer, memories)
            point.block_tokens.append(tokens.estimate_tokens(memories) if memories else 0)
            order = [
                ids[i] for i in np.argsort(-(matrix @ self.vectors[f"q:{question.text}"]), kind="stable")
            ]
            # the baseline under the block's rule (`memory_context.holds`, each turn a memory of one
            # source), at the tokens of the block's memory lines; with no block, at what the block
            # could have taken: the recall budget within the room compression left, less the fence
            held = await self._held(answer, sent)
            point.summarised += bool(held.summarised)
            eligible = locomo.not_held(order, raw, sources, held)
            point.raw_eligible.append(len(eligible))
            if memories:
                budget = _lines_tokens(memories)
            else:
                point.empty += 1
                budget = self._available(allowance.room_of(answer))
            nearest = locomo.fill_budget((raw[key] for key in eligible), budget, tokens.estimate_tokens)
            point.raw_tokens.append(sum(map(tokens.estimate_tokens, nearest)))
            point.raw_hits += locomo.answer_recalled(question.answer, "\n".join(nearest))
            if self.explain and _raw_won(question.answer, memories, nearest):
                await self._explain(f"{point.turns} this", question, memories, nearest, held)
            nearest = locomo.fill_budget(
                (raw[key] for key in eligible), self.recall_budget, tokens.estimate_tokens
            )
            point.raw_rule_full_hits += locomo.answer_recalled(question.answer, "\n".join(nearest))
            nearest = locomo.fill_budget(
                (raw[key] for key in order), self.recall_budget, tokens.estimate_tokens
            )
            point.raw_any_hits += locomo.answer_recalled(question.answer, "\n".join(nearest))
            # the same question in a new chat of this user: what the memories of the earlier chat bring,
            # against any played turn at the same tokens (with no block, the whole recall budget: the
            # memories of another chat are not held to the room)
            fresh = driver.inlet_body(
                self.transcript,
                asked[-1:],
                user_id=self.user["id"],
                reply_id=f"{self.transcript.id}-n{index}",
            )
            fresh["metadata"]["chat_id"] = f"{self.transcript.id}-new-{point.turns}-{index}"
            recalled = _memories_block((await self.service.hook("inlet", fresh, self.user))["messages"])
            point.new_hits += locomo.answer_recalled(question.answer, recalled)
            point.new_block_tokens.append(tokens.estimate_tokens(recalled) if recalled else 0)
            if recalled:
                budget = _lines_tokens(recalled)
            else:
                point.new_empty += 1
                budget = self._available(None)
            nearest = locomo.fill_budget((raw[key] for key in order), budget, tokens.estimate_tokens)
            point.new_raw_tokens.append(sum(map(tokens.estimate_tokens, nearest)))
            point.new_raw_hits += locomo.answer_recalled(question.answer, "\n".join(nearest))
            if self.explain and _raw_won(question.answer, recalled, nearest):
                await self._explain(f"{point.turns} new", question, recalled, nearest, None)
            searched = await self.service.search_memories(self.user["id"], question.text, self.recall_k)
            fitting = locomo.fill_budget(searched, self.recall_budget, tokens.estimate_tokens)
            point.search_hits += locomo.answer_recalled(question.answer, "\n".join(fitting))
            full = body["messages"]
            budget = driver.tokens_of(sent)
            point.final_tokens.append(budget)
            point.full_tokens.append(driver.tokens_of(full))
            # the AEC block holds today's date and the user's name, nothing of the conversation
            point.echo_kept += locomo.answer_recalled(question.answer, _context_words(sent, memories))
            point.truncation_kept += locomo.answer_recalled(
                question.answer, _context_words(locomo.truncated(full, budget))
            )
            compressed = _without(sent, _MEMORIES)
            point.compression_kept += locomo.answer_recalled(question.answer, _context_words(compressed))
            point.compression_truncation_kept += locomo.answer_recalled(
                question.answer, _context_words(locomo.truncated(full, driver.tokens_of(compressed)))
            )
        point.recalls = _recall_outcomes() - before

    async def _explain(
        self,
        where: str,
        question: transcripts.Question,
        block: str,
        nearest: Sequence[str],
        held: memory_context.Held | None,
    ) -> None:
        """Why the block missed an answer raw turns found (`--explain`): every stored memory of the
        user, scored by the bench's MiniLM, those that hold the answer, and the kind of loss."""
        rows = await memory_store.Memories(self.service.store).list(self.user["id"], limit=10_000)
        texts = {f"m:{row.memory.summary}": row.memory.summary for row in rows}
        await self._embedded(texts)
        await self._embedded({f"q:{question.text}": question.text})
        query = self.vectors[f"q:{question.text}"]
        scored = []
        for row in rows:
            memory = row.memory
            sources = recall.source_ids(i for ref in memory.provenance for i in ref.invariants)
            cand = recall.Candidate(
                memory.id,
                memory.summary,
                float(self.vectors[f"m:{memory.summary}"] @ query),
                memory.importance,
                memory.updated_at,
                sources=frozenset(sources) if sources else None,
                chat_id=memory.chat_id,
            )
            scored.append(cand)
        scored.sort(key=lambda c: -c.similarity)
        holders = [
            (rank, c)
            for rank, c in enumerate(scored, 1)
            if locomo.answer_recalled(question.answer, c.summary)
        ]
        union = locomo.answer_recalled(question.answer, "\n".join(c.summary for c in scored))
        fenced = _BLOCK_LINES.search(block) if block else None
        lines = fenced.group(1).splitlines() if fenced else []
        if not holders:
            kind = "distill-spread" if union else "distill"
        elif held is not None and all(memory_context.holds(held, c) for _, c in holders):
            kind = "held"
        elif all(c.similarity < 0.35 for _, c in holders):
            kind = "floor"
        else:
            kind = "rank/budget"
        self.losses[f"{where.split()[1]} {kind}"] += 1
        print(
            f"\n### [{where}] {kind}: Q: {question.text}\n    A: {question.answer}"
            f" (content words {locomo.content_words(question.answer)})",
            file=sys.stderr,
        )
        print(f"    block ({len(lines)} lines, {_lines_tokens(block)} tok):", file=sys.stderr)
        for line in lines:
            print(f"      {line[:220]}", file=sys.stderr)
        print(f"    holders ({len(holders)} of {len(scored)} memories; cosine rank):", file=sys.stderr)
        for rank, c in holders[:6]:
            flag = " HELD" if held is not None and memory_context.holds(held, c) else ""
            print(
                f"      #{rank} cos {c.similarity:.3f} imp {c.importance}{flag}: {c.summary[:220]}",
                file=sys.stderr,
            )
        print("    top memories by cosine:", file=sys.stderr)
        for c in scored[:5]:
            print(f"      cos {c.similarity:.3f}: {c.summary[:160]}", file=sys.stderr)
        print("    raw turns holding it:", file=sys.stderr)
        for turn in nearest:
            if locomo.answer_recalled(question.answer, turn):
                print(f"      {turn[:400]}", file=sys.stderr)

    def _invariants(self, history: Sequence[transcripts.Message]) -> dict[str, str]:
        """Each played message's invariant hash, as the outlet gives it to a window's memories."""
        offset = 1 if self.transcript.system else 0
        messages = driver.inlet_messages(self.transcript, history)
        if len(messages) != len(history) + offset:
            raise RuntimeError("a played message unfolded into several: the turns cannot be matched")
        turns = self.costs.prepare(messages).turns
        found = {history[turns.positions[link.index] - offset].id: link.invariant for link in turns.links}
        missing = [m.id for m in history if m.id not in found]
        if missing:
            raise RuntimeError(f"played messages that are not turns: {missing[:3]}")
        return found

    async def _held(
        self, answer: Mapping[str, Any], sent: Sequence[Mapping[str, Any]]
    ) -> memory_context.Held:
        """What the request the inlet answered holds, as `echo_memory` works it out: its own turns'
        invariant hashes, and the turns and text of the summary echo_compression names in metadata."""
        carried = [link.invariant for link in self.costs.prepare(sent).turns.links]
        covered: tuple[str, ...] = ()
        text = ""
        summary = memory_context.summary_of(answer)
        if summary is not None:
            row = await self.service.conversations.summary(self.user["id"], summary)
            if row is not None:
                covered, text = row.refs, row.summary.text
        return memory_context.held(carried, covered, text)

    def _available(self, room: int | None) -> int:
        """The tokens of memory lines a block could have held: the recall budget (within ``room``, the
        room compression left, for a chat's own memories), less the fence and guard (`recall.select`)."""
        ceiling = self.recall_budget if room is None else min(self.recall_budget, room)
        return max(0, ceiling - _FENCE_TOKENS)


# -- the report --------------------------------------------------------------------------------


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def _verdict(met: bool | None) -> str:
    return "-" if met is None else ("MET" if met else "NOT MET")


def _goal(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "NOT MET")


def _mean(values: Sequence[int]) -> float:
    return statistics.fmean(values) if values else 0.0


def _ratio(ours: int, theirs: int) -> float:
    return ours / theirs if theirs else (float("inf") if ours else 1.0)


def report(points: Sequence[Point], lengths: Mapping[str, int], args: argparse.Namespace) -> bool:
    """Print the three tables; True when every goal is met."""
    verdicts: list[bool | None] = []
    print(
        "\n(a) tokens per turn (ECHO's own estimate), sampled: every turn of the first "
        f"{SHORT_TURNS}, then every {args.every}th and the last"
    )
    header = (
        f"{'conv':<5} {'chat':<11} {'sampled':>7} {'without':>8} {'with ECHO':>9} {'AEC':>5} "
        f"{'saved':>6} {'max over':>8}  goal: never more (AEC aside)"
    )
    print(header)
    print("-" * len(header))
    for point in points:
        without, with_echo = statistics.fmean(point.without), statistics.fmean(point.with_echo)
        aec = statistics.fmean(point.aec)
        met: bool | None = point.excess <= 0
        verdicts.append(met)
        print(
            f"{point.name:<5} {_chat(point, lengths):<11} {len(point.without):7} {without:8,.0f} "
            f"{with_echo:9,.0f} {aec:5.0f} {1 - with_echo / without:6.0%} {point.excess:8,}  {_verdict(met)}"
        )
    print(
        "\n(b) answer recall of the recalled block against raw turns (MiniLM) at the same tokens, QA"
        " categories 1-4"
        "\n    this chat: the question as the chat's next message; raw turns under the block's rule (none"
        " the request carries, none its summary covers and states: `memory_context.holds`)"
        "\n    new chat: the question alone as the first turn of a new chat of the same user; raw turns:"
        " any played one"
        "\n    blk: mean tokens of the block as injected (fence and guard included); raw tok: mean tokens"
        " the baseline was given, the block's memory lines (fence and guard out), or with no block what"
        f" it could have held ({args.recall_budget:,} within the room compression left, less the fence)"
        f"\n    @{args.recall_budget}: raw turns filled to the whole recall budget (rule: under the block's"
        " rule; any: any played turn, the figure of the earlier runs)"
        f"\n    search: the tool search_memories, its top {args.recall_k} within the budget (chat-blind)"
    )
    header = (
        f"{'conv':<5} {'chat':<11} {'QA':>4} | {'blk':>4} {'ECHO':>5} {'raw tok':>7} {'raw':>5} {'goal':>7}"
        f" {'empty':>5} {'rule@':>5} {'any@':>5} | {'blk':>4} {'ECHO':>5} {'raw tok':>7} {'raw':>5}"
        f" {'goal':>7} {'empty':>5} {'any@':>5} | {'search':>6}"
    )
    print(f"{'':<22}| {'this chat':<58}| {'new chat':<52}|")
    print(header)
    print("-" * len(header))
    for point in points:
        compared = any(point.raw_eligible) or point.empty < point.questions
        same: bool | None = point.memory_hits >= point.raw_hits if point.questions and compared else None
        fresh: bool | None = point.new_hits >= point.new_raw_hits if point.questions else None
        verdicts += [same, fresh]
        print(
            f"{point.name:<5} {_chat(point, lengths):<11} {point.questions:4} | "
            f"{_mean(point.block_tokens):4.0f} {_share(point.memory_hits, point.questions):>5} "
            f"{_mean(point.raw_tokens):7.0f} {_share(point.raw_hits, point.questions):>5} "
            f"{_goal(same) if compared else 'n/a':>7} {point.empty:5} "
            f"{_share(point.raw_rule_full_hits, point.questions):>5} "
            f"{_share(point.raw_any_hits, point.questions):>5} | "
            f"{_mean(point.new_block_tokens):4.0f} {_share(point.new_hits, point.questions):>5} "
            f"{_mean(point.new_raw_tokens):7.0f} {_share(point.new_raw_hits, point.questions):>5} "
            f"{_goal(fresh):>7} {point.new_empty:5} {_share(point.raw_any_hits, point.questions):>5} | "
            f"{_share(point.search_hits, point.questions):>6}"
        )
    if any(point.raw_eligible for point in points):
        print(
            "    raw turns the this-chat baseline may take, on average: "
            + ", ".join(
                f"{p.name} {_chat(p, lengths)} {_mean(p.raw_eligible):.0f}" for p in points if p.raw_eligible
            )
            + " (0: the request holds every turn; n/a: nothing to recall on either side); questions whose"
            " request carried a summary: "
            + ", ".join(f"{p.name} {_chat(p, lengths)} {p.summarised}/{p.questions}" for p in points)
        )
    print(
        "    recall outcomes while judged (both chats): "
        + "; ".join(
            f"{p.name} {_chat(p, lengths)} "
            + ", ".join(f"{key} {n}" for key, n in sorted(p.recalls.items()) if n)
            for p in points
        )
    )
    print(
        "\n(c) answer retention of the final context (the inlet's answer to the question) against "
        "truncation to the same tokens"
    )
    header = (
        f"{'conv':<5} {'chat':<11} {'QA':>4} {'full tok':>8} {'final tok':>9} {'ECHO':>5} {'trunc':>5} "
        f"{'ratio':>6} {'ceiling':>7} {'compr. only':>11} {'trunc':>5}  "
        f"goal (long): ECHO >= {RETENTION_GOAL}x trunc"
    )
    print(header)
    print("-" * len(header))
    for point in points:
        long_chat = point.turns == lengths[point.name] and point.turns > SHORT_TURNS
        ratio = _ratio(point.echo_kept, point.truncation_kept)
        # The most any context can reach: every answer kept (100%) over truncation's share.
        ceiling = _ratio(point.questions, point.truncation_kept)
        met = ratio >= RETENTION_GOAL if long_chat and point.questions else None
        verdicts.append(met)
        verdict = _verdict(met)
        if met is False and ceiling < RETENTION_GOAL:
            verdict += f" (ceiling {ceiling:.2f}x)"
        full = statistics.fmean(point.full_tokens) if point.full_tokens else 0.0
        final = statistics.fmean(point.final_tokens) if point.final_tokens else 0.0
        print(
            f"{point.name:<5} {_chat(point, lengths):<11} {point.questions:4} {full:8,.0f} {final:9,.0f} "
            f"{_share(point.echo_kept, point.questions):>5} "
            f"{_share(point.truncation_kept, point.questions):>5} "
            f"{ratio:5.2f}x {ceiling:6.2f}x {_share(point.compression_kept, point.questions):>11} "
            f"{_share(point.compression_truncation_kept, point.questions):>5}  {verdict}"
        )
    return False not in verdicts


def _chat(point: Point, lengths: Mapping[str, int]) -> str:
    kind = "long" if point.turns == lengths[point.name] and point.turns > SHORT_TURNS else "short"
    return f"{kind} {point.turns}"


# -- main --------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, chats: Sequence[transcripts.Transcript]) -> bool:
    base = valves_module.CompressionValves.model_validate(args.compression)
    compression = driver.compression_valves(
        base, threshold=args.threshold, max_context=args.max_context
    ).model_dump(mode="json")
    workdir = Path(tempfile.mkdtemp(prefix="echo-bench-quality-"))
    points: list[Point] = []
    jobs: dict[str, Counter[str]] = {}
    try:
        async with (
            stores.database(workdir) as dsn,
            serving(dsn, workdir, compression, args.memory) as service,
        ):
            memory_valves = (await service.http.get("/echo_memory/valves")).json()
            args.recall_budget = int(memory_valves["RECALL_MAX_TOKENS"])
            args.recall_k = min(20, int(memory_valves["RECALL_TOP_K"]))  # the tool's most
            embedder = local.LocalEmbedder(embeddings_factory.packaged_model_path())
            try:
                for chat in chats:
                    started = time.perf_counter()
                    turns = len(chat.exchanges)
                    checkpoints = sorted({min(SHORT_TURNS, turns), turns})
                    replay = Replay(
                        service,
                        embedder,
                        chat,
                        every=args.every,
                        recall_budget=args.recall_budget,
                        recall_k=args.recall_k,
                        explain=args.explain,
                    )
                    before = await service.outcomes()
                    points += await replay.run(checkpoints)
                    if args.explain:
                        print(f"  {chat.id} losses: {dict(sorted(replay.losses.items()))}", file=sys.stderr)
                    jobs[chat.id] = await service.outcomes() - before
                    print(
                        f"  {chat.id}: {turns} turns replayed and judged in "
                        f"{time.perf_counter() - started:.0f} s",
                        file=sys.stderr,
                    )
            finally:
                await embedder.aclose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"LoCoMo {', '.join(c.id for c in chats)} through echo-hooks in process (POST /hooks/inlet and "
        "/hooks/outlet, offline LLM, MiniLM, Qdrant local, PostgreSQL, the queue drained every turn); "
        f"compression_threshold_tokens {args.threshold:,}, max_context_tokens {args.max_context:,}, "
        f"echo_memory {json.dumps(args.memory) if args.memory else 'default'}"
        f"{', echo_compression ' + json.dumps(args.compression) if args.compression else ''}"
        ", other valves default"
    )
    for name, counts in jobs.items():
        died = ", ".join(f"{key} {n}" for key, n in sorted(counts.items()) if key.endswith(" dead"))
        print(f"jobs of {name}: {died or 'none died'}")
    if any(key.endswith(" dead") for counts in jobs.values() for key in counts):
        print("warning: jobs died, so some summaries or memories a deployment would hold are missing")
    return report(points, {c.id: len(c.exchanges) for c in chats}, args)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=None, help="folder of LoCoMo NAME.json files")
    parser.add_argument("--conversations", default="", help="names to play, comma-separated (default: all)")
    parser.add_argument("--quick", action="store_true", help="one conversation only (the smallest)")
    parser.add_argument("--every", type=int, default=5, help="measure tokens every N turns past the first 30")
    parser.add_argument(
        "--windows",
        default="4000:6000,1500:2250",
        help="compression windows played, THRESHOLD:MAX_CONTEXT comma-separated"
        " (compression_threshold_tokens, max_context_tokens); each is a run of its own",
    )
    parser.add_argument(
        "--memory-valves", default="", help="echo_memory valves to set, JSON (e.g. '{\"RECALL_TOP_K\": 10}')"
    )
    parser.add_argument(
        "--compression-valves", default="", help="echo_compression valves to set beside the window, JSON"
    )
    parser.add_argument(
        "--explain", action="store_true", help="dump each question raw turns answer and the block does not"
    )
    args = parser.parse_args()
    args.memory = json.loads(args.memory_valves) if args.memory_valves else {}
    args.compression = json.loads(args.compression_valves) if args.compression_valves else {}
    try:
        windows = [tuple(int(n) for n in w.split(":")) for w in args.windows.split(",") if w.strip()]
    except ValueError:
        parser.error("--windows: THRESHOLD:MAX_CONTEXT pairs of integers, comma-separated")
    if not windows or any(len(w) != 2 for w in windows):
        parser.error("--windows: THRESHOLD:MAX_CONTEXT pairs of integers, comma-separated")
    folder = locomo.data_dir(args.data)
    names = [n.strip() for n in args.conversations.split(",") if n.strip()] or None
    if not folder.is_dir():
        print(f"no LoCoMo conversations at {folder}", file=sys.stderr)
        return 1
    # Open WebUI stamps every message; LoCoMo dates its sessions: each message gets its session's time
    chats = [locomo.with_timestamps(chat) for chat in locomo.load(folder, names)]
    if args.quick:
        chats = [min(chats, key=lambda c: len(c.exchanges))]
    from echo.support import logs

    logs.configure_logging("ERROR", "console")
    started = time.perf_counter()
    met = True
    for args.threshold, args.max_context in windows:
        print(f"\n== compression window: threshold {args.threshold:,}, max context {args.max_context:,} ==")
        met = asyncio.run(run(args, chats)) and met
    print(
        f"\n{'every goal met' if met else 'a goal is NOT MET'}; "
        f"measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC "
        f"in {time.perf_counter() - started:.0f} s on {os.cpu_count()} CPUs, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} (data: {folder})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
