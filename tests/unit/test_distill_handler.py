"""The `distill` handler in process, on the in-memory store (`echo.adapters.in_memory_store`, the
store port's other adapter): the embedder or the vector store down (retried, nothing written: the
decision's transaction is undone), a dimension change (permanent), a duplicate delivery (one
memory), windows with nothing to read, a job whose user was forgotten, a point without its row, a
worker that died between the two writes, store errors retried or not as they say, a malformed
payload, and an offline merge that could not hold both facts (the new one is inserted).
`tests/integration/test_memory_faults.py` runs the handler on PostgreSQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import pytest
from fakes.fixed_index import FixedIndex

from echo.adapters import in_memory_store
from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.llm.offline import OfflineLLM
from echo.adapters.store import conversations as stored_messages
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities.memory import distill, payloads
from echo.domain import chain, kinds
from echo.domain import jobs as domain
from echo.ports import embeddings as embeddings_base
from echo.ports import store as store_port
from echo.ports import vectors as vectors_base
from echo.queue import errors
from echo.queue.registry import Registry

FACT = [
    {"role": "user", "content": "My son Tom starts violin lessons at the Lyon conservatory next Monday."},
    {
        "role": "assistant",
        "content": "Great news for Tom: the Lyon conservatory has a strong strings department.",
    },
]
MORE = [*FACT, {"role": "user", "content": "Tom's teacher is Mrs Laurent, lessons on Mondays at 5 pm."}]


class FailingVectors(InMemoryVectorStore):
    """The vector store failing its writes (a Qdrant that went away after the search)."""

    async def upsert(self, kind: vectors_base.Kind, points: Iterable[vectors_base.Point]) -> None:
        raise vectors_base.VectorStoreError("connection reset", retryable=True)


class Tenant:
    """One tenant on the in-memory store, with a job queue of ids (`Tables.jobs`)."""

    def __init__(self) -> None:
        self.tables = in_memory_store.Tables(jobs=set())
        self.conversations = in_memory_store.Conversations(self.tables)
        self.memories: store_port.MemoryStore = in_memory_store.Memories(self.tables)

    async def enqueue(self, messages: list[dict[str, Any]], user: str = "u1") -> domain.Job:
        links = chain.build_chain(messages)
        stored = [stored_messages.stored_message(m) for m in messages]
        await self.conversations.remember(
            user, {link.invariant: m for link, m in zip(links, stored, strict=True)}
        )
        spec = payloads.DistillPayload(
            user_id=user, chat_id="c1", key=links[-1].cumulative, start=0, parent=None,
            invariants=tuple(link.invariant for link in links),
        )  # fmt: skip
        job = domain.Job(id=self.tables.next_id(), kind=kinds.DISTILL, payload=spec.to_payload(), attempts=1)
        assert self.tables.jobs is not None
        self.tables.jobs.add(job.id)
        return job

    def handler(
        self, embedder: Any, vectors: Any, memories: store_port.MemoryStore | None = None
    ) -> Callable[[domain.Job], Awaitable[None]]:
        """A distill handler as a worker runs it: the job's stored payload validated into its model first."""
        run = distill.DistillHandler(
            self.conversations,
            memories or self.memories,
            self.tables,
            OfflineLLM,
            FixedIndex(embedder, vectors),
        )
        return Registry().register(kinds.DISTILL, run, payload=payloads.DistillPayload).run

    async def count(self, user: str = "u1") -> int:
        return await self.memories.count(user)


@pytest.fixture
def tenant() -> Tenant:
    return Tenant()


class TopicEmbedder(FakeEmbedder):
    """Every text about Tom's violin on one axis, the teacher's name tilting it: cosine 0.89 between a
    fact that names Mrs Laurent and one that does not (a merge, under the exact-match threshold)."""

    async def embed(self, texts: Any) -> list[list[float]]:
        return [[1.0, 0.5 if "Laurent" in text else 0.0, *[0.0] * 14] for text in texts]


def _window(*said: str) -> list[dict[str, Any]]:
    return [message for text in said for message in ({"role": "user", "content": text},)]


async def test_a_window_becomes_a_memory_and_its_point(tenant: Tenant) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    job = await tenant.enqueue(FACT)
    await tenant.handler(FakeEmbedder(dimension=16), vectors)(job)
    [row] = await tenant.memories.list("u1")
    assert row.indexed_version == row.memory.version == 1
    assert row.memory.id == store_port.memory_key("u1", distill.fact_key(job.payload["window"], 0))
    [point], _ = await vectors.scroll(vectors_base.Kind.MEMORY, user_id="u1")
    assert point.id == row.memory.id
    assert point.payload == distill.point_payload(row.memory)
    assert await tenant.memories.window_outcome("u1", job.payload["window"]) == ("created", row.memory.id)


