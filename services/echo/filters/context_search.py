"""`search_session_context(source_id, query)`: the best chunks of one ingested file, for its user only.

The tool the `<smart_context>` block tells the model to use. The source must be a file of the calling
user (`echo.store.attachments`): a source id of another user, or one that expired, answers with no
chunk and says the source is unknown, exactly as a source that never existed. A file still being
ingested answers with what is indexed so far and says it is pending.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from echo import metrics
from echo.embeddings import base as embeddings_base
from echo.store import attachments, pool
from echo.vectors import base as vectors_base

__all__ = ["SearchBackends", "search_session_context"]


class SearchBackends(Protocol):
    store: pool.Store
    embedder: embeddings_base.Embedder
    vectors: vectors_base.VectorStore | None


async def search_session_context(
    backends: SearchBackends, user_id: str, source_id: str, query: str, k: int
) -> dict[str, Any]:
    """`{"source_id", "status", "filename", "chunks": [{"text", "score", "chunk_index"}]}`, best first;
    raises `EchoError` subclasses when the store, the embedder or the vector store fails."""
    started = time.perf_counter()
    found = await attachments.Attachments(backends.store).get(user_id, source_id)
    if found is None:
        return {"source_id": source_id, "status": "unknown", "filename": None, "chunks": []}
    answer: dict[str, Any] = {
        "source_id": source_id,
        "status": found.status,
        "filename": found.filename,
        "chunks": [],
    }
    if found.status == "failed":
        answer["error"] = found.error
        return answer
    if backends.vectors is None:
        raise vectors_base.VectorStoreError("the vector store is not ready yet", retryable=True)
    vector = (await backends.embedder.embed([query]))[0]
    hits = await backends.vectors.search(
        vectors_base.Kind.EPHEMERAL, vector, user_id=user_id, source_id=source_id, limit=k
    )
    answer["chunks"] = [
        {
            "text": hit.payload.get("text", ""),
            "score": round(hit.score, 4),
            "chunk_index": hit.payload.get("chunk_index"),
        }
        for hit in hits
    ]
    metrics.CONTEXT_SEARCH_SECONDS.observe(time.perf_counter() - started)
    return answer
