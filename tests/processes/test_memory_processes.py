"""Two `echoctl worker` processes merging into one memory at once lose neither update.

Both workers take one window each (the fake Gemini answers every call after 4 s, so both read the
memory at version 1 and merge it at the same time); the compare-and-set on the memory's version
makes the slower one merge again into the faster one's text. Each worker has a Qdrant directory of
its own (local mode allows one client per path; production shares a Qdrant server), both seeded
with the memory, so each finds it; PostgreSQL is where the race is decided.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.gemini_server import FakeGemini
from fakes.memory_llm import memory_answer

from echo.adapters.embeddings import factory as embeddings_factory
from echo.adapters.embeddings import local
from echo.adapters.store import conversations, memories, pool, testing
from echo.adapters.vectors import qdrant
from echo.capabilities.memory import distill, payloads
from echo.capabilities.memory import filter as memory_filter
from echo.config import tenancy
from echo.domain import chain, kinds
from echo.domain.memory import records
from echo.ports import vectors as vectors_base
from echo.queue import queue

ORIGINAL = "The user plans a trip to Kyoto in April 2027 with her sister Alice; they love temples."
WINDOWS = [
    ("We will also visit Nara for two days to see the deer.", "Nara is an easy day trip from Kyoto."),
    ("Alice wants a tea ceremony in Uji during the Kyoto trip.", "Uji is famous for matcha near Kyoto."),
]


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[pool.Store]:
    async with testing.temporary_store(dsn) as opened:
        yield opened


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        fake.responder = memory_answer
        fake.latency_s = 4.0  # every call: the two merges overlap even when the model loads skew by seconds
        yield fake


async def seed(store: pool.Store, paths: list[Path]) -> str:
    """The memory both windows merge into, in PostgreSQL and in each worker's Qdrant directory."""
    embedder = local.LocalEmbedder(embeddings_factory.packaged_model_path())
    dimension = await embedder.probe()
    window = records.WindowRef(
        "c0", chain.cumulative_hash(chain.invariant_hash("user", "seed", []), None), ()
    )
    memory_id = memories.memory_key("pia", window.key)
    distilled = records.Distilled(ORIGINAL, 3, "trip_kyoto", ("travel", "japan", "family"))
    memory_store = memories.Memories(store)
    async with store.transaction() as connection:
        await memory_store.insert(
            connection, "pia", memory_id, distilled, window, provider="test", model="test"
        )
    row = await memory_store.get("pia", memory_id)
    assert row is not None
    vector = (await embedder.embed([ORIGINAL]))[0]
    tenant = store.schema.removeprefix(tenancy.SCHEMA_PREFIX).replace("_", "-")
    for path in paths:
        vectors = qdrant.QdrantVectorStore.connect(dimension=dimension, tenant=tenant, path=path)
        point = vectors_base.Point(
            id=memory_id,
            vector=vector,
            user_id="pia",
            chat_id="c0",
            payload=distill.point_payload(row.memory),
        )
        await vectors.upsert(vectors_base.Kind.MEMORY, [point])
        await vectors.aclose()
    await embedder.aclose()
    return memory_id


async def enqueue_windows(store: pool.Store) -> None:
    talk = conversations.Conversations(store)
    jobs = queue.JobQueue(store)
    async with store.transaction() as connection:  # one commit: both workers woken at once
        for n, (question, answer) in enumerate(WINDOWS):
            messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            links = chain.build_chain(messages)
            await talk.remember(
                "pia",
                {
                    link.invariant: conversations.stored_message(m)
                    for link, m in zip(links, messages, strict=True)
                },
                connection=connection,
            )
            job = payloads.DistillPayload(
                user_id="pia",
                chat_id=f"c{n + 1}",
                key=links[-1].cumulative,
                start=0,
                parent=None,
                invariants=tuple(link.invariant for link in links),
                similarity_threshold=0.2,
                exact_match_threshold=0.999,
            )
            await jobs.enqueue(
                kinds.DISTILL,
                job.to_payload(),
                idempotency_key=memory_filter.distill_job_key("pia", job.key),
                connection=connection,
            )


async def test_two_worker_processes_merging_into_one_memory_lose_neither_update(
    store: pool.Store, gemini: FakeGemini, tmp_path: Path
) -> None:
    paths = [tmp_path / "qdrant-a", tmp_path / "qdrant-b"]
    memory_id = await seed(store, paths)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    tenant = store.schema.removeprefix(tenancy.SCHEMA_PREFIX).replace("_", "-")
    echoctl = str(Path(sys.executable).with_name("echoctl"))
    started: list[tuple[Any, Path]] = []
    try:
        for n, path in enumerate(paths):
            log = tmp_path / f"worker-{n}.log"
            env = {
                **base,
                "ECHO_DATABASE_URL": testing.test_dsn(),
                "ECHO_TENANT": tenant,
                "ECHO_QDRANT_PATH": str(path),
                "ECHO_LLM_PROVIDER": "gemini",
                "ECHO_GEMINI_API_KEY": "fake-key",
                "ECHO_GEMINI_BASE_URL": gemini.base_url,
                "ECHO_LLM_MAX_RETRIES": "0",
                "ECHO_WORKER_METRICS_PORT": "0",
                "ECHO_LOG_FORMAT": "console",
                "ECHO_JOB_POLL_SECONDS": "0.2",
            }
            with log.open("wb") as sink:
                process = await asyncio.create_subprocess_exec(
                    echoctl, "worker", "--concurrency", "1", env=env, cwd=tmp_path,
                    stdout=sink, stderr=asyncio.subprocess.STDOUT,
                )  # fmt: skip
            started.append((process, log))
        await testing.wait_for_listeners(store, queue.channel_for(store.schema), 2)
        await enqueue_windows(store)
        deadline = time.monotonic() + 90
        while await store.fetchval("SELECT count(*) FROM jobs WHERE state <> 'done'"):
            logs = "\n".join(log.read_text() for _, log in started)
            assert time.monotonic() < deadline, f"jobs not done in 90 s\n{logs}"
            assert "dead" not in [r["state"] for r in await store.fetch("SELECT state FROM jobs")], logs
            await asyncio.sleep(0.2)
    finally:
        for process, _ in started:
            if process.returncode is None:
                process.kill()
                await asyncio.wait_for(process.wait(), 10)
    logs = "\n".join(log.read_text() for _, log in started)
    workers = await store.fetch("SELECT DISTINCT worker_id FROM jobs")
    assert len(workers) == 2, logs  # one window each
    assert "merge_conflict" in logs  # they did race: one merge lost the compare-and-set and merged again
    row = await memories.Memories(store).get("pia", memory_id, with_history=True)
    assert row is not None
    assert row.memory.version == 3
    assert ORIGINAL in row.memory.summary
    assert "Nara" in row.memory.summary
    assert "Uji" in row.memory.summary
    assert [v.version for v in row.memory.history] == [1, 2]
    assert row.memory.history[0].summary == ORIGINAL
    assert len(row.memory.provenance) == 3
