"""Long-term memory on LoCoMo beside a raw-turn baseline, recall latency, and distillation throughput.

Part 1, evidence recall. Each LoCoMo conversation (`../shared/data/locomo/`) is played as one user's
chat through `echo_memory`'s outlet, one completed turn after the other; an in-process worker runs the
`distill` jobs (offline provider, the packaged MiniLM embedder, Qdrant local mode: what `echoctl
serve` runs with nothing configured). Then, for each QA pair of categories 1–4, the question recalls
the user's top 10 memories; the pair counts when the provenance of one of them (the windows it was
distilled from) holds one of the pair's evidence dialog turns. Baseline: every raw turn embedded as
its own item, top 10 turns, the pair counts when one of them is an evidence turn. Side by side: the
items each method stores. Then answer recall at the block's budget (issue 20): for each floor of
`FLOORS`, the block `echo_memory`'s recall makes (`RECALL_TOP_K`, `RECALL_MAX_TOKENS`) holds at least
half of the answer's content words, against the raw turns nearest to the question within the same
tokens; and the calibration of the floor: the share of memories holding their question's answer kept
above it, and the share of another conversation's questions (nothing there can help) that still get
a memory above it. `--recall-only` stops after part 1.

Part 2, recall latency: `echo_memory`'s inlet, in-process, for a user with 1,000 memories (p50/p99).

Part 3, distillation throughput: N windows distilled by 1, 2 and 4 `echoctl worker` processes
(one job at a time each) against the fake Gemini server answering every call after 200 ms.

Part 4, cleaning: tokens of a window as `_clean_messages` renders it against `str(messages)`, on the
Open WebUI 0.12.4 bodies in `../shared/fixtures/` and on Open WebUI-shaped LoCoMo windows.

    .venv/bin/python bench/memory.py [--conversations 26,30,44] [--jobs 48] [--skip-processes] [--recall-only]

Uses ECHO_DATABASE_URL when set (throwaway tenants, dropped after), else an embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import stores
from contract.embedding_server import StubEmbeddingServer
from fakes.gemini_server import FakeGemini
from fakes.live_server import LiveServer
from fakes.memory_llm import memory_answer

from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.embeddings import local
from echo.adapters.store import conversations, memories, pool
from echo.adapters.vectors import qdrant
from echo.capabilities import backends as capability_backends
from echo.capabilities import base, handlers
from echo.capabilities.memory import backends as memory_backends
from echo.capabilities.memory import filter as memory_filter
from echo.capabilities.memory import payloads as memory_payloads
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import bodies, chain, kinds, tokens, transcripts
from echo.domain.compression import messages as msgs
from echo.domain.memory import cleaning, recall
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base
from echo.queue import queue, worker

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
LOCOMO = SHARED / "data" / "locomo"
FIXTURES = SHARED / "fixtures" / "owui-0.12.4"
CATEGORIES = (1, 2, 3, 4)
TOP_K = 10
FLOORS = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
GOAL_FEWER = 5.0
GOAL_SPEEDUP = 3.5


@dataclass
class Runtime:
    """What `echo_memory` reaches: the store, the embedder and the vectors."""

    store: pool.Store
    embedder: local.LocalEmbedder
    vectors: qdrant.QdrantVectorStore

    def backends(self) -> backends_port.Backends:
        """The backends port over these parts, as the hook service's runtime gives it."""
        return backends_port.Backends(
            store=capability_backends.on_store(self.store), index=memory_backends.RuntimeBackends(self)
        )


def ctx(
    phase: str, user_id: str, body: dict[str, Any], valves: valves_module.MemoryValves
) -> base.HookContext:
    deadline = time.monotonic() + valves.INLET_DEADLINE_MS / 1000 if phase == "inlet" else None
    return base.HookContext(
        "echo_memory", phase, {"id": user_id}, bodies.turn_ids(body, {"id": user_id}), valves, deadline
    )


