"""Errors a job handler raises to say how its job should be retried (the root's ``retryable``).

EchoError
└── JobError                retryable: the queue retries it with the kind's backoff
    ├── RetryLater          retryable after ``retry_after_s`` (the ``delay_seconds`` it was given; None:
    │                       the kind's backoff); counts as an attempt, so a job cannot ask forever
    └── PermanentJobError   not retryable (bad payload, missing input): straight to dead-letter
        └── UnknownJobKind  no handler is registered for this kind

Any other exception is treated as transient: retried with backoff until the kind's max attempts.
"""

from __future__ import annotations

from echo.errors import EchoError

__all__ = ["JobError", "PermanentJobError", "RetryLater", "UnknownJobKind"]


class JobError(EchoError):
    """Root of the errors about jobs. Retryable, like any exception a handler raises, unless it is
    a `PermanentJobError`."""

    retryable = True


class RetryLater(JobError):
    """Run this job again later (after `delay_seconds`, or the kind's backoff when None)."""

    def __init__(self, message: str = "retry later", *, delay_seconds: float | None = None) -> None:
        if delay_seconds is not None and delay_seconds < 0:
            raise ValueError("delay_seconds must not be negative")
        super().__init__(message, retryable=True, retry_after_s=delay_seconds)


class PermanentJobError(JobError):
    """Retrying cannot help: the job goes to dead-letter with this error."""

    retryable = False


class UnknownJobKind(PermanentJobError, LookupError):
    """No handler is registered for a job kind."""