async def test_an_embedder_down_retries_the_job_and_writes_nothing(tenant: Tenant) -> None:
    embedder = FakeEmbedder(dimension=16)
    embedder.failure = embeddings_base.EmbeddingError("connection refused", retryable=True)
    job = await tenant.enqueue(FACT)
    with pytest.raises(errors.RetryLater, match="embedding failed: connection refused"):
        await tenant.handler(embedder, InMemoryVectorStore(dimension=16))(job)
    assert await tenant.count() == 0
    embedder.failure = None
    await tenant.handler(embedder, InMemoryVectorStore(dimension=16))(job)  # the retry succeeds
    assert await tenant.count() == 1


async def test_a_vector_write_that_fails_undoes_the_decision_and_the_retry_makes_the_memory(
    tenant: Tenant,
) -> None:
    embedder = FakeEmbedder(dimension=16)
    job = await tenant.enqueue(FACT)
    with pytest.raises(errors.RetryLater, match="vector store failed: connection reset"):
        await tenant.handler(embedder, FailingVectors(dimension=16))(job)
    assert await tenant.count() == 0  # the insert and its window record went with the transaction
    assert tenant.tables.memory_windows == {}
    vectors = InMemoryVectorStore(dimension=16)
    await tenant.handler(embedder, vectors)(job)
    assert await tenant.count() == 1
    assert await vectors.count(vectors_base.Kind.MEMORY, user_id="u1") == 1


async def test_the_embedder_not_ready_yet_retries(tenant: Tenant) -> None:
    job = await tenant.enqueue(FACT)
    with pytest.raises(errors.RetryLater, match="not ready"):
        await tenant.handler(None, None)(job)


async def test_a_dimension_change_is_permanent_and_names_both_sizes(tenant: Tenant) -> None:
    space: dict[str, Any] = {}
    first = InMemoryVectorStore(dimension=16, space=space)
    await tenant.handler(FakeEmbedder(dimension=16), first)(await tenant.enqueue(FACT, "u1"))
    changed = InMemoryVectorStore(dimension=32, space=space)  # the embedding model changed
    with pytest.raises(errors.PermanentJobError, match="16-d vectors") as caught:
        await tenant.handler(FakeEmbedder(dimension=32), changed)(await tenant.enqueue(FACT, "u2"))
    assert "32" in str(caught.value)


async def test_a_duplicate_delivery_of_a_window_makes_one_memory(tenant: Tenant) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    job = await tenant.enqueue(FACT)
    run = tenant.handler(FakeEmbedder(dimension=16), vectors)
    await run(job)
    await run(job)  # redelivered after a lost lease, or replayed
    assert await tenant.count() == 1
    assert await vectors.count(vectors_base.Kind.MEMORY, user_id="u1") == 1


@pytest.mark.parametrize(
    "window",
    [
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
            }
        ],
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": '{"rows": [1, 2, 3]}'},
        ],
        [{"role": "user", "content": ""}],
        [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Sure! Anything else?"}],
    ],
    ids=["images-only", "tool-output-only", "empty", "small-talk"],
)
async def test_windows_with_nothing_to_remember_are_recorded_as_discarded(
    tenant: Tenant, window: list[dict[str, Any]]
) -> None:
    job = await tenant.enqueue(window)
    await tenant.handler(FakeEmbedder(dimension=16), InMemoryVectorStore(dimension=16))(job)
    assert await tenant.count() == 0
    assert await tenant.memories.window_outcome("u1", job.payload["window"]) == ("discarded", None)


async def test_a_window_whose_messages_are_not_stored_is_permanent(tenant: Tenant) -> None:
    job = await tenant.enqueue(FACT)
    await tenant.conversations.forget("u1")
    with pytest.raises(errors.PermanentJobError, match="2 window messages are not stored"):
        await tenant.handler(FakeEmbedder(dimension=16), InMemoryVectorStore(dimension=16))(job)


async def test_a_job_of_a_user_forgotten_meanwhile_writes_nothing(tenant: Tenant) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    job = await tenant.enqueue(FACT)
    assert tenant.tables.jobs is not None
    tenant.tables.jobs.discard(job.id)  # forgetting the user deleted the job while it ran
    await tenant.handler(FakeEmbedder(dimension=16), vectors)(job)
    assert await tenant.count() == 0
    assert await vectors.count(vectors_base.Kind.MEMORY, user_id="u1") == 0