async def drain(store: pool.Store, runtime: Runtime, settings: Settings) -> None:
    registry = handlers.builtin_registry(
        settings, capability_backends.on_store(store), index=memory_backends.RuntimeBackends(runtime)
    )
    running = worker.Worker(
        store, registry, lease_seconds=60, poll_seconds=0.2, grace_seconds=5, metrics_seconds=60
    )
    await running.start()
    try:
        await _until_done(store)
    finally:
        await running.stop()
        for spec in registry:  # the handlers' LLM clients
            close = getattr(spec.handler, "aclose", None)
            if close is not None:
                await close()


# -- part 1 -------------------------------------------------------------------------------------


@dataclass
class Recall:
    name: str
    items: int = 0
    turns: int = 0
    hits: int = 0
    questions: int = 0


@dataclass
class Floor:
    """Recall at the block's token budget with one relevance floor, and the raw turns at its cost."""

    floor: float
    questions: int = 0
    injected: int = 0  # questions that got a block at all
    items: int = 0
    helpful: int = 0  # injected memories that hold the answer
    tokens: int = 0  # memory text tokens injected, all questions
    answered: int = 0
    raw_answered: int = 0  # raw turns by similarity within the same tokens, per question


@dataclass
class Calibration:
    floors: list[Floor]
    helpful_scores: list[float]  # cosine of each retrieved memory that holds its question's answer
    best_scores: list[float]  # cosine of the nearest memory, per question
    noise_scores: list[float]  # cosine of the nearest memory to another conversation's question
    lengths: list[int]  # characters of each stored memory text
    length_tokens: list[int]


_ANSWER_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ANSWER_STOPWORD_TEXT = """a an the of in on at to for and or but is are was were be been it its this that
with by from as he she they his her their them him we our you your i my me"""
_ANSWER_STOPWORDS = frozenset(_ANSWER_STOPWORD_TEXT.split())


def _answer_words(text: str) -> set[str]:
    return {w.lower() for w in _ANSWER_WORD.findall(text)} - _ANSWER_STOPWORDS


def answered(answer: str, text: str) -> bool:
    """Answer recall (issue 20): at least half of the answer's content words are in ``text``."""
    wanted = _answer_words(str(answer))
    if not wanted:
        return False
    return 2 * len(wanted & _answer_words(text)) >= len(wanted)


def _raw_within(hits: Sequence[vectors_base.Hit], texts: dict[str, str], budget: int) -> str:
    """The raw turns nearest first while their tokens fit ``budget`` (the memories' cost)."""
    taken: list[str] = []
    left = budget
    for hit in hits:
        text = texts.get(hit.id, "")
        cost = tokens.estimate_tokens(text)
        if cost <= left:
            taken.append(text)
            left -= cost
    return " ".join(taken)


