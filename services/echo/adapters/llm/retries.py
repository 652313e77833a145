"""When and how long to retry a language-model call (tenacity).

Rule: only an error with the root's ``retryable`` set is retried (``echo.errors.is_retryable``: the
adapters raise ``LLMError``, retryable on 408, 429, 5xx, timeouts, connection failures); a 4xx answer
fails at once. The wait before a retry is the error's ``retry_after_s`` (the provider's
``Retry-After``) when it has one, else exponential backoff with jitter (half fixed, half random,
so a burst of callers spreads out yet always backs off). Retries stop after ``max_retries`` or when
the next wait would take the sum of waits past ``max_total_wait_s``; the last error is then raised
as is, its ``retry_after_s`` intact, so the caller (a job handler) can schedule the next try itself.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import tenacity

from echo import errors
from echo.adapters.llm.errors import LLMError

__all__ = ["RetryPolicy", "backoff_delay", "call_with_retries", "is_retryable", "parse_retry_after"]

_T = TypeVar("_T")
OnRetry = Callable[[LLMError, int, float], None]
"""Called before each wait with ``(error, attempt number that failed, seconds about to wait)``."""


@dataclass(frozen=True)
class RetryPolicy:
    """Retry limits of one call.

    ``max_retries`` (count, after the first attempt): 4 rides out a typical 429/503 burst of a few
    seconds. ``max_total_wait_s`` (s, sum of waits, not counting the calls): 60 keeps a background
    job from holding its lease for long; beyond that the queue's own backoff takes over.
    ``base_delay_s`` / ``max_delay_s`` (s): first backoff and its ceiling when no Retry-After is given.
    """

    max_retries: int = 4
    max_total_wait_s: float = 60.0
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries: expected 0 or more")
        if self.max_total_wait_s < 0 or self.base_delay_s < 0 or self.max_delay_s < self.base_delay_s:
            raise ValueError("delays: expected 0 <= base_delay_s <= max_delay_s and max_total_wait_s >= 0")


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed call is tried again: the error's ``retryable`` (see ``echo.errors``)."""
    return errors.is_retryable(exc)


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based) when the provider gave no Retry-After."""
    ceiling = min(policy.max_delay_s, policy.base_delay_s * 2 ** max(attempt - 1, 0))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header in seconds: delta-seconds or an HTTP date; None if absent or garbled."""
    if value is None or not value.strip():
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


async def call_with_retries(
    call: Callable[[], Awaitable[_T]],
    policy: RetryPolicy,
    *,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> _T:
    """``await call()``, retried per ``policy``; raises the last error when retries are spent."""

    def wait(state: tenacity.RetryCallState) -> float:
        asked = errors.retry_after(state.outcome.exception() if state.outcome else None)
        return asked if asked is not None else backoff_delay(policy, state.attempt_number, rng)

    def stop(state: tenacity.RetryCallState) -> bool:
        spent = state.attempt_number > policy.max_retries
        return spent or state.idle_for + state.upcoming_sleep > policy.max_total_wait_s

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        if on_retry is not None and isinstance(error, LLMError):
            on_retry(error, state.attempt_number, state.upcoming_sleep)

    retrying = tenacity.AsyncRetrying(
        stop=stop,
        wait=wait,
        retry=tenacity.retry_if_exception(is_retryable),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    return await retrying(call)
