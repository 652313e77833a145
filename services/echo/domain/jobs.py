"""Jobs, the pure part: states and their transitions, the retry policy, what follows an attempt.

No I/O and nothing beyond the standard library: the queue (`queue.py`) stores what these functions
decide, and randomness comes in as an argument (`draw`, uniform in [0, 1)) so that tests pin it.

    pending ──claim──► running ──success──────────────► done
       ▲                  │ ──permanent error───────────► dead
       │                  │ ──attempts exhausted────────► dead
       └──────────────────┘ retry after a backoff, lease expired, lease released (attempt refunded)
    dead ──requeue by hand──► pending
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from echo.errors import EchoError

__all__ = [
    "TRANSITIONS",
    "Failed",
    "InvalidTransition",
    "Job",
    "JobState",
    "KindPolicy",
    "Outcome",
    "RetryPolicy",
    "Succeeded",
    "Transition",
    "after_attempt",
    "check_transition",
    "describe_error",
    "on_claim",
    "on_release",
    "timed_out",
    "validate_kind",
]

_KIND = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
ERROR_LIMIT = 4000  # characters of an error kept in `last_error`


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"


TRANSITIONS: Mapping[JobState, frozenset[JobState]] = MappingProxyType(
    {
        JobState.PENDING: frozenset({JobState.RUNNING}),
        JobState.RUNNING: frozenset({JobState.PENDING, JobState.DONE, JobState.DEAD}),
        JobState.DONE: frozenset(),
        JobState.DEAD: frozenset({JobState.PENDING}),
    }
)


class InvalidTransition(EchoError):
    """A state change the job lifecycle does not allow."""


def check_transition(current: JobState, new: JobState) -> None:
    if new not in TRANSITIONS[current]:
        raise InvalidTransition(f"a {current} job cannot become {new}")


def validate_kind(kind: str) -> str:
    """A job kind: lowercase letters, digits and '_', starting with a letter (it is a metric label)."""
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise ValueError(f"{kind!r} is not a job kind (lowercase letters, digits, '_', at most 63)")
    return kind


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: base, base·factor, base·factor², … capped at max_seconds.

    `jitter` is the fraction of each delay removed at random, so a burst of failures (a provider
    outage) does not come back as a burst.
    """

    base_seconds: float = 5.0
    factor: float = 2.0
    max_seconds: float = 600.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if not (self.base_seconds >= 0 and self.factor >= 1 and self.max_seconds >= self.base_seconds):
            raise ValueError("need base_seconds >= 0, factor >= 1 and max_seconds >= base_seconds")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter is a fraction in [0, 1]")

    def delay(self, failed_attempts: int, draw: float) -> float:
        """Seconds to wait after the `failed_attempts`-th failure (>= 1); `draw` is uniform in [0, 1)."""
        if failed_attempts < 1:
            raise ValueError("failed_attempts starts at 1")
        try:
            raw = min(self.max_seconds, self.base_seconds * self.factor ** (failed_attempts - 1))
        except OverflowError:
            raw = self.max_seconds
        return raw * (1.0 - self.jitter * min(max(draw, 0.0), 1.0))


@dataclass(frozen=True)
class KindPolicy:
    """How one kind of job is run: attempts before dead-letter, jobs at once per worker, backoff,
    and how long one attempt may run before it is cancelled and counted as failed.

    `timeout_seconds` defaults to 300 s: above what one LLM call with its own retries takes, far
    below "forever" (a hung handler renews its lease as long as its worker lives).
    `concurrency_share` lets a kind take more than `concurrency` jobs at once on a worker started
    with a larger total: up to that share of the worker's concurrency (0 = `concurrency` is fixed).
    """

    max_attempts: int = 5
    concurrency: int = 4
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 300.0
    concurrency_share: float = 0.0

    def limit(self, worker_concurrency: int) -> int:
        """Jobs of this kind at once on a worker that runs `worker_concurrency` jobs in all."""
        return max(self.concurrency, int(worker_concurrency * self.concurrency_share))

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.concurrency < 1:
            raise ValueError("max_attempts and concurrency are at least 1")
        if not 0.0 <= self.concurrency_share <= 1.0:
            raise ValueError("concurrency_share is between 0 and 1")
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")


@dataclass(frozen=True)
class Job:
    """A claimed job as its handler sees it. `attempts` counts this attempt."""

    id: int
    kind: str
    payload: Mapping[str, Any]
    attempts: int
    idempotency_key: str | None = None
    traceparent: str | None = None
    last_error: str | None = None  # what the previous attempt ended with, if anything
    created_at: datetime | None = None


@dataclass(frozen=True)
class Succeeded:
    """The handler returned."""


@dataclass(frozen=True)
class Failed:
    """The handler raised. `retry_after`: the delay it asked for; `permanent`: never retry."""

    error: str
    permanent: bool = False
    retry_after: float | None = None


Outcome = Succeeded | Failed


@dataclass(frozen=True)
class Transition:
    """What to store after an attempt: the new state, when to run again, the error to keep."""

    state: JobState
    delay_seconds: float = 0.0
    last_error: str | None = None
    refund_attempt: bool = False


def after_attempt(attempts: int, policy: KindPolicy, outcome: Outcome, draw: float) -> Transition:
    """The transition of a running job whose `attempts`-th attempt ended with `outcome`."""
    if isinstance(outcome, Succeeded):
        return Transition(JobState.DONE)
    if outcome.permanent or attempts >= policy.max_attempts:
        return Transition(JobState.DEAD, last_error=outcome.error)
    if outcome.retry_after is not None:
        delay = max(0.0, outcome.retry_after)
    else:
        delay = policy.retry.delay(attempts, draw)
    return Transition(JobState.PENDING, delay_seconds=delay, last_error=outcome.error)


def timed_out(policy: KindPolicy) -> Failed:
    """The outcome of an attempt cancelled at the kind's timeout: transient, retried with backoff."""
    return Failed(f"timed out after {policy.timeout_seconds:g} s")


def on_claim(attempts: int, policy: KindPolicy, previous_error: str | None) -> Transition | None:
    """None to run a just-claimed job; dead-letter when crashed attempts already used up its budget."""
    if attempts <= policy.max_attempts:
        return None
    reason = f"{policy.max_attempts} attempts used up (leases expired: the workers died or hung)"
    return Transition(JobState.DEAD, last_error=f"{previous_error}; {reason}" if previous_error else reason)


def on_release() -> Transition:
    """A worker shutting down hands a running job back: pending now, the attempt not counted."""
    return Transition(JobState.PENDING, refund_attempt=True)


def describe_error(error: BaseException, limit: int = ERROR_LIMIT) -> str:
    """`Type: message`, cut to `limit` characters, as kept in `last_error`."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
