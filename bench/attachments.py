"""Attachments (seed 000, filter 1): ingest throughput beside the raw embedding floor, search latency,
and the inlet with one small inline file.

Part 1, ingest. A generated text file (`--size-mb`, 5 MB by default) and a multi-page PDF (made with
fpdf2) are ingested by the `map_reduce` handler exactly as a worker runs it: read (pypdf for the PDF),
token offsets, chunks of 256 tokens with 32 of overlap, embeddings with the packaged MiniLM model
(in-process, on this CPU), upserts into Qdrant local mode, the summary by the offline provider, the
registry rows in PostgreSQL. The floor, in the same run: the same chunk texts embedded by the same
embedder in the same batches, nothing else. Overhead = ingest time / floor time - 1 (goal <= 20%).

Part 2, `search_session_context` on the ingested text file: embed the query, search the source's
chunks (p50/p99 over `--queries` queries).

Part 3, `echo_context`'s inlet in-process with one small text file whose text the body carries
(registry row written, AEC block rendered): p50/p99, beside the same inlet without a file.

    .venv/bin/python bench/attachments.py [--size-mb 5] [--pdf-pages 60] [--queries 200]

Uses ECHO_DATABASE_URL when set (a throwaway tenant, dropped after), else an embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import stores
from fakes import documents
from fakes.openwebui_files import BytesFiles

from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.embeddings import local
from echo.adapters.llm import factory as llm_factory
from echo.adapters.store import attachments, pool
from echo.adapters.vectors import factory as vectors_factory
from echo.capabilities import backends as capability_backends
from echo.capabilities import base
from echo.capabilities.context import filter as context
from echo.capabilities.context import map_reduce, payloads
from echo.capabilities.context import search as context_search
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import bodies, tokens
from echo.domain import jobs as domain
from echo.domain.attachments import chunking, routing
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base

GOAL_OVERHEAD = 0.20
CHUNK_TOKENS, OVERLAP_TOKENS = 256, 32


class Backends:
    def __init__(self, embedder: Any, vectors: vectors_base.VectorStore) -> None:
        self._embedder, self._vectors = embedder, vectors

    def embedder(self) -> Any:
        return self._embedder

    async def vectors(self) -> vectors_base.VectorStore:
        return self._vectors


async def register(store: pool.Store, name: str, mime: str, text: str | None, size: int) -> str:
    new = attachments.NewAttachment(
        chat_id="bench", file_id=None, filename=name, mime_type=mime, mode=routing.Mode.RAG,
        status="pending", content_sha256=None, size_bytes=size, pending_text=text,
    )  # fmt: skip
    async with store.transaction() as connection:
        source_id, _ = await attachments.Attachments(store).register(
            connection, "bench-user", new, now=time.time() + len(name), retention_seconds=3600
        )
    return source_id


async def floor_seconds(embedder: Any, text: str) -> tuple[float, int]:
    """The same chunks embedded in the handler's batches, and nothing else."""
    offsets = tokens.token_offsets(text)
    chunks = chunking.chunk_text(text, offsets, size=CHUNK_TOKENS, overlap=OVERLAP_TOKENS)
    started = time.perf_counter()
    for start in range(0, len(chunks), map_reduce.EMBED_BATCH):
        await embedder.embed([c.text for c in chunks[start : start + map_reduce.EMBED_BATCH]])
    return time.perf_counter() - started, len(chunks)


def job(source_id: str, name: str, mime: str) -> tuple[domain.Job, payloads.MapReducePayload]:
    payload = payloads.MapReducePayload(
        user_id="bench-user", chat_id="bench", source_id=source_id, file_id=source_id,
        filename=name, mime_type=mime, max_words=300,
        chunk_tokens=CHUNK_TOKENS, overlap_tokens=OVERLAP_TOKENS,
    )  # fmt: skip
    return domain.Job(id=1, kind="map_reduce", payload=payload.to_payload(), attempts=1), payload


