"""The map_reduce job on its own where PostgreSQL, Qdrant local mode and the real google-genai SDK
are the subject: the fake Gemini's map and reduce calls, an image transcribed by the multimodal
model, and the retention sweep taking expired files (PostgreSQL's clock) and their chunks out. The
handler's other paths run in process on the in-memory store (`tests/unit/test_map_reduce_handler.py`)."""

from __future__ import annotations

import base64
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import documents
from fakes.fixed_index import FixedIndex
from fakes.gemini_server import FakeGemini
from fakes.openwebui_files import BytesFiles

from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.llm import factory
from echo.adapters.store import attachments
from echo.adapters.store.pool import Store
from echo.adapters.vectors import factory as vectors_factory
from echo.capabilities.context import map_reduce, payloads
from echo.config.settings import Settings
from echo.domain import jobs as domain
from echo.domain import kinds
from echo.domain.attachments import routing
from echo.ports import vectors as vectors_base
from echo.queue.registry import Registry

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
async def vectors(tmp_path: Path) -> Any:
    found = vectors_factory.vector_store_from_settings(
        Settings(data_dir=tmp_path, qdrant_path=tmp_path / "qdrant", tenant="t1"), dimension=64
    )
    yield found
    await found.aclose()


async def registered(store: Store, text: str, *, chat: str = "c1", user: str = "u1") -> str:
    registry = attachments.Attachments(store)
    new = attachments.NewAttachment(
        chat_id=chat,
        file_id=None,
        filename="doc.txt",
        mime_type="text/plain",
        mode=routing.Mode.RAG,
        status="pending",
        content_sha256=None,
        size_bytes=len(text),
        pending_text=text,
    )
    async with store.transaction() as connection:
        source_id, _ = await registry.register(connection, user, new, now=time.time(), retention_seconds=3600)
    return source_id


def job(source_id: str, attempts: int = 1, user: str = "u1", **extra: Any) -> domain.Job:
    payload = {
        "user_id": user,
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
    return domain.Job(id=1, kind="map_reduce", payload=payload, attempts=attempts)


def handler(store: Store, settings: Settings, embedder: Any, vectors: Any) -> map_reduce.MapReduceHandler:
    return map_reduce.MapReduceHandler(
        attachments.Attachments(store),
        lambda: factory.llm_from_settings(settings),
        FixedIndex(embedder, vectors),
        None,
        max_attempts=3,
    )


def runs(handler: map_reduce.MapReduceHandler) -> Callable[[domain.Job], Awaitable[None]]:
    """`handler` as a worker runs it: the job's stored payload validated into its model first."""
    return Registry().register(kinds.MAP_REDUCE, handler, payload=payloads.MapReducePayload).run


async def test_a_long_file_is_mapped_and_reduced_by_the_model(
    store: Store, vectors: Any, gemini: FakeGemini, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(map_reduce, "MAP_SECTION_TOKENS", 20_000)
    settings = Settings(
        data_dir=tmp_path, llm_provider="gemini", gemini_api_key="k", gemini_base_url=gemini.base_url
    )
    gemini.responder = lambda body: (
        "Merged: the file is about servers and budgets."
        if "merge partial summaries" in str(body.get("systemInstruction"))
        else "Section: servers, budgets, deadlines."
    )
    text = documents.long_text(400_000)  # several map sections
    source_id = await registered(store, text)
    run = handler(store, settings, FakeEmbedder(64), vectors)
    try:
        await runs(run)(job(source_id))
    finally:
        await run.aclose()
    row = await attachments.Attachments(store).get("u1", source_id)
    assert row is not None
    assert row.status == "ready"
    assert row.summary_mode == "map_reduce"
    assert row.summary == "Merged: the file is about servers and budgets."
    maps = [
        r for r in gemini.requests if "one section of a long file" in str(r.body.get("systemInstruction"))
    ]
    reduces = [
        r for r in gemini.requests if "merge partial summaries" in str(r.body.get("systemInstruction"))
    ]
    assert len(maps) >= 3
    assert len(reduces) >= 1
    assert row.chunks == await vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=source_id)
    assert await attachments.Attachments(store).pending_text("u1", source_id) is None


async def test_the_retention_sweep_deletes_expired_files_and_their_chunks(
    store: Store, vectors: Any, tmp_path: Path
) -> None:
    run = handler(store, Settings(data_dir=tmp_path, llm_provider="offline"), FakeEmbedder(64), vectors)
    old = await registered(store, documents.long_text(3000))
    kept = await registered(store, documents.long_text(3000, seed=3), chat="c2")
    await runs(run)(job(old))
    await runs(run)(job(kept))
    await store.execute(
        "UPDATE attachments SET expires_at = now() - interval '1 second' WHERE source_id = $1", old
    )
    assert await run.expire() == 1
    registry = attachments.Attachments(store)
    assert await registry.get("u1", old) is None
    assert await registry.get("u1", kept) is not None
    assert await vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=old) == 0
    assert await vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=kept) > 0
    assert await run.expire() == 0


async def registered_media(store: Store, mime: str) -> str:
    registry = attachments.Attachments(store)
    new = attachments.NewAttachment("c1", "img1", "scan.png", mime, routing.Mode.RAG, "pending", None, 100)
    async with store.transaction() as connection:
        source_id, _ = await registry.register(connection, "u1", new, now=time.time(), retention_seconds=60)
    return source_id


async def test_an_image_is_transcribed_by_the_multimodal_model_then_indexed(
    store: Store, vectors: Any, gemini: FakeGemini, tmp_path: Path
) -> None:
    image = documents.png(40, 40, noise=True)
    settings = Settings(
        data_dir=tmp_path, llm_provider="gemini", gemini_api_key="k", gemini_base_url=gemini.base_url
    )
    gemini.responder = lambda body: "A scanned invoice. Text: INVOICE 2291, total 418 euros, due 2027-01-15."
    source_id = await registered_media(store, "image/png")
    run = map_reduce.MapReduceHandler(
        attachments.Attachments(store),
        lambda: factory.llm_from_settings(settings),
        FixedIndex(FakeEmbedder(64), vectors),
        BytesFiles(image),  # type: ignore[arg-type]
        max_attempts=3,
    )
    try:
        await runs(run)(job(source_id, file_id="img1", filename="scan.png", mime_type="image/png"))
    finally:
        await run.aclose()
    (asked,) = gemini.requests
    parts = asked.body["contents"][-1]["parts"]
    inline = parts[0].get("inlineData") or parts[0]["inline_data"]
    assert inline.get("mimeType", inline.get("mime_type")) == "image/png"
    encoded = inline["data"]  # the SDK sends URL-safe base64, unpadded
    assert base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)) == image
    assert "transcribe all its text" in parts[1]["text"]
    row = await attachments.Attachments(store).get("u1", source_id)
    assert row is not None
    assert row.status == "ready"
    assert "INVOICE 2291" in (row.summary or "")
    assert await vectors.count(vectors_base.Kind.EPHEMERAL, user_id="u1", source_id=source_id) == 1
