"""Dense-only against hybrid retrieval (dense + lexical, RRF) on LoCoMo, over raw turns and memories.

Each LoCoMo conversation (`../shared/data/locomo/`, else the one fixture of a clean clone) is stored
twice in Qdrant local mode with the packaged MiniLM embedder: every raw turn as its own point, and the
memories `echo_memory` distils from it (the conversation played through its outlet one completed turn
after the other, an in-process worker, the offline provider: what `echoctl serve` runs with nothing
configured). Every point carries its text, so one store answers both searches: `search(vector)` (dense
only) and `search(vector, query_text=question)` (hybrid). For each judged QA pair (categories 1–4,
`bench/locomo.py`), the question retrieves the top k; the pair counts when the texts retrieved hold at
least half of its answer's content words (answer recall). Side by side, same run, same points.

    .venv/bin/python bench/retrieval.py [--conversations 26,30,44] [--k 5,10] [--skip-memories]

Uses ECHO_DATABASE_URL when set (throwaway tenants, dropped after), else an embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import locomo
import stores

from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.embeddings import local
from echo.adapters.store import pool
from echo.adapters.vectors import qdrant
from echo.capabilities import backends as capability_backends
from echo.capabilities import base, handlers
from echo.capabilities.memory import backends as memory_backends
from echo.capabilities.memory import filter as memory_filter
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import bodies, lexical, transcripts
from echo.domain.memory import cleaning
from echo.ports import backends as backends_port
from echo.ports import embeddings as embeddings_base
from echo.ports import vectors as vectors_base
from echo.queue import worker
from echo.support import logs

USER = "locomo"


@dataclass
class Runtime:
    """What `echo_memory` reaches: the store, the embedder and the vectors."""

    store: pool.Store
    embedder: embeddings_base.Embedder
    vectors: vectors_base.VectorStore | None

    def backends(self) -> backends_port.Backends:
        return backends_port.Backends(
            store=capability_backends.on_store(self.store), index=memory_backends.RuntimeBackends(self)
        )


@dataclass
class Tally:
    """Answer recall of one corpus (raw turns or memories) and one method, per k."""

    hits: dict[int, int] = field(default_factory=dict)
    chars: dict[int, int] = field(default_factory=dict)
    same_chars: dict[int, int] = field(default_factory=dict)  # hybrid cut to dense's characters
    lexical_only: dict[int, int] = field(default_factory=dict)
    questions: int = 0
    items: int = 0


async def _corpus_recall(
    vectors: vectors_base.VectorStore,
    questions: Sequence[transcripts.Question],
    question_vectors: Sequence[Sequence[float]],
    text_of: str,
    ks: Sequence[int],
    dense: Tally,
    hybrid: Tally,
) -> None:
    deepest = max(ks)
    for question, vector in zip(questions, question_vectors, strict=True):
        plain = await vectors.search(vectors_base.Kind.MEMORY, vector, user_id=USER, limit=deepest)
        fused = await vectors.search(
            vectors_base.Kind.MEMORY, vector, user_id=USER, limit=deepest, query_text=question.text
        )
        plain_ids = {h.id for h in plain}
        for k in ks:
            for tally, hits in ((dense, plain), (hybrid, fused)):
                texts = [str(h.payload.get(text_of, "")) for h in hits[:k]]
                block = "\n".join(texts)
                tally.hits[k] = tally.hits.get(k, 0) + locomo.answer_recalled(question.answer, block)
                tally.chars[k] = tally.chars.get(k, 0) + len(block)
            budget = sum(len(str(h.payload.get(text_of, ""))) for h in plain[:k])
            block = "\n".join(_within([str(h.payload.get(text_of, "")) for h in fused[:k]], budget))
            recalled = locomo.answer_recalled(question.answer, block)
            hybrid.same_chars[k] = hybrid.same_chars.get(k, 0) + recalled
            new = sum(h.id not in plain_ids for h in fused[:k])
            hybrid.lexical_only[k] = hybrid.lexical_only.get(k, 0) + new
    for tally in (dense, hybrid):
        tally.questions += len(questions)


def _within(texts: Sequence[str], budget: int) -> list[str]:
    """The texts, best first, while their characters stay within ``budget`` (one that does not fit is
    skipped, as ECHO's recall fills its budget)."""
    chosen, used = [], 0
    for text in texts:
        if used + len(text) <= budget:
            chosen.append(text)
            used += len(text)
    return chosen


async def raw_turns(
    transcript: transcripts.Transcript,
    questions: Sequence[transcripts.Question],
    question_vectors: Sequence[Sequence[float]],
    embedder: local.LocalEmbedder,
    workdir: Path,
    ks: Sequence[int],
    dense: Tally,
    hybrid: Tally,
) -> None:
    texts = [cleaning.clean_text(str(m.content)) for m in transcript.messages]
    vectors = qdrant.QdrantVectorStore.connect(
        dimension=await embedder.probe(), tenant="raw", path=workdir / f"raw-{transcript.id}"
    )
    try:
        embedded = await embedder.embed(texts)
        await vectors.upsert(
            vectors_base.Kind.MEMORY,
            [
                vectors_base.Point(id=m.id, vector=v, user_id=USER, payload={"text": t}, text=t)
                for m, t, v in zip(transcript.messages, texts, embedded, strict=True)
            ],
        )
        await _corpus_recall(vectors, questions, question_vectors, "text", ks, dense, hybrid)
    finally:
        await vectors.aclose()
    for tally in (dense, hybrid):
        tally.items += len(texts)


def _ctx(
    phase: Literal["inlet", "outlet"], body: dict[str, Any], valves: valves_module.MemoryValves
) -> base.HookContext:
    user = {"id": USER}
    return base.HookContext("echo_memory", phase, user, bodies.turn_ids(body, user), valves, None)


async def _drain(store: pool.Store, runtime: Runtime, settings: Settings) -> None:
    registry = handlers.builtin_registry(
        settings, capability_backends.on_store(store), index=memory_backends.RuntimeBackends(runtime)
    )
    running = worker.Worker(
        store, registry, lease_seconds=60, poll_seconds=0.2, grace_seconds=5, metrics_seconds=60
    )
    await running.start()
    try:
        deadline = time.monotonic() + 1800
        while await store.fetchval("SELECT count(*) FROM jobs WHERE state IN ('pending', 'running')"):
            if time.monotonic() > deadline:
                raise RuntimeError("distill jobs not done in 30 minutes")
            await asyncio.sleep(0.1)
    finally:
        await running.stop()
        for spec in registry:
            close = getattr(spec.handler, "aclose", None)
            if close is not None:
                await close()
    dead = await store.fetchval("SELECT count(*) FROM jobs WHERE state = 'dead'")
    if dead:
        raise RuntimeError(f"{dead} distill jobs died")


async def distilled(
    dsn: str,
    transcript: transcripts.Transcript,
    questions: Sequence[transcripts.Question],
    question_vectors: Sequence[Sequence[float]],
    embedder: local.LocalEmbedder,
    workdir: Path,
    ks: Sequence[int],
    dense: Tally,
    hybrid: Tally,
) -> float:
    """Play the conversation through `echo_memory`, distil, score; the seconds ingestion took."""
    valves = valves_module.MemoryValves()
    settings = Settings(data_dir=workdir, llm_provider="offline")
    async with stores.tenant_store(
        dsn, f"bench-ret-{uuid.uuid4().hex[:8]}", application="bench-retrieval"
    ) as store:
        vectors = qdrant.QdrantVectorStore.connect(
            dimension=await embedder.probe(), tenant="mem", path=workdir / f"mem-{transcript.id}"
        )
        try:
            runtime = Runtime(store, embedder, vectors)
            backends = runtime.backends()
            flt = memory_filter.MemoryFilter(lambda: backends)
            recorded = [m.recorded() for m in transcript.messages]
            started = time.perf_counter()
            for end in range(2, len(recorded) + 1, 2):
                body = {
                    "chat_id": f"chat-{transcript.id}",
                    "id": recorded[end - 1]["id"],
                    "messages": recorded[:end],
                }
                await flt.outlet(body, _ctx("outlet", body, valves))
            await _drain(store, runtime, settings)
            ingest = time.perf_counter() - started
            count = await vectors.count(vectors_base.Kind.MEMORY, user_id=USER)
            await _corpus_recall(vectors, questions, question_vectors, "summary", ks, dense, hybrid)
        finally:
            await vectors.aclose()
    for tally in (dense, hybrid):
        tally.items += count
    return ingest


def _row(corpus: str, method: str, tally: Tally, ks: Sequence[int], baseline: Tally | None) -> str:
    cells = [f"{corpus:<10}", f"{method:<22}", f"{tally.items:>6}", f"{tally.questions:>5}"]
    for k in ks:
        rate = tally.hits.get(k, 0) / tally.questions if tally.questions else 0.0
        chars = tally.chars.get(k, 0) / tally.questions if tally.questions else 0.0
        delta = ""
        if baseline is not None and tally.questions:
            delta = f" ({100 * (tally.hits.get(k, 0) - baseline.hits.get(k, 0)) / tally.questions:+.1f})"
        cells.append(f"{100 * rate:>5.1f}%{delta:<8} {chars:>7.0f}")
        if baseline is not None and tally.questions:
            cells.append(f"{100 * tally.same_chars.get(k, 0) / tally.questions:>9.1f}%")
            cells.append(f"{tally.lexical_only.get(k, 0) / tally.questions:>6.2f}")
        else:
            cells += [f"{'':>10}", f"{'':>6}"]
    return " | ".join(cells)


def table(results: dict[str, tuple[Tally, Tally]], ks: Sequence[int]) -> str:
    head = ["corpus    ", f"{'method':<22}", " items", "   QA"]
    for k in ks:
        head += [f"answer recall@{k:<2}     chars", "same chars", "new@k "]
    lines = [" | ".join(head)]
    for corpus, (dense, hybrid) in results.items():
        lines.append(_row(corpus, "dense only (MiniLM)", dense, ks, None))
        lines.append(_row(corpus, "hybrid (dense+lexical)", hybrid, ks, dense))
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    folder = locomo.data_dir(args.data)
    names = [n.strip() for n in args.conversations.split(",") if n.strip()]
    available = [n for n in names if (folder / f"{n}.json").is_file()]
    if not available:
        raise SystemExit(f"none of {names} in {folder}")
    ks = sorted({int(k) for k in args.k.split(",")})
    logs.configure_logging("WARNING", "console")  # not every distilled window
    chats = locomo.load(folder, available)
    print(
        f"LoCoMo {', '.join(available)} from {folder}; MiniLM (packaged), Qdrant local mode,"
        f" RRF k={lexical.RRF_K}, candidates per side {lexical.candidate_depth(max(ks))}"
    )
    embedder = local.LocalEmbedder(embeddings_factory.packaged_model_path())
    per_chat: dict[str, dict[str, tuple[Tally, Tally]]] = {}
    total: dict[str, tuple[Tally, Tally]] = {"raw turns": (Tally(), Tally())}
    if not args.skip_memories:
        total["memories"] = (Tally(), Tally())
    with tempfile.TemporaryDirectory(prefix="echo-bench-retrieval-") as tmp:
        workdir = Path(tmp)
        async with stores.database(workdir) as dsn:
            for transcript in chats:
                questions = locomo.judged(transcript, len(transcript.exchanges))
                question_vectors = await embedder.embed([q.text for q in questions])
                mine: dict[str, tuple[Tally, Tally]] = {"raw turns": (Tally(), Tally())}
                started = time.perf_counter()
                await raw_turns(
                    transcript, questions, question_vectors, embedder, workdir, ks, *mine["raw turns"]
                )
                note = f"raw turns {time.perf_counter() - started:.0f} s"
                if not args.skip_memories:
                    mine["memories"] = (Tally(), Tally())
                    ingest = await distilled(
                        dsn, transcript, questions, question_vectors, embedder, workdir, ks, *mine["memories"]
                    )
                    note += f", memories ingested in {ingest:.0f} s"
                for corpus, tallies in mine.items():
                    for into, came in zip(total[corpus], tallies, strict=True):
                        _add(into, came)
                per_chat[transcript.id] = mine
                print(f"  {transcript.id}: {len(transcript.messages)} turns, {len(questions)} QA; {note}")
    for name, results in per_chat.items():
        print(f"\nconversation {name}")
        print(table(results, ks))
    print(f"\nall conversations ({', '.join(available)})")
    print(table(total, ks))
    print(
        "\nanswer recall: share of judged QA pairs whose top-k texts hold at least half of the answer's"
        " content words; (+x): points over dense only; chars: mean characters of the top-k texts;"
        " same chars: hybrid's answer recall within dense only's characters for the same question;"
        " new@k: mean hits per question that dense only did not return"
    )


def _add(into: Tally, came: Tally) -> None:
    for k, v in came.hits.items():
        into.hits[k] = into.hits.get(k, 0) + v
    for k, v in came.chars.items():
        into.chars[k] = into.chars.get(k, 0) + v
    for k, v in came.same_chars.items():
        into.same_chars[k] = into.same_chars.get(k, 0) + v
    for k, v in came.lexical_only.items():
        into.lexical_only[k] = into.lexical_only.get(k, 0) + v
    into.questions += came.questions
    into.items += came.items


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", default="26,30,44")
    parser.add_argument("--data", type=Path, default=None, help="a folder of LoCoMo NAME.json files")
    parser.add_argument("--k", default="5,10", help="cut-offs, comma-separated")
    parser.add_argument("--skip-memories", action="store_true", help="raw turns only (no PostgreSQL)")
    asyncio.run(main(parser.parse_args()))
