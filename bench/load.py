"""Load and faults: N concurrent chats through echo-hooks replicas and `echoctl worker` processes on
PostgreSQL, with compression and memory active, then the same load through one fault at a time.

Topology (all on this machine, loopback only): the PostgreSQL server (ECHO_DATABASE_URL, else
127.0.0.1:5432; a throwaway tenant schema, dropped at the end), the Infinity embedder serving MiniLM
(`make infinity`; without it each process embeds in-process), `--replicas` `echoctl serve` and
`--workers` `echoctl worker --concurrency C`, and the fake Gemini (the real google-genai SDK talks to
it; `--llm-seconds` per call) for summaries and distillation. Every user's Qdrant holds `--memories`
memories before the run, so each inlet's recall embeds the question and searches a populated
collection. Valves: compression past 1,500 tokens (a summary every few turns of a chat), a memory
window every 5 messages (`bench/load_chats.py` plays Open WebUI: every inlet, the model, every outlet;
`--via function`, the default, calls them as ECHO's Function does, `POST /hooks/inlet` and `/hooks/outlet`
with every filter in each, `--via pipelines` as a Pipelines connection does, one call per filter).

Part 1, levels: `--levels` concurrent chats (default 10, 25, 50, 200) of `--turns` turns each, a
`--model-seconds` answer and `--think-seconds` pause per turn. Per level: turns/s, p50/p99 of every
hook, inlets over their 800 ms deadline, the queue's depth over time, time to drain, and at the end
enqueued = done. The knee: the largest level whose every inlet p99 stays under the deadline; CPU time
per turn of each part sizes replicas (docs/operations/sizing.md).

Part 2, faults during `--fault-chats` chats: a worker killed with SIGKILL mid-job (restarted after
5 s, as a pod); PostgreSQL stopped for `--db-outage` s; the embedder stopped for 30 s; the LLM
answering 429 and 500 for `--llm-outage` s; a hook replica killed (restarted after 5 s); a hook
replica stopped as a rolling update stops it (endpoint removed, preStop, SIGTERM). Per
scenario: inlets answered 200 (and within the deadline), turns Open WebUI would have failed, jobs
done or dead with their error, windows never enqueued, memories or summaries duplicated, and the
time to recover. The vector store cannot be stopped apart here (no Qdrant server on these machines;
local mode runs inside each process): that row says so.

    .venv/bin/python bench/load.py [--levels 10,25,50,200] [--via function|pipelines]
        [--faults all|none|worker,postgres,drain,...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx
import load_chats
import load_cluster
import servers
import stores
from fakes.gemini_server import FakeGemini
from fakes.memory_llm import memory_answer

from echo.adapters.store import pool, testing
from echo.adapters.vectors import qdrant
from echo.ports import vectors as vectors_base
from echo.queue import queue
from echo.support import logs
from echo_operator.render import hooks as render_hooks

KEY = "load-bench-key"
DEADLINE_MS = 800.0  # every filter's inlet deadline (valves INLET_DEADLINE_MS / inlet_deadline_ms)
WINDOW_SIZE = 5
VALVES: dict[str, object] = {
    "echo_compression": {
        "compression_threshold_tokens": 1500,
        "max_context_tokens": 6000,
        "max_summary_tokens": 600,
        "keep_last": 6,
        "model_thresholds": {},
    },
    "echo_memory": {"WINDOW_SIZE": WINDOW_SIZE, "WINDOW_OVERLAP": 2},
    "echo_context": {},
}
SCENARIOS = ("worker", "postgres", "embedder", "vectors", "llm", "replica", "drain")


def model_answer(body: dict[str, Any]) -> str:
    """As a model would answer ECHO's jobs: a distillation (facts) or a merge (a summary) as JSON
    (tests/fakes/memory_llm.py), a merge's summary cut to 60 words; a summary of the last words it was
    given for compression."""
    if body.get("generationConfig", {}).get("responseMimeType") == "application/json":
        answer = json.loads(memory_answer(body))
        if isinstance(answer.get("summary"), str):
            answer["summary"] = " ".join(answer["summary"].split()[:60])
        return json.dumps(answer)
    words = " ".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", [])).split()
    return "The user and the assistant discussed: " + " ".join(words[-120:])


# -- measurements --------------------------------------------------------------------------------


@dataclass
class QueueSample:
    at: float
    counts: dict[str, int]


@dataclass
class Outcome:
    """What one run (a level or a scenario) measured."""

    name: str
    chats: int
    wall_s: float = 0.0
    turns: int = 0
    samples: list[load_chats.Sample] = field(default_factory=list)
    failed_turns: int = 0
    errors: list[str] = field(default_factory=list)
    queue: list[QueueSample] = field(default_factory=list)
    drain_s: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)
    missing_windows: int = 0
    duplicates: dict[str, int] = field(default_factory=dict)
    recovery_s: float | None = None
    note: str = ""
    dead_errors: list[str] = field(default_factory=list)

    def hook_ms(self, hook: str) -> list[float]:
        return [s.ms for s in self.samples if s.hook == hook and s.status == 200]

    @property
    def inlets(self) -> list[load_chats.Sample]:
        return [s for s in self.samples if s.hook.endswith("inlet")]


async def search_seconds(urls: list[str]) -> float:
    """Seconds the replicas spent in vector searches so far (their echo_vector_latency_seconds)."""
    total = 0.0
    async with httpx.AsyncClient(timeout=5) as http:
        for url in urls:
            try:
                text = (await http.get(f"{url}/metrics")).text
            except httpx.TransportError:
                continue
            for line in text.splitlines():
                if line.startswith('echo_vector_latency_seconds_sum{operation="search"}'):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def p(values: list[float], share: float) -> float:
    return servers.percentile(values, share) if values else float("nan")


async def queue_counts(store: pool.Store) -> dict[str, int]:
    rows = await store.fetch("SELECT state, count(*) AS n FROM jobs GROUP BY state")
    counts = {"pending": 0, "running": 0, "done": 0, "dead": 0}
    counts.update({row["state"]: int(row["n"]) for row in rows})
    return counts


async def sample_queue(store: pool.Store, into: list[QueueSample], stop: asyncio.Event) -> None:
    started = time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(Exception):
            into.append(QueueSample(time.monotonic() - started, await queue_counts(store)))
        await asyncio.sleep(1.0)


async def drain(store: pool.Store, within: float = 900.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        try:
            counts = await queue_counts(store)
        except Exception:
            await asyncio.sleep(1.0)
            continue
        if counts["pending"] + counts["running"] == 0:
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise RuntimeError(f"the queue did not drain within {within} s")


async def integrity(store: pool.Store, chats: list[load_chats.Chat]) -> tuple[int, dict[str, int]]:
    """Windows the chats made due with no distill job; memories and summaries stored twice."""
    expected = [key for chat in chats for key in chat.expected_distill_keys(WINDOW_SIZE)]
    found = {
        row["idempotency_key"]
        for row in await store.fetch(
            "SELECT idempotency_key FROM jobs WHERE kind = 'distill' AND idempotency_key = ANY($1::text[])",
            expected,
        )
    }
    duplicates = {
        "memory texts": await store.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM memories GROUP BY user_id, summary HAVING count(*) > 1) d"
        ),
        "windows in memories": await store.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM memories, jsonb_array_elements(provenance) w"
            " GROUP BY user_id, w->>'window' HAVING count(*) > 1) d"
        ),
        "summaries": await store.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM summaries GROUP BY user_id, refs HAVING count(*) > 1) d"
        ),
    }
    return len(set(expected) - found), {k: int(v) for k, v in duplicates.items()}


# -- a run ---------------------------------------------------------------------------------------


@dataclass
class Bench:
    store: pool.Store
    cluster: load_cluster.Cluster
    gemini: FakeGemini
    args: argparse.Namespace
    balancers: list[load_chats.Balancer] = field(default_factory=list)

    async def run(
        self,
        name: str,
        chats: int,
        *,
        turns: int | None = None,
        seconds: float | None = None,
        fault: Callable[[Outcome], Awaitable[None]] | None = None,
        seed: int = 0,
    ) -> Outcome:
        outcome = Outcome(name, chats)
        everyone = [load_chats.Chat(i, seed) for i in range(chats)]
        recorder = load_chats.Recorder()
        balancer = load_chats.Balancer(self.cluster.urls)
        self.balancers = [balancer]
        stop_sampling = asyncio.Event()
        sampler = asyncio.create_task(sample_queue(self.store, outcome.queue, stop_sampling))
        cpu_before = {
            **self.cluster.cpu(),
            "generator": time.process_time(),
            "search": await search_seconds(self.cluster.urls),
        }
        jobs_before = await queue_counts(self.store)
        # One client per chat, as each Open WebUI request has its own connection: one shared pool of
        # hundreds of connections costs the generator more CPU than the service it measures.
        limits = httpx.Limits(max_connections=len(self.cluster.hooks) + 1, keepalive_expiry=30)
        headers = {"Authorization": f"Bearer {KEY}"}
        started = time.monotonic()
        until = None if seconds is None else started + seconds
        async with contextlib.AsyncExitStack() as clients:
            tasks = [
                load_chats.run_chat(
                    await clients.enter_async_context(
                        httpx.AsyncClient(headers=headers, timeout=60, limits=limits)
                    ),
                    balancer,
                    chat,
                    recorder,
                    turns=turns or 10_000,
                    until=until,
                    model_seconds=self.args.model_seconds,
                    via=self.args.via,
                    think_seconds=self.args.think_seconds,
                )
                for chat in everyone
            ]
            faults = [asyncio.create_task(fault(outcome))] if fault else []
            await asyncio.gather(*tasks)
            for task in faults:
                await task
        outcome.wall_s = time.monotonic() - started
        outcome.drain_s = await drain(self.store)
        cpu_after = {
            **self.cluster.cpu(),
            "generator": time.process_time(),
            "search": await search_seconds(self.cluster.urls),
        }
        stop_sampling.set()
        await sampler
        outcome.cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
        outcome.samples, outcome.failed_turns, outcome.errors = (
            recorder.samples,
            recorder.failed_turns,
            recorder.errors,
        )
        outcome.turns = sum(len(chat.messages) // 2 for chat in everyone)
        jobs_after = await retrying(lambda: queue_counts(self.store))
        outcome.jobs = {state: jobs_after[state] - jobs_before[state] for state in ("done", "dead")}
        outcome.jobs["enqueued"] = sum(jobs_after.values()) - sum(jobs_before.values())
        dead = await retrying(
            lambda: self.store.fetch(
                "SELECT kind, left(last_error, 160) AS error, count(*) AS n FROM jobs"
                " WHERE state = 'dead' AND updated_at >= now() - make_interval(secs => $1)"
                " GROUP BY 1, 2 ORDER BY 3 DESC",
                time.monotonic() - started,
            )
        )
        outcome.dead_errors = [f"{row['n']} × {row['kind']}: {row['error']}" for row in dead]
        outcome.missing_windows, outcome.duplicates = await retrying(lambda: integrity(self.store, everyone))
        return outcome


async def seed_memories(cluster: load_cluster.Cluster, users: int, per_user: int, tenant: str) -> None:
    """`per_user` memories of each user in every replica's Qdrant, embedded by the same model."""
    chats = [load_chats.Chat(i, 0) for i in range(users)]
    texts = [
        (chat, n, f"The user {fact}.")
        for chat in chats
        for n, fact in enumerate(
            [
                f"lives in {chat.facts['city']}",
                f"works as a {chat.facts['job']}",
                f"enjoys {chat.facts['hobby']}",
                f"has {chat.facts['pet']}",
                f"has a sister called {chat.facts['sibling']}",
                f"is preparing {chat.facts['plan']}",
                "is allergic to peanuts",
                "rereads a book about a lighthouse keeper every winter",
                "drinks too little water during shifts",
                "likes quick dinners with lentils",
            ][:per_user]
        )
    ]
    vectors = await embed([text for _, _, text in texts], cluster)
    points = [
        vectors_base.Point(
            id=f"seed-{chat.user_id}-{n}",
            vector=vector,
            user_id=chat.user_id,
            chat_id="seed",
            payload={
                "memory_id": f"seed_{n}",
                "provenance": [],
                "summary": text,
                "memory_importance": 3,
                "tags": ["seed"],
                "timestamp": time.time() - 86400 * n,
                "version": 1,
            },
        )
        for (chat, n, text), vector in zip(texts, vectors, strict=True)
    ]
    for replica in cluster.hooks:
        path = Path(replica.env["ECHO_QDRANT_PATH"])
        store = qdrant.QdrantVectorStore.connect(dimension=len(vectors[0]), tenant=tenant, path=path)
        for start in range(0, len(points), 500):
            await store.upsert(vectors_base.Kind.MEMORY, points[start : start + 500])
        await store.aclose()


