"""Run one filter hook under its deadline; on any failure answer with the original body (DESIGN §6).

The answer is serialised inside the same guard, so a filter result JSON cannot carry (NaN, a set)
falls back like any other failure. A filter that masks secrets (`base.FailsClosed`) answers a failed
outlet with `fail_closed(body)` instead of the body, so an unmasked secret never goes back.

Status events (DESIGN §9) survive every path: a filter that succeeds keeps the events it added to
`ctx.events`; one that fails or runs out of time loses them with its edits, and the runner puts in their
place one event that says why ("ECHO compression skipped: timed out after 800 ms", or, for a masking
outlet, what was withheld). Every event is logged and counted here (`echo_status_events_total`);
whether it also goes back to the caller is the protocol's choice (`X-Echo-Events`).

A large request (`wire.THREAD_BYTES` or more, as `wire.body_size` says) is answered off the event loop:
the answer is rendered on a worker thread in bounded steps (`stepwise_json.render`), and so is a failed
hook's fallback (withholding and comparing walk the whole body), so a 32 MB body never holds the loop.

`run_chain` runs several filters in one request (`POST /hooks/{phase}`), each exactly as `run_hook`
runs it, and renders the body once at the end instead of once per filter.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import structlog
from opentelemetry import trace
from opentelemetry.context import Context

from echo.capabilities import base
from echo.capabilities import events as events_module
from echo.entrypoints.http import stepwise_json, wire
from echo.support import metrics, offload, tracing

__all__ = ["MAX_EVENTS", "deadline_seconds", "run_chain", "run_hook"]

log = structlog.get_logger("echo.hooks")
_T = TypeVar("_T")

_DEFAULT_DEADLINE_MS = {"inlet": 800, "outlet": 5000}
MAX_EVENTS = 10  # status lines one hook call may raise; more is a filter bug, not news for the user


ANSWER_MARGIN_S = 0.02  # rendering and writing the answer, kept out of a request's deadline


def deadline_seconds(ctx: base.HookContext) -> float:
    """The filter's own deadline valve (`INLET_DEADLINE_MS` or `inlet_deadline_ms`, …)."""
    name = f"{ctx.phase}_deadline_ms"
    valves = ctx.valves
    value = getattr(valves, name, None) or getattr(valves, name.upper(), None)
    return (value or _DEFAULT_DEADLINE_MS[ctx.phase]) / 1000.0


def _fallback(
    flt: base.Filter, body: dict[str, Any], ctx: base.HookContext, failure: str
) -> tuple[dict[str, Any], events_module.StatusEvent]:
    """What a failed hook answers, and the status line that says why: the body it was given, or, for a
    masking outlet, a safe version. `failure` completes "the secret check …" and "skipped: …"."""
    if ctx.phase != "outlet" or not _fails_closed(type(flt)):
        return body, events_module.StatusEvent(f"{flt.name} skipped: {failure}", "warning")
    try:
        safe = cast(base.FailsClosed, flt).fail_closed(body, ctx)
    except Exception:
        log.exception("fail_closed_failed", returned="body unchanged")
        return body, events_module.StatusEvent(
            f"{flt.name}: the secret check {failure}; this answer was NOT checked for secrets", "error"
        )
    try:
        changed = safe != body
    except RecursionError:  # nested too deep to compare (and to answer: a 422 follows)
        changed = True
    withheld = "text that may hold a secret was withheld" if changed else "nothing needed withholding"
    return safe, events_module.StatusEvent(f"{flt.name}: the secret check {failure}; {withheld}", "warning")


async def run_hook(
    flt: base.Filter,
    body: dict[str, Any],
    ctx: base.HookContext,
    *,
    trace_parent: Context | None = None,
    received_at: float | None = None,
) -> bytes:
    """The JSON answer: the filter's new body, or `body` unchanged (see `_fallback`) when the filter
    fails, runs out of time or returns what JSON cannot carry.

    The deadline counts from `received_at` (the request's arrival, `time.monotonic()`) when given,
    so reading and parsing a big body or waiting for a busy loop spend it too, and it keeps
    `ANSWER_MARGIN_S` for writing the answer: the caller gets it within the deadline valve.

    The call's status events are left in `ctx.events`, the caller's list (see the module docstring).
    `trace_parent` continues a trace the caller started (W3C `traceparent` of the request).
    Raises a 422 (`wire.too_deep`) only when the body itself nests deeper than JSON can be written.
    """
    large = wire.body_size() >= wire.THREAD_BYTES

    async def rendered(result: dict[str, Any]) -> bytes:
        return await _render(result, large, known=body)

    async def rendered_fallback(fallback: dict[str, Any]) -> bytes:
        # The body came from our own parser (no NaN, integers Python reads), so only its depth can fail.
        try:
            return await _render(fallback, large, known=body)
        except RecursionError as error:
            raise wire.too_deep() from error

    return await _guarded(
        flt,
        body,
        ctx,
        large=large,
        finish=rendered,
        finish_fallback=rendered_fallback,
        trace_parent=trace_parent,
        received_at=received_at,
    )