async def test_a_stale_point_without_its_row_is_dropped_and_the_window_inserted(tenant: Tenant) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    embedder = FakeEmbedder(dimension=16)
    await tenant.handler(embedder, vectors)(await tenant.enqueue(FACT))
    [row] = await tenant.memories.list("u1")
    assert await tenant.memories.delete("u1", row.memory.id)  # the row went, the point stayed
    await tenant.handler(embedder, vectors)(await tenant.enqueue(MORE))
    ids = {r.memory.id for r in await tenant.memories.list("u1")}
    assert ids
    assert row.memory.id not in ids
    points, _ = await vectors.scroll(vectors_base.Kind.MEMORY, user_id="u1")
    assert {point.id for point in points} == ids  # the stale point is gone, each memory has its own


async def test_a_worker_that_died_between_the_two_writes_is_caught_up_by_the_retry(tenant: Tenant) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    embedder = FakeEmbedder(dimension=16)
    job = await tenant.enqueue(FACT)
    await tenant.handler(embedder, vectors)(job)
    [record] = tenant.tables.memories.values()
    record.indexed_version, record.summary = 0, "Tom plays violin."  # written, not indexed
    await vectors.delete_where(vectors_base.Kind.MEMORY, user_id="u1")
    await tenant.handler(embedder, vectors)(job)  # the same job again (its lease expired)
    [point], _ = await vectors.scroll(vectors_base.Kind.MEMORY, user_id="u1")
    assert point.payload["summary"] == "Tom plays violin."
    assert record.indexed_version == 1


class FailingMemories(in_memory_store.Memories):
    """The memory store answering ``error`` from its first read of a window."""

    def __init__(self, tables: in_memory_store.Tables, error: store_port.StoreError) -> None:
        super().__init__(tables)
        self.error = error

    async def window_outcome(
        self, user_id: str, window_key: str, *, connection: store_port.Connection | None = None
    ) -> tuple[str, str | None] | None:
        raise self.error


@pytest.mark.parametrize(
    ("retryable", "raised"), [(True, errors.RetryLater), (False, errors.PermanentJobError)]
)
async def test_a_store_error_is_retried_only_when_it_says_a_retry_may_help(
    tenant: Tenant, retryable: bool, raised: type[errors.JobError]
) -> None:
    failure = store_port.StoreError("the store is down")
    failure.retryable = retryable
    job = await tenant.enqueue(FACT)
    memories = FailingMemories(tenant.tables, failure)
    with pytest.raises(raised, match="store: the store is down") as caught:
        await tenant.handler(FakeEmbedder(dimension=16), InMemoryVectorStore(dimension=16), memories)(job)
    assert caught.value.__cause__ is failure
    assert await tenant.count() == 0


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"user_id": "", "invariants": ["a" * 64], "window": "b" * 64}, "user_id"),
        ({"user_id": "u", "invariants": [], "window": "b" * 64}, "invariants"),
        ({"user_id": "u", "invariants": ["a" * 64], "window": "b" * 64}, "do not lead to window"),
        ({"v": 99, "user_id": "u", "invariants": ["a" * 64], "window": "b" * 64}, "version"),
    ],
)
def test_a_malformed_payload_is_a_permanent_error_naming_the_field(
    payload: dict[str, Any], field: str
) -> None:
    with pytest.raises(errors.PermanentJobError, match=field):
        payloads.DistillPayload.decode(payload).check_chain()  # the worker, then the handler


async def test_offline_a_similar_fact_that_fits_is_merged_into_the_memory(tenant: Tenant) -> None:
    vectors, embedder = InMemoryVectorStore(dimension=16), TopicEmbedder(dimension=16)
    await tenant.handler(embedder, vectors)(
        await tenant.enqueue(_window("My son Tom starts violin lessons at the Lyon conservatory on Monday."))
    )
    await tenant.handler(embedder, vectors)(
        await tenant.enqueue(
            _window("My son Tom's violin teacher is Mrs Laurent from the Lyon conservatory.")
        )
    )
    [row] = await tenant.memories.list("u1")
    assert row.memory.version == 2
    assert "Monday" in row.memory.summary
    assert "Laurent" in row.memory.summary


async def test_offline_a_similar_fact_that_would_push_the_old_one_out_is_a_memory_of_its_own(
    tenant: Tenant,
) -> None:
    vectors, embedder = InMemoryVectorStore(dimension=16), TopicEmbedder(dimension=16)
    old = "Tom starts violin lessons at the Lyon conservatory next Monday, with the beginners' group " * 2
    new = "Tom's teacher is Mrs Laurent, who gives the lessons on Mondays at five in room twelve " * 2
    await tenant.handler(embedder, vectors)(await tenant.enqueue(_window(old.strip())))
    await tenant.handler(embedder, vectors)(await tenant.enqueue(_window(new.strip())))
    rows = await tenant.memories.list("u1")
    assert len(rows) == 2
    assert all(row.memory.version == 1 for row in rows)  # neither was cut to make room
    assert any("conservatory" in row.memory.summary for row in rows)
    assert any("Laurent" in row.memory.summary for row in rows)