async def embed(texts: list[str], cluster: load_cluster.Cluster) -> list[list[float]]:
    if cluster.embedder is not None and cluster.embedder.ready_url is not None:
        url = cluster.embedder.ready_url.removesuffix("/health")
        async with httpx.AsyncClient(timeout=120) as http:
            vectors: list[list[float]] = []
            for start in range(0, len(texts), 128):
                answer = await http.post(
                    f"{url}/embeddings", json={"model": "minilm", "input": texts[start : start + 128]}
                )
                answer.raise_for_status()
                vectors += [item["embedding"] for item in answer.json()["data"]]
            return vectors
    from echo.adapters.embeddings import factory, local

    embedder = local.LocalEmbedder(factory.packaged_model_path())
    try:
        return [list(v) for v in await embedder.embed(texts)]
    finally:
        await embedder.aclose()


# -- faults --------------------------------------------------------------------------------------


async def retrying(call: Callable[[], Awaitable[Any]], within: float = 120.0) -> Any:
    """``call()`` again until it works (the bench's own pool reconnecting after a restart)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def ready(urls: list[str]) -> bool:
    async with httpx.AsyncClient(timeout=2) as http:
        for url in urls:
            try:
                if (await http.get(f"{url}/readyz")).status_code != 200:
                    return False
            except httpx.TransportError:
                return False
    return True


async def recovered(bench: Bench, outcome: Outcome, back_at: float, cap: float = 600.0) -> None:
    """Time from the fault's end until every replica is ready and every job then waiting is done."""
    waiting = await retrying(
        lambda: bench.store.fetch("SELECT id FROM jobs WHERE state IN ('pending', 'running')")
    )
    ids = [row["id"] for row in waiting]
    while time.monotonic() - back_at < cap:
        left = await retrying(
            lambda: bench.store.fetchval(
                "SELECT count(*) FROM jobs WHERE id = ANY($1::bigint[]) AND state IN ('pending', 'running')",
                ids,
            )
        )
        if not left and await ready(bench.cluster.urls):
            outcome.recovery_s = time.monotonic() - back_at
            return
        await asyncio.sleep(0.25)