async def run_chain(
    steps: Sequence[tuple[base.Filter, base.HookContext]],
    body: dict[str, Any],
    *,
    trace_parent: Context | None = None,
    received_at: float | None = None,
) -> tuple[bytes, list[events_module.StatusEvent]]:
    """Run `steps` in order, each filter on the body the one before answered, exactly as `run_hook`
    runs each (its own valves and deadline, its fallback body when it fails, its events): the JSON
    answer of the last, and every step's status events in order.

    The body is rendered once, at the end, not between filters: each filter's result is checked by
    `_carriable`, which walks only what the filter changed (what it shares with its input is known to
    be carriable), and only a result it doubts is rendered on the spot, so a filter that returns what
    JSON cannot carry still falls back to its input. The first filter's deadline counts from
    `received_at` (as `run_hook`'s); each later one has its whole deadline valve from its own start.
    Raises a 422 (`wire.too_deep`) only when the body itself nests deeper than JSON can be written.
    """
    large = wire.body_size() >= wire.THREAD_BYTES
    stages = [body]
    for index, (flt, ctx) in enumerate(steps):
        given = stages[-1]

        async def checked(result: dict[str, Any], given: dict[str, Any] = given) -> dict[str, Any]:
            await _check(result, given, large)
            return result

        async def as_is(fallback: dict[str, Any]) -> dict[str, Any]:
            return fallback

        structlog.contextvars.bind_contextvars(filter=ctx.filter_id)
        stages.append(
            await _guarded(
                flt,
                given,
                ctx,
                large=large,
                finish=checked,
                finish_fallback=as_is,
                trace_parent=trace_parent,
                # the later ones: their whole valve from their own start
                received_at=received_at if index == 0 else None,
            )
        )
    # Whatever the checks let through renders; only nesting at the encoder's limit can still fail. Then
    # the answer is an earlier stage that renders, the steps after it skipped as failed (a masking
    # outlet among them still withholds: `_fallback`); the body itself too deep is a 422.
    for last in range(len(stages) - 1, -1, -1):
        candidate = stages[last]
        events = [event for _, ctx in steps[:last] for event in ctx.events]
        for flt, ctx in steps[last:]:
            if large:
                candidate, event = await offload.to_thread(_fallback, flt, candidate, ctx, "failed")
            else:
                candidate, event = _fallback(flt, candidate, ctx, "failed")
            events.append(event)
        try:
            return await _render(candidate, large, known=body), events
        except (ValueError, TypeError, RecursionError):
            log.warning("chain_stage_unwritable", stage=last, returned="an earlier stage")
    raise wire.too_deep()


# A runtime-checkable protocol's isinstance reads the class's members on every call (about 15 µs on
# Python 3.11); a filter's class decides it, so it is asked once per class.
@functools.cache
def _fails_closed(kind: type) -> bool:
    return issubclass(kind, base.FailsClosed)


@functools.cache
def _extends_deadline(kind: type) -> bool:
    return issubclass(kind, base.ExtendsDeadline)