async def part_one(
    dsn: str, names: Sequence[str], workdir: Path, embedder: local.LocalEmbedder
) -> tuple[list[Recall], Calibration]:
    ours, baseline = Recall("ECHO memories (windows 5+2)"), Recall("baseline: every raw turn")
    floors: dict[float, Floor] = {}
    helpful_scores: list[float] = []
    best_scores: list[float] = []
    lengths: list[int] = []
    length_tokens: list[int] = []
    foreign: list[tuple[str, qdrant.QdrantVectorStore, Runtime]] = []
    valves = valves_module.MemoryValves()
    settings = Settings(data_dir=workdir, llm_provider="offline")
    dimension = await embedder.probe()
    for name in names:
        [transcript] = transcripts.parse(json.loads((LOCOMO / f"{name}.json").read_text()), name)
        user = f"locomo-{name}"
        async with stores.tenant_store(
            dsn, f"bench-mem-{uuid.uuid4().hex[:8]}", application="bench-memory"
        ) as store:
            vectors = qdrant.QdrantVectorStore.connect(
                dimension=dimension, tenant="bench", path=workdir / f"qdrant-{name}"
            )
            runtime = Runtime(store, embedder, vectors)
            backends = runtime.backends()
            flt = memory_filter.MemoryFilter(lambda backends=backends: backends)
            recorded = [m.recorded() for m in transcript.messages]
            sources = {m.id: m.sources for m in transcript.messages}
            started = time.perf_counter()
            for end in range(2, len(recorded) + 1, 2):
                body = {"chat_id": f"chat-{name}", "id": recorded[end - 1]["id"], "messages": recorded[:end]}
                await flt.outlet(body, ctx("outlet", user, body, valves))
            await drain(store, runtime, settings)
            links = chain.build_chain(recorded)
            by_invariant = {link.invariant: sources[link.message_id or ""] for link in links}
            rows = await memories.Memories(store).list(user, limit=100000)
            covered = {
                row.memory.id: {
                    d for w in row.memory.provenance for i in w.invariants for d in by_invariant.get(i, ())
                }
                for row in rows
            }
            ingest = time.perf_counter() - started
            # the baseline: every raw turn, embedded
            raw = qdrant.QdrantVectorStore.connect(
                dimension=dimension, tenant="raw", path=workdir / f"raw-{name}"
            )
            texts = [cleaning.clean_text(str(m["content"])) for m in recorded]
            vectors_raw = await embedder.embed(texts)
            await raw.upsert(
                vectors_base.Kind.MEMORY,
                [
                    vectors_base.Point(
                        id=m["id"], vector=v, user_id=user, payload={"sources": list(sources[m["id"]])}
                    )
                    for m, v in zip(recorded, vectors_raw, strict=True)
                ],
            )
            questions = [q for q in transcript.questions if q.category in CATEGORIES and q.evidence]
            question_vectors = await embedder.embed([q.text for q in questions])
            raw_texts = {m["id"]: text for m, text in zip(recorded, texts, strict=True)}
            for question, vector in zip(questions, question_vectors, strict=True):
                evidence = set(question.evidence)
                hits = await vectors.search(
                    vectors_base.Kind.MEMORY, vector, user_id=user, limit=memory_filter.RECALL_CANDIDATES
                )
                ours.hits += any(covered.get(hit.id, set()) & evidence for hit in hits[:TOP_K])
                raw_hits = await raw.search(vectors_base.Kind.MEMORY, vector, user_id=user, limit=100)
                baseline.hits += any(set(hit.payload["sources"]) & evidence for hit in raw_hits[:TOP_K])
                candidates = [recall.candidate(hit.id, hit.score, hit.payload) for hit in hits]
                for floor in FLOORS:
                    chosen = recall.select(
                        recall.rank(candidates, min_similarity=floor),
                        budget_tokens=valves.RECALL_MAX_TOKENS,
                        limit=valves.RECALL_TOP_K,
                        counter=tokens.estimate_tokens,
                    )
                    found = floors.setdefault(floor, Floor(floor))
                    found.questions += 1
                    found.injected += bool(chosen)
                    text = " ".join(c.summary for c in chosen)
                    cost = sum(tokens.estimate_tokens(c.summary) for c in chosen)
                    found.tokens += cost
                    found.answered += answered(question.answer, text)
                    helpful = [c for c in chosen if answered(question.answer, c.summary)]
                    found.helpful += len(helpful)
                    found.items += len(chosen)
                    found.raw_answered += answered(question.answer, _raw_within(raw_hits, raw_texts, cost))
                for hit in hits:  # the calibration: the similarity of memories that hold the answer
                    if answered(question.answer, str(hit.payload.get("summary") or "")):
                        helpful_scores.append(hit.score)
                if hits:
                    best_scores.append(hits[0].score)
            lengths.extend(len(row.memory.summary) for row in rows)
            length_tokens.extend(tokens.estimate_tokens(row.memory.summary) for row in rows)
            foreign.append((user, vectors, runtime))
            for method, items in ((ours, len(rows)), (baseline, len(recorded))):
                method.items += items
                method.turns += len(recorded)
                method.questions += len(questions)
            outcomes = dict(
                await store.fetch("SELECT outcome, count(*) FROM memory_windows GROUP BY outcome")
            )
            print(
                f"  {name}: {len(recorded)} turns, {len(rows)} memories, windows {outcomes},"
                f" ingest {ingest:.1f} s"
            )
            await raw.aclose()
    # Questions asked of another conversation's memories: nothing there can help, so what the
    # floor lets through is noise (the floor's other side).
    noise_scores: list[float] = []
    for index, (user, vectors, _runtime) in enumerate(foreign):
        other = names[(index + 1) % len(names)]
        if len(names) < 2:
            break
        [transcript] = transcripts.parse(json.loads((LOCOMO / f"{other}.json").read_text()), other)
        asked = [q.text for q in transcript.questions if q.category in CATEGORIES][:100]
        for vector in await embedder.embed(asked):
            hits = await vectors.search(vectors_base.Kind.MEMORY, vector, user_id=user, limit=1)
            noise_scores.extend(hit.score for hit in hits)
    for _user, vectors, _runtime in foreign:
        await vectors.aclose()
    return [ours, baseline], Calibration(
        sorted(floors.values(), key=lambda f: f.floor),
        helpful_scores,
        best_scores,
        noise_scores,
        lengths,
        length_tokens,
    )


