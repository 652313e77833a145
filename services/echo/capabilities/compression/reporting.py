"""What `echo_compression` tells: its status events, logs and metrics, and how it reports a failure.

Failure policy (DESIGN §6): a hook that fails answers the body unchanged, and says so here — a store
error counts `echo_compression_failures_total{phase, reason="store"}`, logs with why, and adds a
warning event; a summary window the valves forbid counts `reason="config"` and adds an error event;
a summary job of the chat that gave up is told once, on the next inlet
(`echo_compression_summary_failures_shown_total`). An inlet's assembly is measured
(`echo_compression_tokens`, `echo_compression_reductions_total`, summaries reused) and its context
usage shown: a warning above `WARN_PERCENT`, else the usage line when the valves ask for it.
"""

from __future__ import annotations

import structlog

from echo.capabilities import base
from echo.capabilities import events as events_module
from echo.capabilities.compression import metrics as compression_metrics
from echo.config import valves as valves_module
from echo.domain.compression import assembly, budgets
from echo.errors import ConfigError
from echo.ports import store as store_port

__all__ = ["WARN_PERCENT", "assembled", "not_planned", "store_failed", "summary_failure_shown"]

log = structlog.get_logger("echo.filters.compression")

WARN_PERCENT = 90  # context usage above which a warning is shown whatever the valves (seed 002)


def store_failed(name: str, ctx: base.HookContext, error: store_port.StoreError) -> None:
    """The store failed: the hook answers the body unchanged."""
    compression_metrics.COMPRESSION_FAILURES.labels(ctx.phase, "store").inc()
    reason = store_port.describe(error, "the summary store")
    log.warning(
        "compression_store_failed",
        phase=ctx.phase,
        error=str(error),
        reason=reason,
        error_kind=type(error).__name__,
        returned="body unchanged",
    )
    ctx.events.append(
        events_module.StatusEvent(f"{name}: {reason}; the conversation was sent as it is", "warning")
    )


def summary_failure_shown(name: str, failure: store_port.SummaryFailure, ctx: base.HookContext) -> None:
    """A summary job of the chat gave up since its last inlet: said once, this turn goes on."""
    compression_metrics.COMPRESSION_SUMMARY_FAILURES_SHOWN.labels(failure.reason).inc()
    times = f" ({failure.failures} times)" if failure.failures > 1 else ""
    log.warning(
        "summary_failure_shown", reason=failure.reason, detail=failure.detail, failures=failure.failures
    )
    ctx.events.append(
        events_module.StatusEvent(
            f"{name}: the summary of the earlier conversation failed{times} ({failure.detail}); "
            "this turn goes on without it",
            "warning",
        )
    )


def not_planned(name: str, error: ConfigError, ctx: base.HookContext) -> None:
    """The valves allow no summary job (the summary window breaks the 80% rule)."""
    compression_metrics.COMPRESSION_FAILURES.labels(ctx.phase, "config").inc()
    log.error("summary_not_planned", error=str(error))
    ctx.events.append(events_module.StatusEvent(f"{name}: no summary, {error}", "error"))


def assembled(
    result: assembly.Assembly,
    limits: budgets.Thresholds,
    settings: valves_module.CompressionValves,
    ctx: base.HookContext,
) -> None:
    """An inlet's assembly: measured, its summary and context usage shown."""
    compression_metrics.COMPRESSION_TOKENS.labels("before").observe(result.tokens_before)
    compression_metrics.COMPRESSION_TOKENS.labels("after").observe(result.tokens_after)
    for action, count in (
        ("trimmed_tool_output", result.trimmed_tool_outputs),
        ("folded", result.folded),
        ("dropped_group", result.dropped_groups),
        ("dropped_summary", int(result.dropped_summary)),
        ("over_budget", int(result.over_budget)),
    ):
        if count:
            compression_metrics.COMPRESSION_REDUCTIONS.labels(action).inc(count)
    if result.summary_injected:
        compression_metrics.COMPRESSION_SUMMARIES_REUSED.inc()
        ctx.events.append(
            events_module.StatusEvent(
                f"Earlier conversation summarised: {result.covered_turns} messages stand as one summary "
                f"(context {result.tokens_before:,} → {result.tokens_after:,} tokens)"
            )
        )
    usage = 100.0 * result.tokens_after / max(1, limits.max_context_tokens)
    usage_line = f"{result.tokens_after:,} / {limits.max_context_tokens:,} tokens ({usage:.0f}%)"
    if result.over_budget:
        ctx.events.append(
            events_module.StatusEvent(
                f"Context over its limit: the current turn alone needs {usage_line}", "warning"
            )
        )
    elif usage > WARN_PERCENT:
        ctx.events.append(events_module.StatusEvent(f"Context almost full: {usage_line}", "warning"))
    elif settings.show_token_usage_status and usage >= settings.token_usage_status_threshold:
        ctx.events.append(events_module.StatusEvent(f"Context: {usage_line}"))
    (log.info if settings.debug_mode else log.debug)(
        "compression_inlet",
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        summary=result.summary.covered_hash[:12] if result.summary_injected and result.summary else None,
        covered_turns=result.covered_turns,
        trimmed=result.trimmed_tool_outputs,
        folded=result.folded,
        dropped_groups=result.dropped_groups,
        thresholds=limits.source,
    )
