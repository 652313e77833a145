"""The job queue: every slow step of a chat turn (summaries, distillation, map-reduce, merges).

Rules of this package:
- `domain` is pure (standard library only): states, transitions, retry policy; the rest stores and
  runs what it decides;
- a job is committed before `enqueue` returns (or with the caller's transaction), is identified by
  `(kind, idempotency_key)`, and is never lost: a crashed worker's lease expires and another takes it;
- handlers say how to retry by what they raise (`RetryLater`, `PermanentJobError`, anything else =
  transient); a job that fails `max_attempts` times is dead-lettered with its last error;
- delivery is at-least-once: a handler must be idempotent (keyed by what it writes, DESIGN §4).

Importing this package is cheap (no asyncpg): names are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo.jobs.domain import Job, JobState, KindPolicy, RetryPolicy
    from echo.jobs.errors import JobError, PermanentJobError, RetryLater, UnknownJobKind
    from echo.jobs.queue import JobInfo, JobQueue
    from echo.jobs.registry import JobHandler, Registry
    from echo.jobs.runner import run_worker
    from echo.jobs.worker import Worker

__all__ = [
    "Job",
    "JobError",
    "JobHandler",
    "JobInfo",
    "JobQueue",
    "JobState",
    "KindPolicy",
    "PermanentJobError",
    "Registry",
    "RetryLater",
    "RetryPolicy",
    "UnknownJobKind",
    "Worker",
    "run_worker",
]

_HOMES = {
    "Job": "domain",
    "JobState": "domain",
    "KindPolicy": "domain",
    "RetryPolicy": "domain",
    "JobError": "errors",
    "PermanentJobError": "errors",
    "RetryLater": "errors",
    "UnknownJobKind": "errors",
    "JobInfo": "queue",
    "JobQueue": "queue",
    "JobHandler": "registry",
    "Registry": "registry",
    "run_worker": "runner",
    "Worker": "worker",
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'echo.jobs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"echo.jobs.{module}"), name)