async def _guarded(
    flt: base.Filter,
    body: dict[str, Any],
    ctx: base.HookContext,
    *,
    large: bool,
    finish: Callable[[dict[str, Any]], Awaitable[_T]],
    finish_fallback: Callable[[dict[str, Any]], Awaitable[_T]],
    trace_parent: Context | None,
    received_at: float | None,
) -> _T:
    """One filter under its deadline, fail-open: `finish(result)` inside the guard (so its failure is
    the filter's), or `finish_fallback(fallback body)` after a failure; events, metrics and a span."""
    started = time.perf_counter()
    seconds = deadline_seconds(ctx)
    if _extends_deadline(type(flt)):
        try:
            seconds += max(0.0, float(cast(base.ExtendsDeadline, flt).deadline_extension(body, ctx)))
        except Exception:
            log.exception("deadline_extension_failed", filter=ctx.filter_id)
    if received_at is not None:
        seconds = max(0.0, seconds - (time.monotonic() - received_at) - ANSWER_MARGIN_S)
    # The same `events` list: what the filter appends is what the caller reads back.
    ctx = dataclasses.replace(ctx, deadline=time.monotonic() + seconds, events=ctx.events)
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
            answer = await finish(result)
        except TimeoutError:
            outcome = "deadline"
            span.set_status(trace.StatusCode.ERROR, "deadline exceeded")
            log.warning("hook_deadline_exceeded", deadline_s=seconds, returned="fallback body")
            metrics.HOOK_FAILURES.labels(ctx.filter_id, ctx.phase, "deadline").inc()
            fallback = await _fallen_back(
                flt, body, ctx, f"timed out after {round(seconds * 1000)} ms", large
            )
            answer = await finish_fallback(fallback)
        except Exception as error:
            outcome = "failed"
            span.record_exception(error)
            span.set_status(trace.StatusCode.ERROR, type(error).__name__)
            log.exception("hook_failed", error=repr(error), returned="fallback body")
            metrics.HOOK_FAILURES.labels(ctx.filter_id, ctx.phase, "error").inc()
            fallback = await _fallen_back(flt, body, ctx, "failed", large)
            answer = await finish_fallback(fallback)
    _publish(ctx)
    metrics.HOOK_REQUESTS.labels(ctx.filter_id, ctx.phase, outcome).inc()
    metrics.HOOK_LATENCY.labels(ctx.filter_id, ctx.phase).observe(time.perf_counter() - started)
    return answer


async def _check(result: dict[str, Any], given: dict[str, Any], large: bool) -> None:
    """Raise when JSON cannot carry `result`: `_carriable` first (walking only what differs from
    `given`); a result it doubts is rendered, and that render decides."""
    try:
        if large:
            sure = await offload.to_thread(_carriable, result, given)
        else:
            sure = _carriable(result, given)
    except RecursionError:
        sure = False
    if not sure:
        await _render(result, large)  # raises ValueError, TypeError or RecursionError


# What `render_json` surely carries beside a value it carries (see `wire.carried_beside`): the checks
# of `run_chain` between filters. The render of an answer checks again on its own (`wire.render_body`).
_carriable = wire.carried_beside


async def _render(value: dict[str, Any], large: bool, known: Any = None) -> bytes:
    """`wire.render_json(value)`; for the answer to a large request, on a worker thread in bounded
    steps (`stepwise_json`: the C encoder would hold the GIL, and so the loop, for the whole body).

    `known`: a value JSON surely carries (the parsed request body), see `wire.render_body`."""
    if large:
        return await offload.to_thread(stepwise_json.render, value)
    return wire.render_body(value, known)


async def _fallen_back(
    flt: base.Filter, body: dict[str, Any], ctx: base.HookContext, failure: str, large: bool
) -> dict[str, Any]:
    """The fallback body (`_fallback`); its status line replaces the filter's events."""
    if large:  # withholding and comparing walk the whole body: not on the loop
        fallback, event = await offload.to_thread(_fallback, flt, body, ctx, failure)
    else:
        fallback, event = _fallback(flt, body, ctx, failure)
    if ctx.events:  # they described an answer that is not given
        discarded = [getattr(e, "description", repr(e)) for e in ctx.events[:MAX_EVENTS]]
        log.info("status_events_discarded", descriptions=discarded, count=len(ctx.events))
    ctx.events[:] = [event]
    return fallback


def _publish(ctx: base.HookContext) -> None:
    """Keep the well-formed events (at most MAX_EVENTS) in `ctx.events`, log and count each."""
    kept = [event for event in ctx.events if _well_formed(event)][:MAX_EVENTS]
    if len(kept) != len(ctx.events):
        log.warning("status_events_dropped", raised=len(ctx.events), kept=len(kept), max_events=MAX_EVENTS)
    ctx.events[:] = kept
    for event in kept:
        metrics.STATUS_EVENTS.labels(ctx.filter_id, ctx.phase, event.level).inc()
        getattr(log, event.level)("status_event", description=event.description, done=event.done)


def _well_formed(event: object) -> bool:
    return (
        isinstance(event, events_module.StatusEvent)
        and isinstance(event.description, str)
        and bool(event.description)
        and event.level in events_module.LEVELS
        and isinstance(event.done, bool)
    )
