"""`echo_compression`'s metrics: the inlet's tokens and reductions, summary jobs and their failures.

All prefixed `echo_` (DESIGN §8).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = [
    "COMPRESSION_FAILURES",
    "COMPRESSION_REDUCTIONS",
    "COMPRESSION_SUMMARIES",
    "COMPRESSION_SUMMARIES_REUSED",
    "COMPRESSION_SUMMARY_FAILURES",
    "COMPRESSION_SUMMARY_FAILURES_SHOWN",
    "COMPRESSION_SUMMARY_RATIO",
    "COMPRESSION_SUMMARY_SECONDS",
    "COMPRESSION_TOKENS",
]

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