# -- part 2 -------------------------------------------------------------------------------------


async def part_two(
    dsn: str, workdir: Path, embedder: local.LocalEmbedder, requests: int
) -> tuple[float, float, int]:
    [transcript] = transcripts.parse(json.loads((LOCOMO / "26.json").read_text()), "26")
    lines = [cleaning.clean_text(str(m.content)) for m in transcript.messages]
    texts = [" ".join(lines[i : i + 3]) for i in range(0, 3000, 3)][:1000]
    while len(texts) < 1000:
        texts.append(f"memory {len(texts)}: " + lines[len(texts) % len(lines)])
    dimension = await embedder.probe()
    vectors = qdrant.QdrantVectorStore.connect(dimension=dimension, tenant="lat", path=workdir / "latency")
    now = time.time()
    embedded_texts = await embedder.embed(texts)
    points = [
        vectors_base.Point(
            id=str(uuid.uuid4()),
            vector=v,
            user_id="heavy",
            payload={
                "summary": t,
                "memory_importance": 1 + i % 5,
                "timestamp": now - i * 3600,
                "tags": ["locomo"],
            },
        )
        for i, (t, v) in enumerate(zip(texts, embedded_texts, strict=True))
    ]
    for start in range(0, len(points), 200):
        await vectors.upsert(vectors_base.Kind.MEMORY, points[start : start + 200])
    count = await vectors.count(vectors_base.Kind.MEMORY, user_id="heavy")
    async with stores.tenant_store(
        dsn, f"bench-lat-{uuid.uuid4().hex[:8]}", application="bench-memory"
    ) as store:
        runtime = Runtime(store, embedder, vectors)
        backends = runtime.backends()
        flt = memory_filter.MemoryFilter(lambda: backends)
        valves = valves_module.MemoryValves()
        questions = [q.text for q in transcript.questions]
        samples = []
        for i in range(requests + 10):
            body = {
                "messages": [{"role": "user", "content": questions[i % len(questions)]}],
                "metadata": {"chat_id": "x"},
            }
            started = time.perf_counter()
            answer = await flt.inlet(body, ctx("inlet", "heavy", body, valves))
            if i >= 10:  # warm-up
                samples.append((time.perf_counter() - started) * 1000)
            assert answer is not None
    await vectors.aclose()
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * (len(samples) - 1))], count


# -- part 3 -------------------------------------------------------------------------------------


