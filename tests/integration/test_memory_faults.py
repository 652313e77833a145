"""The `distill` handler on a real PostgreSQL, where the store is the subject: a vector store down
(the job is retried and the decision's transaction leaves nothing written), a duplicate delivery of
a window (one memory), a job whose user was forgotten meanwhile (it writes nothing), a point without
its row, a worker that died between the two writes, the point's payload, and the memory filter over
a closed store. The handler's other failures run in process on the in-memory store
(`tests/unit/test_distill_handler.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fakes.fixed_index import FixedIndex
from prometheus_client import REGISTRY

from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.llm.offline import OfflineLLM
from echo.adapters.store import conversations, memories, pool, testing
from echo.adapters.vectors import qdrant
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities import base
from echo.capabilities.backends import on_store
from echo.capabilities.memory import backends as memory_backends
from echo.capabilities.memory import distill, forgetting, payloads
from echo.capabilities.memory import filter as memory_filter
from echo.config.settings import Settings
from echo.domain import bodies, chain, kinds
from echo.ports import backends as backends_port
from echo.ports import embeddings as embeddings_base
from echo.ports import vectors as vectors_base
from echo.queue import errors, queue
from echo.queue.registry import Registry

FACT = [
    {"role": "user", "content": "My son Tom starts violin lessons at the Lyon conservatory next Monday."},
    {
        "role": "assistant",
        "content": "Great news for Tom: the Lyon conservatory has a strong strings department.",
    },
]


async def enqueue(store: pool.Store, messages: list[dict[str, Any]], user: str = "u1") -> Any:
    links = chain.build_chain(messages)
    await conversations.Conversations(store).remember(
        user,
        {link.invariant: conversations.stored_message(m) for link, m in zip(links, messages, strict=True)},
    )
    job = payloads.DistillPayload(
        user_id=user, chat_id="c1", key=links[-1].cumulative, start=0, parent=None,
        invariants=tuple(link.invariant for link in links),
    )  # fmt: skip
    jobs = queue.JobQueue(store)
    await jobs.enqueue(
        kinds.DISTILL, job.to_payload(), idempotency_key=memory_filter.distill_job_key(user, job.key)
    )
    claimed = await jobs.claim("w1", [kinds.DISTILL], 30)
    assert claimed is not None
    return claimed.job


def handler(store: pool.Store, embedder: Any, vectors: Any) -> Callable[[Any], Awaitable[None]]:
    """A distill handler as a worker runs it: the job's stored payload validated into its model first."""
    run = distill.DistillHandler(
        conversations.Conversations(store),
        memories.Memories(store),
        store,
        OfflineLLM,
        FixedIndex(embedder, vectors),
    )
    return Registry().register(kinds.DISTILL, run, payload=payloads.DistillPayload).run


async def count(store: pool.Store) -> int:
    return int(await store.fetchval("SELECT count(*) FROM memories"))


async def test_a_vector_store_down_retries_the_job_and_writes_nothing(store: pool.Store) -> None:
    down = qdrant.QdrantVectorStore.connect(dimension=16, url="http://127.0.0.1:9", timeout_s=2)
    job = await enqueue(store, FACT)
    with pytest.raises(errors.RetryLater, match="vector store failed"):
        await handler(store, FakeEmbedder(dimension=16), down)(job)
    await down.aclose()
    assert await count(store) == 0
    assert await store.fetchval("SELECT count(*) FROM memory_windows") == 0


async def test_a_duplicate_delivery_of_a_window_makes_one_memory(store: pool.Store) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    job = await enqueue(store, FACT)
    run = handler(store, FakeEmbedder(dimension=16), vectors)
    await run(job)
    await run(job)  # redelivered after a lost lease, or replayed
    assert await count(store) == 1
    assert await vectors.count(vectors_base.Kind.MEMORY, user_id="u1") == 1


async def test_a_job_of_a_user_forgotten_meanwhile_writes_nothing(store: pool.Store) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    job = await enqueue(store, FACT)
    await forgetting.builtin_forgetting(on_store(store), lambda: vectors).forget("u1")  # while the job runs
    await handler(store, FakeEmbedder(dimension=16), vectors)(job)
    assert await count(store) == 0
    assert await vectors.count(vectors_base.Kind.MEMORY, user_id="u1") == 0


