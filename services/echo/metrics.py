"""Prometheus metrics of the runtime, all prefixed `echo_` (DESIGN §8).

Later capabilities add theirs here so that one module lists every series the dashboards query.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "CONFIG_LAST_RELOAD_OK",
    "CONFIG_RELOADS",
    "HOOK_FAILURES",
    "HOOK_LATENCY",
    "HOOK_REQUESTS",
    "LLM_LATENCY",
    "LLM_TOKENS",
    "PIPE_REQUESTS",
    "SECRETS_MASKED",
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
SECRETS_MASKED = Counter(
    "echo_secrets_masked_total",
    "Secrets masked in model output, by kind and where (outlet|pipe).",
    ["kind", "where"],
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
PIPE_REQUESTS = Counter(
    "echo_pipe_requests_total",
    "Pipe chat completions by model, stream (true|false) and outcome (ok|error).",
    ["model", "stream", "outcome"],
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
