"""Prometheus metrics of the runtime, all prefixed `echo_` (DESIGN §8).

Series every layer shares (hooks, status events, identity, config, LLM, embeddings, vectors, jobs,
tools); each capability keeps its own beside it (`echo.capabilities.<capability>.metrics`).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "BACKGROUND_TASK_FAILURES",
    "CONFIG_LAST_RELOAD_OK",
    "CONFIG_RELOADS",
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
    "LATENCY_BUCKETS",
    "LLM_CALLS",
    "LLM_LATENCY",
    "LLM_OFFLINE",
    "LLM_RETRIES",
    "LLM_TOKENS",
    "STATUS_EVENTS",
    "TOOL_CALLS",
    "VECTOR_ERRORS",
    "VECTOR_LATENCY",
]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HOOK_LATENCY = Histogram(
    "echo_hook_latency_seconds",
    "Time spent in one filter hook (s), by filter and phase (inlet|outlet).",
    ["filter", "phase"],
    buckets=LATENCY_BUCKETS,
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
    buckets=LATENCY_BUCKETS,
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


# --- the tool server (/tools/…, Open WebUI's tool calls) ---
TOOL_CALLS = Counter(
    "echo_tool_calls_total",
    "Calls of the registry tools (save_plan, update_plan, list_plans, commit_code, read_code, list_code)"
    " by tool and outcome: ok, not_found (no such plan or code entry), invalid (a missing header or a bad"
    " body: 413/422), unavailable (no store, or the store is down: 503).",
    ["tool", "outcome"],
)
