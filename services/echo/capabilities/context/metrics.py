"""`echo_context`'s metrics: attached files, the ephemeral RAG, map-reduce jobs, search.

All prefixed `echo_` (DESIGN §8).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from echo.support import metrics as shared

__all__ = [
    "CONTEXT_CHUNKS",
    "CONTEXT_EXPIRED",
    "CONTEXT_FILES",
    "CONTEXT_IMAGE_PARTS",
    "CONTEXT_INGESTED_BYTES",
    "CONTEXT_MAP_REDUCE_FAILURES",
    "CONTEXT_MAP_REDUCE_SECONDS",
    "CONTEXT_SEARCH_SECONDS",
]

# --- the context filter's attachments (seed 000, filter 1) ---
CONTEXT_FILES = Counter(
    "echo_context_files_total",
    "Files the echo_context inlet routed, by mode: inline (text in the turn), native (a media part),"
    " rag_ephemeral (chunked into the ephemeral RAG), refused (empty, over the limit, unreadable:"
    " the model is told why), left (to Open WebUI: no files API, a type ECHO does not read, an error).",
    ["mode"],
)
CONTEXT_IMAGE_PARTS = Counter(
    "echo_context_image_parts_total",
    "Pasted image parts the echo_context inlet checked, by outcome: kept, corrected (a declared type"
    " that lied), refused (undecodable, empty, over the limit, not an image).",
    ["outcome"],
)
CONTEXT_INGESTED_BYTES = Counter(
    "echo_context_ingested_bytes_total",
    "Bytes of file text chunked and embedded into the ephemeral RAG.",
)
CONTEXT_CHUNKS = Counter(
    "echo_context_chunks_total",
    "Chunks written to the ephemeral RAG (echo_ephemeral).",
)
CONTEXT_MAP_REDUCE_SECONDS = Histogram(
    "echo_context_map_reduce_seconds",
    "Time of one map_reduce job (s): read the file, extract, chunk, embed, store, summarise.",
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0),
)
CONTEXT_MAP_REDUCE_FAILURES = Counter(
    "echo_context_map_reduce_failures_total",
    "map_reduce attempts that failed, by reason (extraction, files_api, llm, embedding, vectors,"
    " not_ready, store); a file whose last attempt failed is marked failed and the model told why.",
    ["reason"],
)
CONTEXT_SEARCH_SECONDS = Histogram(
    "echo_context_search_seconds",
    "search_session_context latency (s): embed the query, search the source's chunks.",
    buckets=shared.LATENCY_BUCKETS,
)
CONTEXT_EXPIRED = Counter(
    "echo_context_expired_total",
    "Ephemeral files deleted by the retention sweep (rows and their chunks) after EPHEMERAL_RETENTION_HOURS.",
)