async def ingest(args: argparse.Namespace, store: pool.Store, embedder: Any, vectors: Any) -> str:
    settings = Settings(llm_provider="offline")
    text = documents.long_text(int(args.size_mb * 1_000_000), marker="The vault code is 7741-ALPHA.")
    pdf_pages = [documents.long_text(2500, seed=i) for i in range(args.pdf_pages)]
    pdf = documents.pdf(pdf_pages)
    print(f"Part 1: ingest ({os.cpu_count()} cores; MiniLM in-process, Qdrant local mode, offline summary)")
    print("| file | size | chunks | floor: embed only | ingest | MB/s | chunks/s | overhead |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    text_source = ""
    for name, mime, data, kept in (
        ("handbook.txt", "text/plain", text.encode(), text),
        ("manual.pdf", "application/pdf", pdf, None),
    ):
        files: Any = None if kept is not None else BytesFiles(data)
        handler = map_reduce.MapReduceHandler(
            attachments.Attachments(store),
            lambda: llm_factory.llm_from_settings(settings),
            Backends(embedder, vectors),
            files,
            max_attempts=1,
        )
        source_id = await register(store, name, mime, kept, len(data))
        started = time.perf_counter()
        await handler(*job(source_id, name, mime))
        seconds = time.perf_counter() - started
        row = await attachments.Attachments(store).get("bench-user", source_id)
        assert row is not None, name
        assert row.status == "ready", row
        extracted = (
            kept if kept is not None else "\n\n".join(f"[page {i + 1}]\n{p}" for i, p in enumerate(pdf_pages))
        )
        floor, _ = await floor_seconds(embedder, extracted)
        megabytes = len(data) / 1e6
        overhead = seconds / floor - 1
        print(
            f"| {name} | {megabytes:.2f} MB | {row.chunks} | {floor:.1f} s ({megabytes / floor:.3f} MB/s)"
            f" | {seconds:.1f} s | {megabytes / seconds:.3f} | {row.chunks / seconds:.0f} | {overhead:+.0%} |"
        )
        if kept is not None:
            text_source = source_id
    print(f"(goal: overhead <= {GOAL_OVERHEAD:.0%}; the floor embeds the same {CHUNK_TOKENS}-token chunks)")
    return text_source


async def search(
    args: argparse.Namespace, store: pool.Store, embedder: Any, vectors: Any, source_id: str
) -> None:
    repositories, index = capability_backends.on_store(store), Backends(embedder, vectors)
    queries = ["What is the vault code?", "budgets and invoices", "deadlines of the engineers", "servers"]
    found = await context_search.search_session_context(
        repositories, index, "bench-user", source_id, queries[0], 5
    )
    hit = any("7741-ALPHA" in c["text"] for c in found["chunks"])
    seconds = []
    for i in range(args.queries):
        started = time.perf_counter()
        await context_search.search_session_context(
            repositories, index, "bench-user", source_id, queries[i % 4], 5
        )
        seconds.append((time.perf_counter() - started) * 1000)
    count = await vectors.count(vectors_base.Kind.EPHEMERAL, user_id="bench-user", source_id=source_id)
    print(f"\nPart 2: search_session_context over {count} chunks of one source (Qdrant local mode)")
    print("| queries | p50 | p99 | the marker found |\n|---:|---:|---:|---|")
    print(f"| {args.queries} | {percentile(seconds, 50):.1f} ms | {percentile(seconds, 99):.1f} ms | {hit} |")


async def inlet(args: argparse.Namespace, store: pool.Store) -> None:
    backends = backends_port.Backends(store=capability_backends.on_store(store))
    flt = context.ContextFilter(lambda counts: None, backends=lambda: backends)
    valves = valves_module.ContextValves()
    note = "The meeting is on Thursday at 10:00 in room 4B. " * 20
    results = {}
    for label, files in (
        ("no file", []),
        (
            "one small inline file",
            [{"type": "file", "id": "f1", "name": "note.txt", "file": {"data": {"content": note}}}],
        ),
    ):
        seconds = []
        for i in range(args.inlets):
            body = {
                "model": "gpt-4o", "messages": [{"role": "user", "content": "When is the meeting?"}],
                "files": files, "metadata": {"chat_id": f"chat-{i % 50}", "user_id": "bench-user"},
            }  # fmt: skip
            user = {"id": "bench-user", "name": "Bench"}
            ctx = base.HookContext(
                "echo_context", "inlet", user, bodies.turn_ids(body, user), valves, time.monotonic() + 5
            )
            started = time.perf_counter()
            await flt.inlet(body, ctx)
            seconds.append((time.perf_counter() - started) * 1000)
        results[label] = seconds
    print(f"\nPart 3: echo_context inlet in-process ({args.inlets} calls each; AEC block on; PostgreSQL)")
    print("| inlet | p50 | p99 |\n|---|---:|---:|")
    for label, seconds in results.items():
        print(f"| {label} | {percentile(seconds, 50):.2f} ms | {percentile(seconds, 99):.2f} ms |")


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-attachments-") as tmp:
        workdir = Path(tmp)
        async with (
            stores.database(workdir) as dsn,
            stores.tenant_store(dsn, f"bench-att-{os.getpid()}") as store,
        ):
            embedder = local.LocalEmbedder(embeddings_factory.packaged_model_path())
            dimension = await embedder.probe()
            settings = Settings(data_dir=workdir, qdrant_path=workdir / "qdrant", tenant="bench")
            vectors = vectors_factory.vector_store_from_settings(settings, dimension=dimension)
            try:
                source_id = await ingest(args, store, embedder, vectors)
                await search(args, store, embedder, vectors, source_id)
                await inlet(args, store)
            finally:
                await vectors.aclose()
                await embedder.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=float, default=5.0, help="size of the generated text file (MB)")
    parser.add_argument("--pdf-pages", type=int, default=60, help="pages of the generated PDF")
    parser.add_argument("--queries", type=int, default=200, help="search_session_context calls")
    parser.add_argument("--inlets", type=int, default=300, help="inlet calls per case")
    asyncio.run(main(parser.parse_args()))
