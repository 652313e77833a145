"""`search_session_context(source_id, query)`: the best chunks of one ingested file, for its user only.

The tool the `<smart_context>` block tells the model to use. The source must be a file of the calling
user (`echo.adapters.store.attachments`): a source id of another user, or one that expired, answers with no
chunk and says the source is unknown, exactly as a source that never existed. A file still being
ingested answers with what is indexed so far and says it is pending.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

from echo.adapters.store import attachments, pool
from echo.ports import embeddings as embeddings_base
from echo.ports import vectors as vectors_base
from echo.support import metrics

__all__ = ["PARAMETERS", "SearchBackends", "run_tool", "search_session_context"]


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


PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "source_id": {
            "type": "string",
            "description": "The file's source_id, as its <smart_context> block gives it (U_…_C_…_T_…).",
        },
        "query": {
            "type": "string",
            "description": "What to find in the file: a precise question or keywords.",
        },
        "k": {"type": "integer", "description": "How many passages to return (1-20, default 5)."},
    },
    "required": ["source_id", "query"],
}
"""The tool's parameters as the pipe declares them to Gemini (the tool server's OpenAPI says the same)."""


async def run_tool(
    user_id: str, arguments: Mapping[str, Any], backends: SearchBackends | None
) -> dict[str, Any]:
    """`search_session_context` as the pipe runs it server-side: the arguments Gemini wrote, checked."""
    source_id, query = arguments.get("source_id"), arguments.get("query")
    if not isinstance(source_id, str) or not source_id.strip():
        raise ValueError("source_id: expected the file's source_id (a non-empty string)")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query: expected a non-empty string")
    k = arguments.get("k", 5)
    k = k if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 20 else 5
    if backends is None:
        raise ValueError("no store: ECHO runs without the backends of the ephemeral RAG")
    return await search_session_context(backends, user_id, source_id.strip(), query[:20000], k)