async def part_three(
    dsn: str, workdir: Path, jobs: int, counts: Sequence[int], embedding_url: str | None
) -> list[tuple[int, float, float]]:
    [transcript] = transcripts.parse(json.loads((LOCOMO / "30.json").read_text()), "30")
    recorded = [m.recorded() for m in transcript.messages]
    rows = []
    with FakeGemini() as gemini:
        gemini.responder = memory_answer
        gemini.latency_s = 0.2
        for count in counts:
            tenant = f"bench-tp-{uuid.uuid4().hex[:8]}"
            where = workdir / f"tp-{count}-{'remote' if embedding_url else 'local'}"
            async with stores.tenant_store(dsn, tenant) as store:
                seconds = await _throughput(
                    store, dsn, tenant, where, gemini, recorded, jobs, count, embedding_url
                )
            rows.append((count, seconds, jobs / seconds))
    return rows


async def _enqueue(
    store: pool.Store, recorded: list[dict[str, Any]], first: int, number: int, tag: str
) -> None:
    talk, jobs = conversations.Conversations(store), queue.JobQueue(store)
    async with store.transaction() as connection:
        for n in range(first, first + number):
            window = recorded[(n * 7) % (len(recorded) - 7) :][:7]
            links = chain.build_chain(window)
            user = f"{tag}-{n}"  # one user per window: every job is one model call, no merge
            await talk.remember(
                user,
                {
                    link.invariant: conversations.stored_message(m)
                    for link, m in zip(links, window, strict=True)
                },
                connection=connection,
            )
            job = memory_payloads.DistillPayload(
                user_id=user,
                chat_id="c",
                key=links[-1].cumulative,
                start=0,
                parent=None,
                invariants=tuple(link.invariant for link in links),
            )
            await jobs.enqueue(
                kinds.DISTILL,
                job.to_payload(),
                idempotency_key=f"distill:{user}:{job.key}",
                connection=connection,
            )


async def _throughput(
    store: pool.Store,
    dsn: str,
    tenant: str,
    workdir: Path,
    gemini: FakeGemini,
    recorded: list[dict[str, Any]],
    jobs: int,
    count: int,
    embedding_url: str | None,
) -> float:
    env_base = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    echoctl = str(Path(sys.executable).with_name("echoctl"))
    processes = []
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    try:
        for n in range(count):
            env = {
                **env_base,
                "ECHO_DATABASE_URL": dsn,
                "ECHO_TENANT": tenant,
                "ECHO_QDRANT_PATH": str(workdir / f"qdrant-{n}"),
                "ECHO_LLM_PROVIDER": "gemini",
                "ECHO_GEMINI_API_KEY": "bench",
                "ECHO_GEMINI_BASE_URL": gemini.base_url,
                "ECHO_WORKER_METRICS_PORT": "0",
                "ECHO_LOG_LEVEL": "WARNING",
                "ECHO_JOB_POLL_SECONDS": "0.5",
                **({"ECHO_EMBEDDING_URL": embedding_url} if embedding_url else {}),
            }
            log = (workdir / f"worker-{n}.log").open("wb")
            processes.append(
                await asyncio.create_subprocess_exec(
                    echoctl, "worker", "--concurrency", "1", env=env, stdout=log, stderr=log
                )
            )
        await _enqueue(store, recorded, 0, 2 * count, "warm")  # every process loads its model first
        await _until_done(store)
        await store.execute("DELETE FROM jobs")
        await _enqueue(store, recorded, 2 * count, jobs, "bench")
        started = time.perf_counter()
        await _until_done(store)
        return time.perf_counter() - started
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            await process.wait()


async def _until_done(store: pool.Store, within: float = 600) -> None:
    deadline = time.monotonic() + within
    while await store.fetchval("SELECT count(*) FROM jobs WHERE state IN ('pending', 'running')"):
        if time.monotonic() > deadline:
            raise RuntimeError("distill jobs not done in time")
        await asyncio.sleep(0.05)
    dead = await store.fetchval("SELECT count(*) FROM jobs WHERE state = 'dead'")
    if dead:
        raise RuntimeError(
            f"{dead} distill jobs died: "
            f"{await store.fetchval('SELECT last_error FROM jobs WHERE state = $1', 'dead')}"
        )


