"""`search_session_context(source_id, query)`: the best chunks of one ingested file, for its user only.

The tool the `<smart_context>` block tells the model to use. The source must be a file of the calling
user (the backends' `AttachmentStore`): a source id of another user, or one that expired, answers with no
chunk and says the source is unknown, exactly as a source that never existed. A file still being
ingested answers with what is indexed so far and says it is pending.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from echo.capabilities.context import metrics as context_metrics
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base

__all__ = ["PARAMETERS", "run_tool", "search_session_context"]


async def search_session_context(
    store: backends_port.Repositories,
    index: backends_port.Index | None,
    user_id: str,
    source_id: str,
    query: str,
    k: int,
) -> dict[str, Any]:
    """`{"source_id", "status", "filename", "chunks": [{"text", "score", "chunk_index"}]}`, best first,
    from the file registry of `store` and the embedder and vectors of `index`; raises `EchoError`
    subclasses when the store, the embedder or the vector store fails (retryable while not ready)."""
    started = time.perf_counter()
    found = await store.attachments.get(user_id, source_id)
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
    embedder = index.embedder() if index is not None else None
    vectors = await index.vectors() if index is not None else None
    if embedder is None or vectors is None:
        raise vectors_base.VectorStoreError("the vector store is not ready yet", retryable=True)
    vector = (await embedder.embed([query]))[0]
    hits = await vectors.search(
        vectors_base.Kind.EPHEMERAL, vector, user_id=user_id, source_id=source_id, limit=k, query_text=query
    )
    answer["chunks"] = [
        {
            "text": hit.payload.get("text", ""),
            "score": round(hit.score, 4),
            "chunk_index": hit.payload.get("chunk_index"),
        }
        for hit in hits
    ]
    context_metrics.CONTEXT_SEARCH_SECONDS.observe(time.perf_counter() - started)
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
    user_id: str, arguments: Mapping[str, Any], backends: backends_port.Backends | None
) -> dict[str, Any]:
    """`search_session_context` as the pipe runs it server-side: the arguments Gemini wrote, checked."""
    source_id, query = arguments.get("source_id"), arguments.get("query")
    if not isinstance(source_id, str) or not source_id.strip():
        raise ValueError("source_id: expected the file's source_id (a non-empty string)")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query: expected a non-empty string")
    k = arguments.get("k", 5)
    k = k if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 20 else 5
    if backends is None or backends.store is None:
        raise ValueError("no store: ECHO runs without the backends of the ephemeral RAG")
    return await search_session_context(
        backends.store, backends.index, user_id, source_id.strip(), query[:20000], k
    )
