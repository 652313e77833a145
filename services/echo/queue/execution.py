"""One attempt of a job: its payload validated into its kind's model and its handler run, in a trace
span under its kind's timeout; what it raised turned into a transition, and the outcome counted and
logged. A payload that does not validate is a permanent error (dead-letter at once, the handler not
called). Cancellation (a stop, a lost lease) passes through untouched; the timeout's own
cancellation becomes a failed attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import structlog
from opentelemetry import propagate, trace

from echo.domain import jobs as domain
from echo.queue import errors, registry
from echo.support import metrics

__all__ = ["attempt", "job_span", "record"]


@contextmanager
def job_span(job: domain.Job) -> Iterator[trace.Span]:
    """A consumer span for one attempt, parented on the job's W3C traceparent when it has one."""
    parent = propagate.extract({"traceparent": job.traceparent}) if job.traceparent else None
    with trace.get_tracer("echo.jobs").start_as_current_span(
        f"job {job.kind}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={"echo.job.id": job.id, "echo.job.kind": job.kind, "echo.job.attempt": job.attempts},
    ) as span:
        yield span


async def attempt(job: domain.Job, spec: registry.HandlerSpec, draw: float) -> domain.Transition:
    """Run the handler once (`spec.run`: the payload decoded first); the transition its outcome
    calls for under the kind's policy.

    Past `spec.policy.timeout_seconds` the handler is cancelled and the attempt fails with
    "timed out after N s" (retried with backoff, dead after the last attempt). A TimeoutError the
    handler raises itself is an ordinary failure.
    """
    deadline = asyncio.timeout(spec.policy.timeout_seconds)
    try:
        with job_span(job):
            async with deadline:
                await spec.run(job)
        outcome: domain.Outcome = domain.Succeeded()
    except errors.JobError as error:  # the handler said how: RetryLater (after its delay), PermanentJobError
        outcome = domain.Failed(
            domain.describe_error(error), permanent=not error.retryable, retry_after=error.retry_after_s
        )
    except Exception as error:  # anything else is transient: retried with backoff
        if isinstance(error, TimeoutError) and deadline.expired():
            metrics.JOB_TIMEOUTS.labels(job.kind).inc()
            outcome = domain.timed_out(spec.policy)
        else:
            outcome = domain.Failed(domain.describe_error(error))
    return domain.after_attempt(job.attempts, spec.policy, outcome, draw)


def record(
    job: domain.Job,
    transition: domain.Transition,
    stored: bool,
    seconds: float,
    log: structlog.typing.FilteringBoundLogger,
) -> None:
    """Count and log an attempt's outcome (done|retry|dead, or lost when it could not be stored)."""
    if not stored:
        label = "lost"
        log.warning("job_outcome_lost", detail="lease taken over or store unreachable")
    elif transition.state is domain.JobState.DONE:
        label = "done"
        log.info("job_done", seconds=round(seconds, 3))
    elif transition.state is domain.JobState.DEAD:
        label = "dead"
        metrics.JOB_DEAD_LETTERS.labels(job.kind).inc()
        log.error("job_dead", error=transition.last_error)
    else:
        label = "retry"
        log.warning("job_retry", error=transition.last_error, delay=round(transition.delay_seconds, 3))
    metrics.JOB_DURATION.labels(job.kind, label).observe(seconds)
