"""One generation, the same way for every provider: retries, a trace span, metrics and logs.

A provider supplies one ``attempt`` (a single HTTP call turned into an ``Answer``, errors already
translated to ``LLMError``); ``generate`` retries it per the policy, times every attempt into
``echo_llm_latency_seconds``, counts billed tokens into ``echo_llm_tokens_total``, the outcome into
``echo_llm_calls_total`` and each retry into ``echo_llm_retries_total``, then parses JSON when the
request asked for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
from opentelemetry import trace

from echo.adapters.llm import errors, responses, retries
from echo.ports.llm import LLMRequest, LLMResult, Usage
from echo.support import metrics, tracing

__all__ = ["Answer", "generate"]

log = structlog.get_logger("echo.llm")


@dataclass(frozen=True)
class Answer:
    """What one attempt got back: answer text (reasoning removed), usage and finish reason."""

    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"


def _outcome(error: errors.LLMError) -> str:
    if isinstance(error, errors.EmptyAnswer):
        return "empty"
    return "invalid_json" if isinstance(error, errors.InvalidJSON) else "error"


async def generate(
    provider: str,
    request: LLMRequest,
    attempt: Callable[[], Awaitable[Answer]],
    policy: retries.RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> LLMResult:
    """Runs ``attempt`` with retries and accounting; the result or the last ``LLMError``."""
    labels = {"provider": provider, "model": request.model, "purpose": request.purpose}

    async def timed() -> Answer:
        start = time.perf_counter()
        try:
            return await attempt()
        finally:
            metrics.LLM_LATENCY.labels(**labels).observe(time.perf_counter() - start)

    def on_retry(error: errors.LLMError, attempt_number: int, delay_s: float) -> None:
        reason = str(error.status) if error.status is not None else "network"
        metrics.LLM_RETRIES.labels(provider, request.purpose, reason).inc()
        log.warning(
            "llm_retry",
            **labels,
            attempt=attempt_number,
            delay_s=round(delay_s, 3),
            status=error.status,
            error=error.message,
        )

    attributes = {"llm.provider": provider, "llm.model": request.model, "llm.purpose": request.purpose}
    with tracing.tracer().start_as_current_span("llm.generate", attributes=attributes) as span:
        try:
            answer = await retries.call_with_retries(timed, policy, on_retry=on_retry, sleep=sleep)
        except errors.LLMError as error:
            _failed(labels, error, span)
            raise
        metrics.LLM_TOKENS.labels(**labels, direction="prompt").inc(answer.usage.prompt_tokens)
        metrics.LLM_TOKENS.labels(**labels, direction="completion").inc(answer.usage.completion_tokens)
        span.set_attribute("llm.prompt_tokens", answer.usage.prompt_tokens)
        span.set_attribute("llm.completion_tokens", answer.usage.completion_tokens)
        try:
            parsed = responses.extract_json(answer.text) if request.json_schema is not None else None
        except errors.InvalidJSON as error:
            _failed(labels, error, span)
            raise
    metrics.LLM_CALLS.labels(**labels, outcome="ok").inc()
    return LLMResult(
        text=answer.text,
        provider=provider,
        model=request.model,
        usage=answer.usage,
        finish_reason=answer.finish_reason,
        parsed=parsed,
    )


def _failed(labels: dict[str, str], error: errors.LLMError, span: trace.Span) -> None:
    metrics.LLM_CALLS.labels(**labels, outcome=_outcome(error)).inc()
    span.record_exception(error)
    span.set_status(trace.Status(trace.StatusCode.ERROR, error.message[:200]))
    log.warning(
        "llm_failed",
        **labels,
        outcome=_outcome(error),
        status=error.status,
        retryable=error.retryable,
        error=error.message,
    )