def scenario(bench: Bench, name: str) -> tuple[Callable[[Outcome], Awaitable[None]] | None, str]:
    """The fault of a scenario, or None with why it cannot run here."""
    lead = bench.args.fault_lead
    cluster = bench.cluster

    async def worker(outcome: Outcome) -> None:
        await asyncio.sleep(lead)
        running: list[Any] = []
        while not running:
            running = await bench.store.fetch("SELECT id FROM jobs WHERE state = 'running'")
            await asyncio.sleep(0.05)
        victim = cluster.distillers[0]
        victim.kill()
        killed_at = time.monotonic()
        await asyncio.sleep(5)
        await asyncio.to_thread(victim.start)
        ids = [row["id"] for row in running]
        query = "SELECT count(*) FROM jobs WHERE id = ANY($1::bigint[]) AND state IN ('pending', 'running')"
        while True:
            if not await bench.store.fetchval(query, ids):
                break
            await asyncio.sleep(0.25)
        outcome.recovery_s = time.monotonic() - killed_at
        attempts = await bench.store.fetch("SELECT attempts FROM jobs WHERE id = ANY($1::bigint[])", ids)
        outcome.note = (
            f"{len(ids)} jobs running at the kill; each done again after its lease expired "
            f"(attempts {sorted({int(r['attempts']) for r in attempts})}); recovery from the kill"
        )

    async def postgres(outcome: Outcome) -> None:
        control = load_cluster.restartable_postgres()
        assert control is not None
        await asyncio.sleep(lead)
        await asyncio.to_thread(subprocess.run, [*control, "stop", "-m", "fast"], check=True)
        await asyncio.sleep(bench.args.db_outage)
        await asyncio.to_thread(subprocess.run, [*control, "start"], check=True)
        back_at = time.monotonic()
        outcome.note = f"server stopped (fast: every connection cut) for {bench.args.db_outage:g} s"
        await recovered(bench, outcome, back_at)

    async def embedder(outcome: Outcome) -> None:
        assert cluster.embedder is not None
        await asyncio.sleep(lead)
        cluster.embedder.kill()
        await asyncio.sleep(30)
        await asyncio.to_thread(cluster.embedder.start)
        outcome.note = "Infinity killed, started again 30 s later (its start included)"
        await recovered(bench, outcome, time.monotonic())

    async def llm(outcome: Outcome) -> None:
        await asyncio.sleep(lead)
        before = bench.gemini.outage_answers
        bench.gemini.fail_for(bench.args.llm_outage, (429, 500))
        await asyncio.sleep(bench.args.llm_outage)
        outcome.note = (
            f"every generation call answered 429 or 500 for {bench.args.llm_outage:g} s "
            f"({bench.gemini.outage_answers - before} calls refused)"
        )
        await recovered(bench, outcome, time.monotonic())

    async def drain_replica(outcome: Outcome) -> None:
        await asyncio.sleep(lead)
        victim = cluster.hooks[-1]
        assert victim.ready_url is not None
        url = victim.ready_url.removesuffix("/healthz")
        for balancer in bench.balancers:
            balancer.leave(url, 30.0)  # the endpoint goes while preStop sleeps (5 s), as in the chart
        await asyncio.sleep(render_hooks.PRE_STOP_SECONDS)
        await asyncio.to_thread(victim.kill, signal.SIGTERM)
        await asyncio.sleep(5)
        await asyncio.to_thread(victim.start)
        outcome.note = (
            "a rolling update: the replica's endpoint leaves, 5 s later (preStop) SIGTERM; uvicorn "
            "finishes its requests in flight; started again 5 s later"
        )
        await recovered(bench, outcome, time.monotonic())

    async def replica(outcome: Outcome) -> None:
        await asyncio.sleep(lead)
        victim = cluster.hooks[-1]
        victim.kill()
        await asyncio.sleep(5)
        await asyncio.to_thread(victim.start)
        outcome.note = (
            "one of two replicas killed (SIGKILL), started again 5 s later; recovery from its start"
        )
        await recovered(bench, outcome, time.monotonic())

    if name == "vectors":
        return None, (
            "not run: no Qdrant server on these machines; local mode runs inside each process, so the "
            "vector store cannot stop apart from it (vector-store failures are covered by the "
            "integration tests with a failing store)"
        )
    if name == "postgres" and load_cluster.restartable_postgres() is None:
        return None, "not run: the local PostgreSQL cannot be restarted by this user (pg_ctlcluster, root)"
    if name == "embedder" and cluster.embedder is None:
        return None, "not run: no Infinity venv (make infinity)"
    if name in ("replica", "drain") and len(cluster.hooks) < 2:
        return None, "not run: needs --replicas 2 or more"
    faults = {
        "worker": worker,
        "postgres": postgres,
        "embedder": embedder,
        "llm": llm,
        "replica": replica,
        "drain": drain_replica,
    }
    return faults[name], ""


