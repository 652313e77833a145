"""`echo_memory`'s metrics: distilled windows, merges, recall.

All prefixed `echo_` (DESIGN §8).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from echo.support import metrics as shared

__all__ = [
    "MEMORIES",
    "MEMORY_DISCARDED",
    "MEMORY_DISTILL_FAILURES",
    "MEMORY_DISTILL_SECONDS",
    "MEMORY_MERGE_CONFLICTS",
    "MEMORY_RECALLED",
    "MEMORY_RECALLS",
    "MEMORY_RECALL_HELD",
    "MEMORY_RECALL_SECONDS",
]

# --- Memory (echo_memory, seed 000 filter 2; echo.capabilities.memory.distill and
# echo.capabilities.memory.filter) ---
MEMORIES = Counter(
    "echo_memories_total",
    "Distilled windows by outcome: created (a new memory), merged (into a similar one by the LLM),"
    " touched (an exact match: only its date changed), discarded (nothing worth remembering).",
    ["outcome"],
)
MEMORY_DISCARDED = Counter(
    "echo_memory_discarded_total",
    "Windows that made no memory, by reason (small_talk: too few content words to ask the LLM;"
    " model: the distillation said nothing is worth remembering; empty: no text after cleaning).",
    ["reason"],
)
MEMORY_DISTILL_SECONDS = Histogram(
    "echo_memory_distill_seconds",
    "Time to distil one window (s): load, clean, LLM, embed, collide, write (merges included).",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
)
MEMORY_DISTILL_FAILURES = Counter(
    "echo_memory_distill_failures_total",
    "Failed distillation attempts by reason (llm, invalid: schema-invalid after the repair attempt,"
    " embedding, vectors, missing_input, not_ready: the embedder or vector store is not up yet).",
    ["reason"],
)
MEMORY_MERGE_CONFLICTS = Counter(
    "echo_memory_merge_conflicts_total",
    "Merges that found their memory changed by another worker meanwhile and merged again.",
)
MEMORY_RECALLS = Counter(
    "echo_memory_recalls_total",
    "Recall on the echo_memory inlet by outcome (hit: memories injected; miss: none relevant;"
    " timeout: past INLET_DEADLINE_MS, the turn went on without; error; skipped: nothing to recall).",
    ["outcome"],
)
MEMORY_RECALL_SECONDS = Histogram(
    "echo_memory_recall_seconds",
    "Recall time on the inlet (s): embed the latest user message, search, rank, render.",
    buckets=shared.LATENCY_BUCKETS,
)
MEMORY_RECALL_HELD = Counter(
    "echo_memory_recall_held_total",
    "Memories found by recall but left out because the request already holds every message they came"
    " from (in its messages or in the summary it carries).",
)
MEMORY_RECALLED = Counter(
    "echo_memory_recalled_total",
    "Memories injected into turns by the echo_memory inlet.",
)
