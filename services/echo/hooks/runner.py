"""Run one filter hook under its deadline; on any failure answer with the original body (DESIGN §6)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from opentelemetry import trace
from opentelemetry.context import Context

from echo import metrics, tracing
from echo.filters import base

__all__ = ["deadline_seconds", "run_hook"]

log = structlog.get_logger("echo.hooks")

_DEFAULT_DEADLINE_MS = {"inlet": 800, "outlet": 5000}


def deadline_seconds(ctx: base.HookContext) -> float:
    """The filter's own deadline valve (`INLET_DEADLINE_MS` or `inlet_deadline_ms`, …)."""
    name = f"{ctx.phase}_deadline_ms"
    valves = ctx.valves
    value = getattr(valves, name, None) or getattr(valves, name.upper(), None)
    return (value or _DEFAULT_DEADLINE_MS[ctx.phase]) / 1000.0


async def run_hook(
    flt: base.Filter,
    body: dict[str, Any],
    ctx: base.HookContext,
    *,
    trace_parent: Context | None = None,
) -> dict[str, Any]:
    """The filter's new body, or `body` unchanged when the filter fails or runs out of time.

    `trace_parent` continues a trace the caller started (W3C `traceparent` of the request).
    """
    started = time.perf_counter()
    outcome = "ok"
    with tracing.tracer().start_as_current_span(
        f"echo.{ctx.phase}",
        context=trace_parent,
        attributes={
            "echo.filter": ctx.filter_id,
            "echo.phase": ctx.phase,
            "echo.chat_id": ctx.ids.chat_id or "",
            "echo.user_id": ctx.ids.user_id or "",
        },
    ) as span:
        try:
            async with asyncio.timeout(deadline_seconds(ctx)):
                hook = flt.inlet if ctx.phase == "inlet" else flt.outlet
                # A shallow copy keeps a failing filter's top-level edits out of the fallback body;
                # filters never mutate nested values (they rebuild what they change).
                result = await hook(dict(body), ctx)
            if not isinstance(result, dict):
                raise TypeError(f"filter returned {type(result).__name__}, not a body")
        except TimeoutError:
            outcome = "deadline"
            result = body
            span.set_status(trace.StatusCode.ERROR, "deadline exceeded")
            log.warning("hook_deadline_exceeded", deadline_s=deadline_seconds(ctx), returned="body unchanged")
            metrics.HOOK_FAILURES.labels(ctx.filter_id, ctx.phase, "deadline").inc()
        except Exception as error:
            outcome = "failed"
            result = body
            span.record_exception(error)
            span.set_status(trace.StatusCode.ERROR, type(error).__name__)
            log.exception("hook_failed", error=repr(error), returned="body unchanged")
            metrics.HOOK_FAILURES.labels(ctx.filter_id, ctx.phase, "error").inc()
    metrics.HOOK_REQUESTS.labels(ctx.filter_id, ctx.phase, outcome).inc()
    metrics.HOOK_LATENCY.labels(ctx.filter_id, ctx.phase).observe(time.perf_counter() - started)
    return result