# -- part 4 -------------------------------------------------------------------------------------


def part_four() -> list[tuple[str, int, int]]:
    rows = []
    for path in sorted(FIXTURES.glob("*outlet*.json")):
        body = json.loads(path.read_text())["body"]
        body = body.get("body", body)
        messages = body.get("messages") or []
        if not messages:
            continue
        rows.append((path.stem, tokens.estimate_tokens(str(messages)), _clean_tokens(messages)))
    [transcript] = transcripts.parse(json.loads((LOCOMO / "26.json").read_text()), "26")
    windows = []
    for i, message in enumerate(transcript.messages[:70]):  # as Open WebUI stores a chat's messages
        windows.append(
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_OID, message.id)),
                "parentId": str(uuid.uuid5(uuid.NAMESPACE_OID, f"p{i}")),
                "childrenIds": [str(uuid.uuid5(uuid.NAMESPACE_OID, f"c{i}"))],
                "role": message.role,
                "content": message.content,
                "timestamp": 1795981950 + i,
                "models": ["gemini-2.5-flash"],
                "model": "gemini-2.5-flash",
                "modelName": "gemini-2.5-flash",
                "modelIdx": 0,
                "userContext": None,
                "done": True,
                "usage": {"prompt_tokens": 1200 + i, "completion_tokens": 80, "total_tokens": 1280 + i},
                "info": {"total_duration": 123456789, "load_duration": 1234567, "eval_count": 80},
            }
        )
    for start in range(0, 70, 7):
        window = windows[start : start + 7]
        rows.append(
            (f"locomo-26 window {start // 7 + 1}", tokens.estimate_tokens(str(window)), _clean_tokens(window))
        )
    return rows


def _clean_tokens(messages: list[dict[str, Any]]) -> int:
    turns = [messages[i] for i in msgs.turn_positions(msgs.kinds_of(messages))]
    return max(1, tokens.estimate_tokens(cleaning.render(cleaning.clean_messages(turns))))


# -- main ---------------------------------------------------------------------------------------


def _share_at_least(scores: Sequence[float], floor: float) -> str:
    return f"{sum(s >= floor for s in scores) / len(scores):.1%}" if scores else "-"


