"""Prometheus metrics of the runtime, all prefixed `echo_` (DESIGN §8).

Later capabilities add theirs here so that one module lists every series the dashboards query.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "BACKGROUND_TASK_FAILURES",
    "CONFIG_LAST_RELOAD_OK",
    "CONFIG_RELOADS",
    "CONTEXT_CHUNKS",
    "CONTEXT_EXPIRED",
    "CONTEXT_FILES",
    "CONTEXT_IMAGE_PARTS",
    "CONTEXT_INGESTED_BYTES",
    "CONTEXT_MAP_REDUCE_FAILURES",
    "CONTEXT_MAP_REDUCE_SECONDS",
    "CONTEXT_SEARCH_SECONDS",
    "EMBEDDING_ERRORS",
    "EMBEDDING_LATENCY",
    "EMBEDDING_TEXTS",
    "HOOK_FAILURES",
    "HOOK_LATENCY",
    "HOOK_REQUESTS",
    "IDENTITY_MISMATCHES",
    "JOBS",
    "JOBS_ENQUEUED",
    "JOBS_PENDING",
    "JOBS_SWEPT",
    "JOB_ATTEMPTS",
    "JOB_DEAD_LETTERS",
    "JOB_DURATION",
    "JOB_TIMEOUTS",
    "LLM_CALLS",
    "LLM_LATENCY",
    "LLM_OFFLINE",
    "LLM_RETRIES",
    "LLM_TOKENS",
    "MEMORIES",
    "MEMORY_DISCARDED",
    "MEMORY_DISTILL_FAILURES",
    "MEMORY_DISTILL_SECONDS",
    "MEMORY_MERGE_CONFLICTS",
    "MEMORY_RECALLED",
    "MEMORY_RECALLS",
    "MEMORY_RECALL_SECONDS",
    "PIPE_LATENCY",
    "PIPE_REQUESTS",
    "PIPE_TOOL_CALLS",
    "SECRETS_MASKED",
    "SHADOW_FAILURES",
    "SHADOW_PLACEHOLDER_SIGNATURES",
    "SHADOW_RESTORED_BYTES",
    "SHADOW_SUTURE",
    "STATUS_EVENTS",
    "TOOL_CALLS",
    "VECTOR_ERRORS",
    "VECTOR_LATENCY",
]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HOOK_LATENCY = Histogram(
    "echo_hook_latency_seconds",
    "Time spent in one filter hook (s), by filter and phase (inlet|outlet).",
    ["filter", "phase"],
    buckets=_LATENCY_BUCKETS,
)
HOOK_REQUESTS = Counter(
    "echo_hook_requests_total",
    "Filter hook calls by filter, phase and outcome (ok|failed|deadline).",
    ["filter", "phase", "outcome"],
)
HOOK_FAILURES = Counter(
    "echo_hook_failures_total",
    "Filter hooks that failed open (body returned as it could be), by filter, phase and reason.",
    ["filter", "phase", "reason"],
)
# Status events (DESIGN §9): logged and counted on every connection; only the Open WebUI Function,
# which asks with `X-Echo-Events: 1`, also gets them back to show the user.
STATUS_EVENTS = Counter(
    "echo_status_events_total",
    "Status events raised by filters or by the hook runner (a skipped or failed-closed hook), by filter,"
    " phase and level (info|warning|error).",
    ["filter", "phase", "level"],
)
SECRETS_MASKED = Counter(
    "echo_secrets_masked_total",
    "Secrets masked in model output, by kind and where (outlet|pipe).",
    ["kind", "where"],
)
# Identity (DESIGN §7, issue 18): a call whose body names another user than the one Open WebUI
# attached to it (the claim is ignored), or that carries Open WebUI's user header twice (refused).
IDENTITY_MISMATCHES = Counter(
    "echo_identity_mismatch_total",
    "Calls naming a user other than the one Open WebUI authenticated (ignored for identity, or refused"
    " when the user header comes twice), by route (filter|pipe|tools|compact, or file: a body naming"
    " another user's file) and phase (inlet|outlet for filters and files, chat for the pipe, call for"
    " the tool server and compact).",
    ["route", "phase"],
)
CONFIG_RELOADS = Counter(
    "echo_config_reloads_total",
    "Hot reloads of mounted configuration files, by result (ok|error).",
    ["result"],
)
CONFIG_LAST_RELOAD_OK = Gauge(
    "echo_config_last_reload_ok",
    "1 when the mounted configuration files in force are the current ones, 0 after a bad reload.",
)
CONFIG_LAST_RELOAD_OK.set(1)
BACKGROUND_TASK_FAILURES = Counter(
    "echo_background_task_failures_total",
    "Background tasks that raised (restarted with backoff, or reported by /readyz when they cannot be),"
    " by task (warm-up|config-watch|worker-loop|lease-renewal|queue-metrics|retention-sweep|job).",
    ["task"],
)
PIPE_REQUESTS = Counter(
    "echo_pipe_requests_total",
    "Pipe chat completions by model, stream (true|false) and outcome (ok|error).",
    ["model", "stream", "outcome"],
)
PIPE_LATENCY = Histogram(
    "echo_pipe_latency_seconds",
    "Pipe chat completions (s), by model and phase: restore (shadow lookup and suture), record (the"
    " user's turn stored before the call), first_token (request to the first byte from Gemini), total"
    " (request to the end of the answer), archive (the rich turn stored at the end).",
    ["model", "phase"],
    buckets=(*_LATENCY_BUCKETS, 30.0, 60.0, 120.0),
)
PIPE_TOOL_CALLS = Counter(
    "echo_pipe_tool_calls_total",
    "Function calls Gemini made through the pipe, by executor (openwebui: returned as tool_calls;"
    " echo: run by the pipe) and outcome (returned|ok|error|limit).",
    ["executor", "outcome"],
)
# The rich shadow (seed 001): what the pipe restored of Open WebUI's history before each Gemini call.
SHADOW_SUTURE = Counter(
    "echo_shadow_suture_total",
    "Suture lookups by kind (signatures: an assistant message; tool_calls: an assistant message with"
    " tool calls; payloads: a stored heavy part) and outcome (hit|miss).",
    ["kind", "outcome"],
)
SHADOW_RESTORED_BYTES = Counter(
    "echo_shadow_restored_bytes_total",
    "Bytes the suture put back into histories (payloads, restored texts, thought signatures).",
)
SHADOW_FAILURES = Counter(
    "echo_shadow_failures_total",
    "Shadow steps that failed and were skipped (the chat went on), by stage (restore|record|archive)"
    " and reason (store|timeout|unreadable).",
    ["stage", "reason"],
)
SHADOW_PLACEHOLDER_SIGNATURES = Counter(
    "echo_shadow_placeholder_signatures_total",
    "Model steps of the current turn sent with Gemini's placeholder thought signature (their own was"
    " not in the shadow).",
)
LLM_LATENCY = Histogram(
    "echo_llm_latency_seconds",
    "LLM call duration (s) by provider, model and purpose.",
    ["provider", "model", "purpose"],
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
)
LLM_TOKENS = Counter(
    "echo_llm_tokens_total",
    "LLM tokens by provider, model, purpose and direction (prompt|completion).",
    ["provider", "model", "purpose", "direction"],
)
LLM_CALLS = Counter(
    "echo_llm_calls_total",
    "Background LLM generations by provider, model, purpose and outcome (ok|error|empty|invalid_json).",
    ["provider", "model", "purpose", "outcome"],
)
LLM_RETRIES = Counter(
    "echo_llm_retries_total",
    "LLM attempts retried, by provider, purpose and reason (HTTP status, timeout or transport).",
    ["provider", "purpose", "reason"],
)
LLM_OFFLINE = Counter(
    "echo_llm_offline_total",
    "Generations answered by the offline heuristics (no LLM configured), by purpose.",
    ["purpose"],
)
EMBEDDING_LATENCY = Histogram(
    "echo_embedding_latency_seconds",
    "Duration of one embedding batch (s): one /embeddings request or one local encode, by backend and model.",
    ["backend", "model"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
EMBEDDING_TEXTS = Counter(
    "echo_embedding_texts_total",
    "Texts embedded, by backend (http|local) and model.",
    ["backend", "model"],
)
EMBEDDING_ERRORS = Counter(
    "echo_embedding_errors_total",
    "Failed embedding attempts (retried or not) by backend and reason (429|5xx|timeout|malformed|…).",
    ["backend", "reason"],
)
VECTOR_LATENCY = Histogram(
    "echo_vector_latency_seconds",
    "Duration of one vector-store operation (s), by operation (upsert|search|scroll|delete|…).",
    ["operation"],
    buckets=_LATENCY_BUCKETS,
)
VECTOR_ERRORS = Counter(
    "echo_vector_errors_total",
    "Failed vector-store operations, by operation and reason (unavailable|dimension|rejected|…).",
    ["operation", "reason"],
)

# Job queue (echo.queue). Depth gauges are refreshed by every worker from one count query (so a
# dashboard or an HPA should take their max across pods, not their sum).
JOBS = Gauge(
    "echo_jobs",
    "Jobs in the queue by kind and state (pending|running|dead; done rows are not counted, see"
    ' echo_job_duration_seconds_count{outcome="done"}), refreshed by the workers.',
    ["kind", "state"],
)
JOBS_PENDING = Gauge(
    "echo_jobs_pending",
    "Jobs ready to run now (pending, due, or running with an expired lease) by kind: the HPA's signal.",
    ["kind"],
)
JOBS_ENQUEUED = Counter(
    "echo_jobs_enqueued_total",
    "Enqueue calls by kind and result (created|existing: same idempotency key).",
    ["kind", "result"],
)
JOB_DURATION = Histogram(
    "echo_job_duration_seconds",
    "Duration of one job attempt (s) by kind and outcome (done|retry|dead|released|lost).",
    ["kind", "outcome"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0),
)
JOB_ATTEMPTS = Counter(
    "echo_job_attempts_total",
    "Job attempts started (claims) by kind.",
    ["kind"],
)
JOB_DEAD_LETTERS = Counter(
    "echo_job_dead_letters_total",
    "Jobs moved to the dead-letter state by kind (attempts exhausted or a permanent error).",
    ["kind"],
)
JOB_TIMEOUTS = Counter(
    "echo_job_timeouts_total",
    "Job attempts cancelled at their kind's timeout (counted as failed attempts), by kind.",
    ["kind"],
)
JOBS_SWEPT = Counter(
    "echo_jobs_swept_total",
    "Finished jobs deleted by the retention sweep, by state (done|dead).",
    ["state"],
)

# Context compression (echo_compression, seed 002): the filter's inlet and outlet, and the summary job.
_TOKEN_BUCKETS = (256, 1024, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152)
COMPRESSION_TOKENS = Histogram(
    "echo_compression_tokens",
    "Context tokens of one chat request (estimated, o200k_base) on the compression inlet, by stage: before"
    " (as Open WebUI sent it) and after (summary in, covered turns out, tool outputs trimmed, budget kept).",
    ["stage"],
    buckets=_TOKEN_BUCKETS,
)
COMPRESSION_SUMMARIES_REUSED = Counter(
    "echo_compression_summaries_reused_total",
    "Inlets that injected a stored summary valid for the current branch.",
)
COMPRESSION_REDUCTIONS = Counter(
    "echo_compression_reductions_total",
    "What the compression inlet did to fit a request, by action (trimmed_tool_output|folded|dropped_group|"
    "dropped_summary|over_budget).",
    ["action"],
)
COMPRESSION_FAILURES = Counter(
    "echo_compression_failures_total",
    "Compression hooks that handed the body back unchanged, by phase (inlet|outlet) and reason"
    " (store: unreachable or failing; error: anything else; config: the summary window's 80% rule;"
    " reference: a referenced chat left to Open WebUI).",
    ["phase", "reason"],
)
COMPRESSION_SUMMARIES = Counter(
    "echo_compression_summaries_total",
    "Summary jobs by outcome: created, existing (its branch point had one already), superseded (a"
    " summary of the chat's latest branch already covers more), retry (an attempt failed and is"
    " retried), failed (given up: skipped with summary_fail_mode=silent, dead with raise).",
    ["outcome"],
)
COMPRESSION_SUMMARY_FAILURES = Counter(
    "echo_compression_summary_failures_total",
    "Failed summary attempts by reason (llm: the model failed; empty: no usable text, reasoning only;"
    " missing_input: planned messages or the previous summary are gone).",
    ["reason"],
)
COMPRESSION_SUMMARY_FAILURES_SHOWN = Counter(
    "echo_compression_summary_failures_shown_total",
    "Inlets that told the user (a status event) that a summary job of their chat had given up, by the"
    " failure's reason (llm|empty|missing_input); once per failure, on the chat's next inlet.",
    ["reason"],
)
COMPRESSION_SUMMARY_SECONDS = Histogram(
    "echo_compression_summary_seconds",
    "Time to make one summary (s): load the turns, fit the prompt, call the LLM, store it.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
)
COMPRESSION_SUMMARY_RATIO = Histogram(
    "echo_compression_summary_ratio",
    "Compression ratio of one summary: tokens it stands for (new turns plus the summary it folds in)"
    " divided by its own tokens.",
    buckets=(1, 1.5, 2, 3, 5, 8, 13, 20, 35, 60, 100),
)

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
    buckets=_LATENCY_BUCKETS,
)
MEMORY_RECALLED = Counter(
    "echo_memory_recalled_total",
    "Memories injected into turns by the echo_memory inlet.",
)

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
    buckets=_LATENCY_BUCKETS,
)
CONTEXT_EXPIRED = Counter(
    "echo_context_expired_total",
    "Ephemeral files deleted by the retention sweep (rows and their chunks) after EPHEMERAL_RETENTION_HOURS.",
)

# --- the tool server (/tools/…, Open WebUI's tool calls) ---
TOOL_CALLS = Counter(
    "echo_tool_calls_total",
    "Calls of the registry tools (save_plan, update_plan, list_plans, commit_code, read_code, list_code)"
    " by tool and outcome: ok, not_found (no such plan or code entry), invalid (a missing header or a bad"
    " body: 413/422), unavailable (no store, or the store is down: 503).",
    ["tool", "outcome"],
)