FAULT_TITLES = {
    "worker": "worker killed (SIGKILL) mid-job",
    "postgres": "PostgreSQL stopped and started",
    "embedder": "embedder (Infinity) stopped",
    "vectors": "vector store (Qdrant) stopped",
    "llm": "LLM answers 429/500",
    "replica": "hook replica killed (SIGKILL)",
    "drain": "hook replica stopped (SIGTERM)",
}


# -- report --------------------------------------------------------------------------------------


def hooks(outcomes: list[Outcome]) -> list[str]:
    """The hooks called in `outcomes`, in the order a turn calls them."""
    seen = {s.hook for o in outcomes for s in o.samples}
    names = [*load_chats.hooks_of("function"), *load_chats.hooks_of("pipelines")]
    return [f"{name} {phase}" for phase in ("inlet", "outlet") for name in names if f"{name} {phase}" in seen]


def late(outcome: Outcome) -> int:
    return sum(1 for s in outcome.inlets if s.status == 200 and s.ms > DEADLINE_MS)


def inlet_p99(outcome: Outcome) -> float:
    inlets = [h for h in hooks([outcome]) if h.endswith("inlet")]
    return max((p(outcome.hook_ms(h), 0.99) for h in inlets), default=float("nan"))


def turns_per_s(outcome: Outcome) -> float:
    return outcome.turns / outcome.wall_s if outcome.wall_s else 0.0


