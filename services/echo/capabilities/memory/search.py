"""Searching a user's long-term memories: the memory API, the tool server and the pipe's own tool
share this one query.

The same relevance floor as recall (``RECALL_MIN_SIMILARITY``'s default, cosine similarity, see
``echo.config.valves.MemoryValves``): a memory below it is no answer, however few there are, and each
result says its score. The same budget as recall, for the model's tools: at most ``k`` memories, the
nearest first, while their texts fit ``max_tokens`` (``MAX_TOKENS``, ``RECALL_MAX_TOKENS``'s default;
one that does not fit what is left is skipped, so a long one never crowds out the rest). The memory
API's search passes ``max_tokens=None``: ``k`` alone."""

from __future__ import annotations

from typing import Any

from echo.config import valves as valves_module
from echo.domain import tokens
from echo.errors import EchoError
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base

__all__ = ["MAX_TOKENS", "MIN_SCORE", "BackendsNotReady", "search_memories"]

MIN_SCORE: float = valves_module.MemoryValves.model_fields["RECALL_MIN_SIMILARITY"].default
MAX_TOKENS: int = valves_module.MemoryValves.model_fields["RECALL_MAX_TOKENS"].default


class BackendsNotReady(EchoError):
    """The embedder and vector store are still being opened; the caller may retry shortly."""

    retryable = True


async def search_memories(
    backends: backends_port.Backends,
    user_id: str,
    query: str,
    k: int,
    *,
    min_score: float = MIN_SCORE,
    max_tokens: int | None = MAX_TOKENS,
) -> list[dict[str, Any]]:
    """The user's memories nearest to `query` at or above `min_score` (cosine): at most `k`, and
    those whose texts fit `max_tokens` together (None: no budget), as the API answers them (payload
    + score); `BackendsNotReady` while the backends have no embedder and vector store ready."""
    index = backends.index
    embedder = index.embedder() if index is not None else None
    vectors = await index.vectors() if index is not None else None
    if embedder is None or vectors is None:
        raise BackendsNotReady("the embedder and vector store are not ready yet")
    vector = (await embedder.embed([query]))[0]
    hits = await vectors.search(
        vectors_base.Kind.MEMORY, vector, user_id=user_id, limit=k, min_score=min_score, query_text=query
    )
    found: list[dict[str, Any]] = []
    left = max_tokens
    for hit in hits:
        if hit.user_id != user_id or hit.score < min_score:
            continue
        summary = hit.payload.get("summary")
        if left is not None:
            cost = tokens.estimate_tokens(summary if isinstance(summary, str) else "")
            if cost > left:
                continue
            left -= cost
        found.append(
            {
                "id": hit.id,
                "user_id": hit.user_id,
                "chat_id": hit.chat_id,
                "score": hit.score,
                "memory_id": hit.payload.get("memory_id"),
                "summary": summary,
                "memory_importance": hit.payload.get("memory_importance"),
                "tags": hit.payload.get("tags", []),
                "updated_at": hit.payload.get("timestamp"),
                "version": hit.payload.get("version"),
            }
        )
    return found
