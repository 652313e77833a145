"""The `map_reduce` handler in process, on the in-memory store (`echo.adapters.in_memory_store`, the
store port's other adapter) and the in-memory vector store, with the offline model: a short text is
its own summary, a longer one is indexed and summarised, the embedder down (retried; the last
attempt marks the file failed), vectors not ready, a file without text nor files API, a file gone,
a malformed payload, the retention sweep, offline media, and store errors retried or not as they
say. `tests/integration/test_context_jobs.py` runs it on PostgreSQL, Qdrant and the fake Gemini."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fakes import documents
from fakes.fixed_index import FixedIndex
from fakes.openwebui_files import BytesFiles

from echo.adapters import in_memory_store
from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.llm.offline import OfflineLLM
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities.context import map_reduce, payloads
from echo.domain import jobs as domain
from echo.domain import kinds
from echo.domain.attachments import routing
from echo.ports import embeddings as embeddings_base
from echo.ports import store as store_port
from echo.ports import vectors as vectors_base
from echo.queue import errors
from echo.queue.registry import Registry

DIMENSION = 64


class DownEmbedder(FakeEmbedder):
    async def embed(self, texts: Any) -> list[list[float]]:
        raise embeddings_base.EmbeddingError("connection refused", retryable=True)


class Tenant:
    """One tenant's file registry in memory, and its vectors."""

    def __init__(self) -> None:
        self.tables = in_memory_store.Tables()
        self.registry: store_port.AttachmentStore = in_memory_store.Attachments(self.tables)
        self.vectors = InMemoryVectorStore(dimension=DIMENSION)

    async def register(
        self,
        text: str | None,
        *,
        chat: str = "c1",
        file_id: str | None = None,
        mime: str = "text/plain",
        retention_seconds: float = 3600,
    ) -> str:
        new = store_port.NewAttachment(
            chat_id=chat, file_id=file_id, filename="doc.txt", mime_type=mime, mode=routing.Mode.RAG,
            status="pending", content_sha256=None, size_bytes=len(text or ""), pending_text=text,
        )  # fmt: skip
        async with self.tables.transaction() as connection:
            source_id, _ = await self.registry.register(
                connection, "u1", new, now=time.time(), retention_seconds=retention_seconds
            )
        return source_id

    def handler(
        self,
        embedder: Any = None,
        vectors: Any = "default",
        files: Any = None,
        registry: store_port.AttachmentStore | None = None,
    ) -> map_reduce.MapReduceHandler:
        return map_reduce.MapReduceHandler(
            registry or self.registry,
            OfflineLLM,
            FixedIndex(
                embedder or FakeEmbedder(DIMENSION), self.vectors if vectors == "default" else vectors
            ),
            files,
            max_attempts=3,
        )

    async def row(self, source_id: str) -> store_port.Attachment:
        found = await self.registry.get("u1", source_id)
        assert found is not None
        return found


def job(source_id: str, attempts: int = 1, **extra: Any) -> domain.Job:
    payload = {
        "user_id": "u1",
        "chat_id": "c1",
        "source_id": source_id,
        "file_id": None,
        "filename": "doc.txt",
        "mime_type": "text/plain",
        "max_words": 40,
        "chunk_tokens": 128,
        "overlap_tokens": 16,
        **extra,
    }
    return domain.Job(id=1, kind=kinds.MAP_REDUCE, payload=payload, attempts=attempts)


def runs(handler: map_reduce.MapReduceHandler) -> Callable[[domain.Job], Awaitable[None]]:
    """`handler` as a worker runs it: the job's stored payload validated into its model first."""
    return Registry().register(kinds.MAP_REDUCE, handler, payload=payloads.MapReducePayload).run


@pytest.fixture
def tenant() -> Tenant:
    return Tenant()


async def test_a_short_text_is_its_own_summary(tenant: Tenant) -> None:
    source_id = await tenant.register("Only a few words here, nothing to distil.")
    await runs(tenant.handler())(job(source_id))
    row = await tenant.row(source_id)
    assert (row.status, row.summary, row.summary_mode) == (
        "ready",
        "Only a few words here, nothing to distil.",
        "fast_path",
    )
    assert await tenant.vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=source_id) == 1


async def test_a_longer_text_is_chunked_indexed_and_summarised_offline(tenant: Tenant) -> None:
    source_id = await tenant.register(documents.long_text(5000))
    await runs(tenant.handler())(job(source_id))
    row = await tenant.row(source_id)
    assert (row.status, row.summary_mode) == ("ready", "extractive")
    assert row.summary
    assert len(row.summary.split()) <= 40
    chunks = await tenant.vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=source_id)
    assert row.chunks == chunks > 1
    assert await tenant.registry.pending_text("u1", source_id) is None
    points, _ = await tenant.vectors.scroll(vectors_base.Kind.EPHEMERAL, user_id="u1")
    assert {point.id for point in points} == {map_reduce.chunk_point_id(source_id, i) for i in range(chunks)}
    await runs(tenant.handler())(job(source_id))  # a ready file is not ingested again
    assert (await tenant.row(source_id)).summary == row.summary


