"""The pipe models' and the rich shadow's metrics.

All prefixed `echo_` (DESIGN §8).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from echo.support import metrics as shared

__all__ = [
    "PIPE_LATENCY",
    "PIPE_REQUESTS",
    "PIPE_TOOL_CALLS",
    "SHADOW_FAILURES",
    "SHADOW_PLACEHOLDER_SIGNATURES",
    "SHADOW_RESTORED_BYTES",
    "SHADOW_SUTURE",
]

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
    buckets=(*shared.LATENCY_BUCKETS, 30.0, 60.0, 120.0),
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