def print_calibration(calibration: Calibration) -> None:
    valves = valves_module.MemoryValves()
    lengths, length_tokens = calibration.lengths, calibration.length_tokens
    if lengths:
        print(
            f"\nMemory texts: {len(lengths)}, {statistics.mean(lengths):.0f} characters on average"
            f" (median {statistics.median(lengths):.0f}), {statistics.mean(length_tokens):.1f} tokens"
        )
    print(
        f"\nAnswer recall of the recalled block (RECALL_MAX_TOKENS {valves.RECALL_MAX_TOKENS},"
        f" RECALL_TOP_K {valves.RECALL_TOP_K}) by floor on cosine, against raw turns at the same tokens;"
        " helpful kept: memories holding their question's answer at or above the floor;"
        " noise let in: another conversation's questions whose nearest memory is at or above it"
    )
    print(
        "| floor | answer recall | raw turns, same tokens | questions with a block | memories per block"
        " | share helpful | tokens per block | helpful kept | noise let in |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in calibration.floors:
        n = max(1, row.questions)
        print(
            f"| {row.floor:.2f} | {row.answered / n:.1%} | {row.raw_answered / n:.1%}"
            f" | {row.injected / n:.1%}"
            f" | {row.items / n:.2f} | {row.helpful / max(1, row.items):.1%} | {row.tokens / n:.0f}"
            f" | {_share_at_least(calibration.helpful_scores, row.floor)}"
            f" | {_share_at_least(calibration.noise_scores, row.floor)} |"
        )
    helpful = sorted(calibration.helpful_scores)
    if helpful:
        tenth = helpful[len(helpful) // 10]
        print(
            f"(10th percentile of helpful memories' cosine: {tenth:.3f};"
            f" in force: {valves.RECALL_MIN_SIMILARITY})"
        )


async def print_part_three(dsn: str, workdir: Path, jobs: int) -> None:
    print(f"\nPart 3: {jobs} windows, fake Gemini at 200 ms per call, `echoctl worker --concurrency 1`")
    print(f"({os.cpu_count()} cores here; the bench, PostgreSQL and every worker share them)")
    print("| embedder | worker processes | seconds | windows/s | speed-up |\n|---|---:|---:|---:|---:|")
    server = StubEmbeddingServer()
    with LiveServer(server.app, name="stub-embeddings") as live:
        for label, url in (("MiniLM in each worker (CPU)", None), ("remote /embeddings (stub)", live.url)):
            rows = await part_three(dsn, workdir, jobs, [1, 2, 4], url)
            for count, seconds, rate in rows:
                print(f"| {label} | {count} | {seconds:.1f} | {rate:.2f} | {rate / rows[0][2]:.2f}x |")
    print(f"(goal: >= {GOAL_SPEEDUP}x at 4)")


async def main(args: argparse.Namespace) -> None:
    if not LOCOMO.is_dir():
        raise SystemExit(f"LoCoMo data not found at {LOCOMO} (../shared/ is absent)")
    names = [n.strip() for n in args.conversations.split(",") if n.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        workdir = Path(tmp)
        async with stores.database(workdir) as dsn:
            embedder = local.LocalEmbedder(embeddings_factory.packaged_model_path())
            print(
                f"Part 1: LoCoMo {', '.join(names)} through echo_memory"
                " (offline provider, MiniLM, Qdrant local)"
            )
            recall_rows, calibration = await part_one(dsn, names, workdir, embedder)
            print_calibration(calibration)
            print()
            print(
                f"| method | items stored | turns | items per turn | evidence recall@{TOP_K} (QA cat. 1–4) |"
            )
            print("|---|---:|---:|---:|---:|")
            for row in recall_rows:
                print(f"| {row.name} | {row.items} | {row.turns} | {row.items / row.turns:.3f} | "
                      f"{row.hits / row.questions:.1%} ({row.hits}/{row.questions}) |")  # fmt: skip
            ours, baseline = recall_rows
            fewer = baseline.items / max(1, ours.items)
            ours_rate, base_rate = ours.hits / ours.questions, baseline.hits / baseline.questions
            print(
                f"\n{fewer:.1f}x fewer items than the baseline (goal >= {GOAL_FEWER:.0f}x); "
                f"recall {ours_rate:.1%} vs {base_rate:.1%} (goal: above)"
            )

            if args.recall_only:
                await embedder.aclose()
                return
            p50, p99, count = await part_two(dsn, workdir, embedder, args.requests)
            print(
                f"\nPart 2: echo_memory inlet (embed + search + rank + render), in-process, {count} memories"
            )
            print("| memories | p50 | p99 |\n|---:|---:|---:|")
            print(f"| {count} | {p50:.1f} ms | {p99:.1f} ms |")
            await embedder.aclose()

            if not args.skip_processes:
                await print_part_three(dsn, workdir, args.jobs)

    print("\nPart 4: tokens of a window, str(messages) against _clean_messages")
    print("| window | str(messages) | cleaned | ratio |\n|---|---:|---:|---:|")
    cleaned = part_four()
    for name, raw, clean in cleaned:
        print(f"| {name} | {raw} | {clean} | {raw / clean:.1f}x |")
    total_raw, total_clean = sum(r[1] for r in cleaned), sum(r[2] for r in cleaned)
    print(f"| all | {total_raw} | {total_clean} | {total_raw / total_clean:.1f}x |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", default="26,30,44")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=48)
    parser.add_argument("--skip-processes", action="store_true")
    parser.add_argument("--recall-only", action="store_true", help="part 1 only (recall and the floor)")
    asyncio.run(main(parser.parse_args()))