async def test_the_embedder_down_retries_and_the_last_attempt_marks_the_file_failed(tenant: Tenant) -> None:
    source_id = await tenant.register(documents.long_text(5000))
    run = tenant.handler(DownEmbedder(DIMENSION))
    with pytest.raises(errors.RetryLater, match="embedding"):
        await runs(run)(job(source_id, attempts=1))
    assert (await tenant.row(source_id)).status == "pending"
    with pytest.raises(errors.RetryLater):
        await runs(run)(job(source_id, attempts=3))
    row = await tenant.row(source_id)
    assert row.status == "failed"
    assert "embedding" in (row.error or "")


async def test_vectors_not_ready_is_retried(tenant: Tenant) -> None:
    source_id = await tenant.register(documents.long_text(5000))
    with pytest.raises(errors.RetryLater, match="not ready"):
        await runs(tenant.handler(vectors=None))(job(source_id))


async def test_a_file_without_text_nor_files_api_fails_for_good(tenant: Tenant) -> None:
    source_id = await tenant.register(None, file_id="f9", mime="application/pdf")
    with pytest.raises(errors.PermanentJobError, match="files API"):
        await runs(tenant.handler())(job(source_id, file_id="f9"))
    assert (await tenant.row(source_id)).status == "failed"


async def test_a_forgotten_file_and_a_malformed_payload(tenant: Tenant) -> None:
    run = tenant.handler()
    await runs(run)(job("U_u1_C_c1_T_1"))  # no such row: nothing happens
    assert await tenant.vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1") == 0
    with pytest.raises(errors.PermanentJobError, match="map_reduce payload: overlap_tokens"):
        await runs(run)(job("s", chunk_tokens=10, overlap_tokens=10))


async def test_the_retention_sweep_deletes_expired_files_and_their_chunks(tenant: Tenant) -> None:
    run = tenant.handler()
    old = await tenant.register(documents.long_text(3000), retention_seconds=-1)
    kept = await tenant.register(documents.long_text(3000, seed=3), chat="c2")
    await runs(run)(job(old))
    await runs(run)(job(kept))
    assert await run.expire() == 1
    assert await tenant.registry.get("u1", old) is None
    assert await tenant.registry.get("u1", kept) is not None
    assert await tenant.vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=old) == 0
    assert await tenant.vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=kept) > 0
    assert await run.expire() == 0


async def test_the_retention_sweep_waits_for_the_vector_store(tenant: Tenant) -> None:
    old = await tenant.register("short", retention_seconds=-1)
    assert await tenant.handler(vectors=None).expire() == 0
    assert await tenant.registry.get("u1", old) is not None


async def test_offline_media_are_not_transcribed_and_the_file_says_why(tenant: Tenant) -> None:
    source_id = await tenant.register(None, file_id="img1", mime="image/png")
    run = tenant.handler(files=BytesFiles(documents.png(8, 8)))
    with pytest.raises(errors.PermanentJobError, match="offline provider reads no images"):
        await runs(run)(job(source_id, file_id="img1", filename="scan.png", mime_type="image/png"))
    row = await tenant.row(source_id)
    assert row.status == "failed"
    assert "native part" in (row.error or "")


class FailingRegistry(in_memory_store.Attachments):
    """The file registry answering ``error`` when the file is marked indexed (reads still work)."""

    def __init__(self, tables: in_memory_store.Tables, error: store_port.StoreError) -> None:
        super().__init__(tables)
        self.error = error

    async def mark_indexed(self, user_id: str, source_id: str, chunks: int) -> None:
        raise self.error


@pytest.mark.parametrize(
    ("retryable", "attempts", "raised", "status"),
    [
        (True, 1, errors.RetryLater, "pending"),
        (True, 3, errors.RetryLater, "failed"),  # the last attempt: the file says why
        (False, 1, errors.PermanentJobError, "failed"),
    ],
)
async def test_a_store_error_is_retried_only_when_it_says_a_retry_may_help(
    tenant: Tenant, retryable: bool, attempts: int, raised: type[errors.JobError], status: str
) -> None:
    failure = store_port.StoreError("the store is down")
    failure.retryable = retryable
    source_id = await tenant.register(documents.long_text(3000))
    run = tenant.handler(registry=FailingRegistry(tenant.tables, failure))
    with pytest.raises(raised, match="store: the store is down") as caught:
        await runs(run)(job(source_id, attempts=attempts))
    assert caught.value.__cause__ is failure
    row = await tenant.row(source_id)
    assert row.status == status
    if status == "failed":
        assert row.error == "store: the store is down"