async def test_a_stale_point_without_its_row_is_dropped_and_the_window_inserted(store: pool.Store) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    embedder = FakeEmbedder(dimension=16)
    await handler(store, embedder, vectors)(await enqueue(store, FACT))
    [row] = await memories.Memories(store).list("u1")
    await store.execute("DELETE FROM memories")  # the row went (a restore from backup), the point stayed
    again = [*FACT, {"role": "user", "content": "Tom's teacher is Mrs Laurent, lessons on Mondays at 5 pm."}]
    await handler(store, embedder, vectors)(await enqueue(store, again))
    ids = {r.memory.id for r in await memories.Memories(store).list("u1")}
    assert ids
    assert row.memory.id not in ids
    points, _ = await vectors.scroll(vectors_base.Kind.MEMORY, user_id="u1")
    assert {point.id for point in points} == ids  # the stale point is gone, each memory has its own


async def test_the_vector_payload_carries_the_seed_fields_and_the_provenance(store: pool.Store) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    job = await enqueue(store, FACT)
    await handler(store, FakeEmbedder(dimension=16), vectors)(job)
    [point], _ = await vectors.scroll(vectors_base.Kind.MEMORY, user_id="u1")
    assert point.chat_id == "c1"
    assert {"timestamp", "memory_importance", "memory_id", "tags", "provenance"} <= set(point.payload)
    assert point.payload["provenance"] == [distill.fact_key(job.payload["window"], 0)]
    assert point.payload["sources"] == [i[:16] for i in job.payload["invariants"]]


async def test_a_worker_that_died_between_the_two_writes_is_caught_up_by_the_retry(store: pool.Store) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    embedder = FakeEmbedder(dimension=16)
    job = await enqueue(store, FACT)
    await handler(store, embedder, vectors)(job)
    await store.execute(
        "UPDATE memories SET indexed_version = 0, summary = 'Tom plays violin.'"
    )  # not indexed
    await vectors.delete_where(vectors_base.Kind.MEMORY, user_id="u1")
    await handler(store, embedder, vectors)(job)  # the same job again (its lease expired)
    [point], _ = await vectors.scroll(vectors_base.Kind.MEMORY, user_id="u1")
    assert point.payload["summary"] == "Tom plays violin."
    assert await store.fetchval("SELECT indexed_version FROM memories") == 1


async def test_settings_backends_open_the_packaged_embedder_and_local_vectors(tmp_path: Path) -> None:
    backends = memory_backends.SettingsBackends(
        Settings(data_dir=tmp_path, qdrant_path=tmp_path / "q", tenant="t1")
    )
    embedder = backends.embedder()
    assert embedder is not None
    vectors = await backends.vectors()
    assert vectors is not None
    assert vectors.dimension == embedder.dimension == 384
    assert await backends.vectors() is vectors  # opened once
    await backends.aclose()


async def test_the_memory_filter_fails_open_when_its_store_or_embedder_fails(dsn: str) -> None:
    async with testing.temporary_store(dsn) as broken:
        pass  # closed: every statement fails

    class Runtime:
        store = broken
        embedder = FakeEmbedder(dimension=16)
        vectors = InMemoryVectorStore(dimension=16)

    backends = backends_port.Backends(store=on_store(broken), index=memory_backends.RuntimeBackends(Runtime))
    flt = memory_filter.MemoryFilter(lambda: backends)
    messages = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"fact {i}"}
        for i in range(6)
    ]
    body = {"chat_id": "c1", "id": "m5", "messages": messages}
    ctx = base.HookContext("echo_memory", "outlet", {"id": "u1"}, bodies.turn_ids(body, {"id": "u1"}), None)
    assert await flt.outlet(body, ctx) == body
    assert [e.level for e in ctx.events] == ["warning"]
    Runtime.embedder.failure = embeddings_base.EmbeddingError("model gone")
    errors_before = REGISTRY.get_sample_value("echo_memory_recalls_total", {"outcome": "error"}) or 0.0
    inlet = {"messages": [{"role": "user", "content": "what about Tom?"}], "metadata": {"user_id": "u1"}}
    inlet_ctx = base.HookContext(
        "echo_memory", "inlet", {"id": "u1"}, bodies.turn_ids(inlet, {"id": "u1"}), None
    )
    assert await flt.inlet(inlet, inlet_ctx) == inlet
    assert REGISTRY.get_sample_value("echo_memory_recalls_total", {"outcome": "error"}) == errors_before + 1
