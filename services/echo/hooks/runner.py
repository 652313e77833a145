"""Run one filter hook under its deadline; on any failure answer with the original body (DESIGN §6).

The answer is serialised inside the same guard, so a filter result JSON cannot carry (NaN, a set)
falls back like any other failure. A filter that masks secrets (`base.FailsClosed`) answers a failed
outlet with `fail_closed(body)` instead of the body, so an unmasked secret never goes back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import structlog
from opentelemetry import trace
from opentelemetry.context import Context

from echo import metrics, tracing
from echo.filters import base
from echo.hooks import wire

__all__ = ["deadline_seconds", "run_hook"]

log = structlog.get_logger("echo.hooks")

_DEFAULT_DEADLINE_MS = {"inlet": 800, "outlet": 5000}


def deadline_seconds(ctx: base.HookContext) -> float:
    """The filter's own deadline valve (`INLET_DEADLINE_MS` or `inlet_deadline_ms`, …)."""
    name = f"{ctx.phase}_deadline_ms"
    valves = ctx.valves
    value = getattr(valves, name, None) or getattr(valves, name.upper(), None)
    return (value or _DEFAULT_DEADLINE_MS[ctx.phase]) / 1000.0


def _fallback(flt: base.Filter, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
    """What a failed hook answers: the body it was given, or, for a masking outlet, a safe version."""
    if ctx.phase != "outlet" or not isinstance(flt, base.FailsClosed):
        return body
    try:
        return flt.fail_closed(body, ctx)
    except Exception:
        log.exception("fail_closed_failed", returned="body unchanged")
        return body


async def run_hook(
    flt: base.Filter,
    body: dict[str, Any],
    ctx: base.HookContext,
    *,
    trace_parent: Context | None = None,
) -> bytes:
    """The JSON answer: the filter's new body, or `body` unchanged (see `_fallback`) when the filter
    fails, runs out of time or returns what JSON cannot carry.

    `trace_parent` continues a trace the caller started (W3C `traceparent` of the request).
    Raises a 422 (`wire.too_deep`) only when the body itself nests deeper than JSON can be written.
    """
    started = time.perf_counter()
    seconds = deadline_seconds(ctx)
    ctx = dataclasses.replace(ctx, deadline=time.monotonic() + seconds)
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
            async with asyncio.timeout(seconds):
                hook = flt.inlet if ctx.phase == "inlet" else flt.outlet
                # A shallow copy keeps a failing filter's top-level edits out of the fallback body;
                # filters never mutate nested values (they rebuild what they change).
                result = await hook(dict(body), ctx)
            if not isinstance(result, dict):
                raise TypeError(f"filter returned {type(result).__name__}, not a body")
            answer = wire.render_json(result)
        except TimeoutError:
            outcome = "deadline"
            span.set_status(trace.StatusCode.ERROR, "deadline exceeded")
            log.warning("hook_deadline_exceeded", deadline_s=seconds, returned="fallback body")
            metrics.HOOK_FAILURES.labels(ctx.filter_id, ctx.phase, "deadline").inc()
            answer = _render_fallback(flt, body, ctx)
        except Exception as error:
            outcome = "failed"
            span.record_exception(error)
            span.set_status(trace.StatusCode.ERROR, type(error).__name__)
            log.exception("hook_failed", error=repr(error), returned="fallback body")
            metrics.HOOK_FAILURES.labels(ctx.filter_id, ctx.phase, "error").inc()
            answer = _render_fallback(flt, body, ctx)
    metrics.HOOK_REQUESTS.labels(ctx.filter_id, ctx.phase, outcome).inc()
    metrics.HOOK_LATENCY.labels(ctx.filter_id, ctx.phase).observe(time.perf_counter() - started)
    return answer


def _render_fallback(flt: base.Filter, body: dict[str, Any], ctx: base.HookContext) -> bytes:
    # The body came from our own parser (no NaN, integers Python reads), so only its depth can fail.
    try:
        return wire.render_json(_fallback(flt, body, ctx))
    except RecursionError as error:
        raise wire.too_deep() from error
