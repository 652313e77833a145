"""The retry policy of LLM calls: what is retried, how long it waits, when it gives up (no real sleeping)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from echo.adapters.llm.errors import EmptyAnswer, InvalidJSON, LLMError
from echo.adapters.llm.retries import (
    RetryPolicy,
    backoff_delay,
    call_with_retries,
    is_retryable,
    parse_retry_after,
)
from echo.errors import EchoError


class Script:
    """An async call that raises the scripted errors in turn, then returns ``"ok"``."""

    def __init__(self, *outcomes: BaseException) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.outcomes:
            raise self.outcomes.pop(0)
        return "ok"


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def run(
    script: Script, policy: RetryPolicy, sleeps: Sleeps, **options: object
) -> Callable[[], Awaitable[str]]:
    return lambda: call_with_retries(script, policy, sleep=sleeps, rng=random.Random(7), **options)  # type: ignore[arg-type]


def overloaded(retry_after: float | None = None) -> LLMError:
    return LLMError("overloaded", 503, True, retry_after_s=retry_after)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (LLMError("x", 503, True), True),
        (LLMError("x", 400, False), False),
        (EmptyAnswer("x"), False),
        (InvalidJSON("x"), True),
        (ValueError("x"), False),
        (EchoError("x", retryable=True), True),  # the root's flag decides, whichever error carries it
        (EchoError("x"), False),
    ],
)
def test_only_retryable_llm_errors_are_retried(error: BaseException, expected: bool) -> None:
    assert is_retryable(error) is expected


async def test_retryable_errors_are_retried_until_success() -> None:
    script, sleeps = Script(overloaded(), LLMError("timeout", None, True), overloaded()), Sleeps()
    assert await run(script, RetryPolicy(), sleeps)() == "ok"
    assert script.calls == 4
    assert len(sleeps) == 3


async def test_retry_after_is_the_wait_when_the_provider_sends_one() -> None:
    script, sleeps = Script(overloaded(retry_after=2.5), overloaded(retry_after=0)), Sleeps()
    assert await run(script, RetryPolicy(), sleeps)() == "ok"
    assert sleeps == [2.5, 0.0]


async def test_a_client_error_is_raised_at_once() -> None:
    error = LLMError("bad request", 400, False)
    script, sleeps = Script(error), Sleeps()
    with pytest.raises(LLMError) as caught:
        await run(script, RetryPolicy(), sleeps)()
    assert caught.value is error
    assert (script.calls, sleeps) == (1, [])


async def test_other_exceptions_are_not_retried() -> None:
    script, sleeps = Script(KeyError("bug")), Sleeps()
    with pytest.raises(KeyError):
        await run(script, RetryPolicy(), sleeps)()
    assert script.calls == 1


async def test_retries_stop_after_max_retries_with_the_last_error() -> None:
    errors = [overloaded() for _ in range(10)]
    script, sleeps = Script(*errors), Sleeps()
    with pytest.raises(LLMError) as caught:
        await run(script, RetryPolicy(max_retries=2), sleeps)()
    assert script.calls == 3
    assert caught.value is errors[2]


async def test_zero_retries_means_one_attempt() -> None:
    script, sleeps = Script(overloaded()), Sleeps()
    with pytest.raises(LLMError):
        await run(script, RetryPolicy(max_retries=0), sleeps)()
    assert (script.calls, sleeps) == (1, [])


async def test_a_retry_after_beyond_the_wait_budget_ends_retries_and_is_kept_for_the_queue() -> None:
    script, sleeps = Script(overloaded(retry_after=120)), Sleeps()
    with pytest.raises(LLMError) as caught:
        await run(script, RetryPolicy(max_total_wait_s=60), sleeps)()
    assert (script.calls, sleeps) == (1, [])
    assert caught.value.retry_after_s == 120


async def test_the_wait_budget_counts_every_wait() -> None:
    script, sleeps = Script(*(overloaded(retry_after=4) for _ in range(10))), Sleeps()
    with pytest.raises(LLMError):
        await run(script, RetryPolicy(max_retries=10, max_total_wait_s=10), sleeps)()
    assert sleeps == [4, 4]  # a third wait would make 12 s > 10 s
    assert script.calls == 3


async def test_on_retry_sees_each_error_attempt_and_delay() -> None:
    seen: list[tuple[int | None, int, float]] = []
    script, sleeps = Script(overloaded(retry_after=1), LLMError("slow", 429, True, retry_after_s=3)), Sleeps()
    await run(script, RetryPolicy(), sleeps, on_retry=lambda e, n, d: seen.append((e.status, n, d)))()
    assert seen == [(503, 1, 1.0), (429, 2, 3.0)]


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=8.0)
    rng = random.Random(1)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (9, 8.0)]:
        delays = [backoff_delay(policy, attempt, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 100  # jittered, not fixed


async def test_backoff_is_used_without_retry_after() -> None:
    script, sleeps = Script(overloaded(), overloaded(), overloaded()), Sleeps()
    await run(script, RetryPolicy(base_delay_s=1, max_delay_s=3), sleeps)()
    assert 0.5 <= sleeps[0] <= 1
    assert 1 <= sleeps[1] <= 2
    assert 1.5 <= sleeps[2] <= 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3.0), ("0.25", 0.25), (" 7 ", 7.0), ("-4", 0.0), (None, None), ("", None), ("soon", None)],
)
def test_retry_after_in_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 5, 31, 14, 0, tzinfo=UTC)
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0


@pytest.mark.parametrize(
    "options",
    [{"max_retries": -1}, {"max_total_wait_s": -1}, {"base_delay_s": 2, "max_delay_s": 1}],
)
def test_invalid_policies_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"^(max_retries|delays):"):
        RetryPolicy(**options)  # type: ignore[arg-type]