def series(outcome: Outcome, points: int = 12) -> str:
    """Jobs waiting or running, at about `points` moments of the run and its drain."""
    if not outcome.queue:
        return "(no sample)"
    step = max(1, len(outcome.queue) // points)
    picked = outcome.queue[::step]
    return "  ".join(f"{s.at:.0f}s:{s.counts['pending'] + s.counts['running']}" for s in picked)


def print_levels(levels: list[Outcome], args: argparse.Namespace) -> Outcome | None:
    print(
        f"\nPart 1: concurrent chats over {'the Function' if args.via == 'function' else 'Pipelines'}, "
        f"{args.turns} turns each ({args.model_seconds:g} s model answer, "
        f"{args.think_seconds:g} s pause), {args.replicas} hook replicas, {args.workers} worker(s) × "
        f"{args.concurrency}, LLM {args.llm_seconds:g} s per call"
    )
    header = (
        f"{'chats':>5} {'turns':>6} {'wall s':>7} {'turns/s':>8} {'inlet p99':>9} {'>800ms':>7} "
        f"{'non-200':>7} {'failed':>6} {'drain s':>7} {'max queue':>9} {'jobs':>6} {'done':>6} {'dead':>5} "
        f"{'lost':>5} {'dup':>4}"
    )
    print(header + "\n" + "-" * len(header))
    for o in levels:
        non_200 = sum(1 for s in o.samples if s.status != 200)
        peak = max((s.counts["pending"] + s.counts["running"] for s in o.queue), default=0)
        print(
            f"{o.chats:>5} {o.turns:>6} {o.wall_s:>7.1f} {turns_per_s(o):>8.2f} {inlet_p99(o):>9.1f} "
            f"{late(o):>7} {non_200:>7} {o.failed_turns:>6} {o.drain_s:>7.1f} {peak:>9} "
            f"{o.jobs['enqueued']:>6} {o.jobs['done']:>6} {o.jobs['dead']:>5} {o.missing_windows:>5} "
            f"{sum(o.duplicates.values()):>4}"
        )
    print("\nlatency per hook, ms (p50 / p99)")
    header = f"{'hook':<26}" + "".join(f"{f'{o.chats} chats':>20}" for o in levels)
    print(header + "\n" + "-" * len(header))
    for hook in hooks(levels):
        cells = "".join(f"{p(o.hook_ms(hook), 0.5):>9.1f} /{p(o.hook_ms(hook), 0.99):>8.1f}" for o in levels)
        print(f"{hook:<26}{cells}")
    print(
        "\nCPU per turn, ms (all parts share this machine's cores; the generator is this process: the"
        " simulated Open WebUI and the fake Gemini), and turns per CPU-second of echo-hooks. 'of which"
        " search': wall time of the hooks' vector searches, Qdrant local mode scanning in the hook"
        " process (a Qdrant server does this work instead)"
    )
    header = (
        f"{'chats':>5} {'hooks':>8} {'of which search':>15} {'workers':>8} {'embedder':>9} {'postgres':>9} "
        f"{'generator':>9} {'turns/hooks-core-s':>19}"
    )
    print(header + "\n" + "-" * len(header))
    for o in levels:
        per = {k: 1000 * v / max(1, o.turns) for k, v in o.cpu.items()}
        print(
            f"{o.chats:>5} {per['hooks']:>8.1f} {per['search']:>15.1f} {per['workers']:>8.1f} "
            f"{per['embedder']:>9.1f} {per['postgres']:>9.1f} {per['generator']:>9.1f} "
            f"{o.turns / max(o.cpu['hooks'], 1e-9):>19.1f}"
        )
    print("\nqueue depth over time (jobs waiting or running; seconds from the level's start)")
    for o in levels:
        print(f"{o.chats:>5} chats: {series(o)}")
        for error in o.dead_errors[:3]:
            print(f"      dead: {error}")
    fit = [o for o in levels if inlet_p99(o) < DEADLINE_MS and not o.failed_turns]
    knee = max(fit, key=turns_per_s) if fit else None
    if knee is None:
        print("\nknee: no level kept every inlet p99 under the deadline")
    else:
        print(
            f"\nknee: {knee.chats} chats, {turns_per_s(knee):.1f} turns/s with every inlet p99 under "
            f"{DEADLINE_MS:.0f} ms ({inlet_p99(knee):.0f} ms); echo-hooks spent "
            f"{1000 * knee.cpu['hooks'] / knee.turns:.1f} ms CPU per turn = "
            f"{knee.turns / knee.cpu['hooks']:.1f} turns/s per core"
        )
    return knee


def print_scale(knee: Outcome, concurrency: int) -> None:
    """Replicas for 1k and 100k active users, each sending a turn a minute at peak."""
    hooks_ms = 1000 * knee.cpu["hooks"] / knee.turns
    jobs = (knee.jobs["done"] + knee.jobs["dead"]) / max(1, knee.turns)
    print(
        f"\nscale (a turn per active user per minute at peak; echo-hooks at 70% of 1 CPU per replica, "
        f"{hooks_ms:.1f} ms per turn; {jobs:.2f} jobs per turn measured, a real LLM at 3 s per job, "
        f"{concurrency} jobs at once per worker)"
    )
    for users in (1_000, 100_000):
        rate = users / 60
        replicas = max(2, math.ceil(rate * hooks_ms / 1000 / 0.7))
        workers = max(1, math.ceil(rate * jobs * 3.0 / concurrency))
        print(f"{users:>7} users: {rate:7.1f} turns/s -> {replicas} hook replicas, {workers} workers")


def print_faults(rows: list[Outcome]) -> None:
    print("\nPart 2: faults under load")
    header = (
        f"{'scenario':<34} {'inlets 200':>11} {'>800ms':>7} {'inlet p99':>9} {'failed':>6} "
        f"{'outlet!=200':>11} {'jobs':>6} {'done':>6} {'dead':>5} {'lost':>5} {'dup':>4} {'recovery s':>10}"
    )
    print(header + "\n" + "-" * len(header))
    for o in rows:
        title = FAULT_TITLES.get(o.name, o.name)
        if not o.samples:
            print(f"{title:<34} {o.note}")
            continue
        inlets = o.inlets
        ok = sum(1 for s in inlets if s.status == 200)
        bad_outlets = sum(1 for s in o.samples if s.hook.endswith("outlet") and s.status != 200)
        recovery = f"{o.recovery_s:.1f}" if o.recovery_s is not None else "n/a"
        print(
            f"{title:<34} {f'{ok}/{len(inlets)}':>11} {late(o):>7} {inlet_p99(o):>9.1f} "
            f"{o.failed_turns:>6} {bad_outlets:>11} {o.jobs['enqueued']:>6} {o.jobs['done']:>6} "
            f"{o.jobs['dead']:>5} "
            f"{o.missing_windows:>5} {sum(o.duplicates.values()):>4} {recovery:>10}"
        )
    for o in rows:
        if o.samples:
            print(f"  {FAULT_TITLES.get(o.name, o.name)}: {o.note}")
            for error in sorted(set(o.errors))[:3]:
                print(f"    e.g. {error}")
            for error in o.dead_errors[:3]:
                print(f"    dead: {error}")


# -- main ----------------------------------------------------------------------------------------

FAULT_SECONDS = {
    "worker": 50.0,
    "postgres": 45.0,
    "embedder": 75.0,
    "llm": 30.0,
    "replica": 50.0,
    "drain": 50.0,
}


async def amain(args: argparse.Namespace) -> int:
    logs.configure_logging("WARNING", "console")
    dsn = os.environ.get("ECHO_DATABASE_URL") or testing.test_dsn()
    problem = await testing.unreachable(dsn)
    if problem:
        print(f"needs a PostgreSQL server: {problem}", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="echo-load-"))
    tenant = f"load-{os.getpid()}"
    names = (
        list(SCENARIOS) if args.faults == "all" else [] if args.faults == "none" else args.faults.split(",")
    )
    print(
        f"bench/load.py on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"work in {workdir}"
    )
    async with stores.tenant_store(dsn, tenant, application="echo-load") as store:
        with FakeGemini() as gemini:
            gemini.responder = model_answer
            gemini.latency_s = args.llm_seconds
            cluster = load_cluster.Cluster(
                workdir,
                dsn,
                tenant,
                KEY,
                gemini.base_url,
                VALVES,
                replicas=args.replicas,
                workers=args.workers,
                concurrency=args.concurrency,
            )
            try:
                cluster.start_embedder(servers.free_port)
                cluster.prepare(servers.free_port)
                users = max([*args.levels, args.fault_chats if names else 0])
                await seed_memories(cluster, users, args.memories, tenant)
                cluster.start_services()
                await testing.wait_for_listeners(store, queue.channel_for(store.schema), args.workers, 120)
                bench = Bench(store, cluster, gemini, args)
                await bench.run("warm-up", min(5, users), turns=3, seed=99)
                levels = []
                for index, chats in enumerate(args.levels):
                    levels.append(await bench.run(f"{chats} chats", chats, turns=args.turns, seed=index + 1))
                    print(f"  level {chats} chats done in {levels[-1].wall_s:.0f} s", flush=True)
                knee = print_levels(levels, args) if levels else None
                if knee is not None:
                    print_scale(knee, args.concurrency)
                    print(f"memory (RSS) at the end: {cluster.rss_mib()}")
                rows = []
                for index, name in enumerate(names):
                    fault, why = scenario(bench, name)
                    if fault is None:
                        rows.append(Outcome(name, 0, note=why))
                        continue
                    seconds = (
                        args.fault_lead + FAULT_SECONDS[name] + (args.llm_outage if name == "llm" else 0)
                    )
                    seconds += args.db_outage if name == "postgres" else 0
                    rows.append(
                        await bench.run(
                            name, args.fault_chats, seconds=seconds, fault=fault, seed=100 + index
                        )
                    )
                    print(f"  scenario {name} done in {rows[-1].wall_s:.0f} s", flush=True)
                if rows:
                    print_faults(rows)
            finally:
                cluster.stop()
                control = load_cluster.restartable_postgres()
                if control is not None and "postgres" in names:  # never leave the machine's server down
                    await asyncio.to_thread(
                        subprocess.run, [*control, "start"], check=False, capture_output=True
                    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--levels", type=lambda v: [int(x) for x in v.split(",") if x], default=[10, 25, 50, 200]
    )
    parser.add_argument("--turns", type=int, default=12, help="turns per chat at each level")
    parser.add_argument(
        "--via",
        choices=load_chats.CONNECTIONS,
        default="function",
        help="how the simulated Open WebUI calls ECHO: its Function (two calls per turn) or Pipelines (six)",
    )
    parser.add_argument("--model-seconds", type=float, default=1.0, help="the model's answer time per turn")
    parser.add_argument("--think-seconds", type=float, default=1.0, help="the user's pause between turns")
    parser.add_argument("--llm-seconds", type=float, default=0.3, help="fake Gemini latency per job call")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16, help="echoctl worker --concurrency")
    parser.add_argument("--memories", type=int, default=5, help="memories per user before the run")
    parser.add_argument("--faults", default="all", help=f"all, none, or some of {','.join(SCENARIOS)}")
    parser.add_argument(
        "--fault-chats", type=int, default=20, help="chats during each fault (under the knee)"
    )
    parser.add_argument("--fault-lead", type=float, default=15.0, help="seconds of load before a fault")
    parser.add_argument("--db-outage", type=float, default=10.0)
    parser.add_argument("--llm-outage", type=float, default=60.0)
    args = parser.parse_args()
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
