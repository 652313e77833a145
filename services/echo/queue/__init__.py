"""The job queue: every slow step of a chat turn (summaries, distillation, map-reduce, merges).

Rules of this package:
- `domain` is pure (standard library only): states, transitions, retry policy; the rest stores and
  runs what it decides;
- a job is committed before `enqueue` returns (or with the caller's transaction), is identified by
  `(kind, idempotency_key)`, and is never lost: a crashed worker's lease expires and another takes it;
- each kind's payload is one declared model (`payloads.Payload`), decoded once before its handler
  runs; a payload that does not validate is dead-lettered at once, naming the field;
- handlers say how to retry by what they raise (`RetryLater`, `PermanentJobError`, anything else =
  transient); a job that fails `max_attempts` times is dead-lettered with its last error;
- delivery is at-least-once: a handler must be idempotent (keyed by what it writes, DESIGN §4).

Importing this package is cheap (no asyncpg): names are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo.domain.jobs import Job, JobState, KindPolicy, RetryPolicy
    from echo.queue.errors import JobError, PermanentJobError, RetryLater, UnknownJobKind
    from echo.queue.payloads import Payload
    from echo.queue.queue import JobInfo, JobQueue
    from echo.queue.registry import JobHandler, PayloadHandler, Registry
    from echo.queue.worker import Worker

__all__ = [
    "Job",
    "JobError",
    "JobHandler",
    "JobInfo",
    "JobQueue",
    "JobState",
    "KindPolicy",
    "Payload",
    "PayloadHandler",
    "PermanentJobError",
    "Registry",
    "RetryLater",
    "RetryPolicy",
    "UnknownJobKind",
    "Worker",
]

_HOMES = {
    "Job": "echo.domain.jobs",
    "JobState": "echo.domain.jobs",
    "KindPolicy": "echo.domain.jobs",
    "RetryPolicy": "echo.domain.jobs",
    "JobError": "errors",
    "PermanentJobError": "errors",
    "RetryLater": "errors",
    "UnknownJobKind": "errors",
    "JobInfo": "queue",
    "JobQueue": "queue",
    "JobHandler": "registry",
    "Registry": "registry",
    "Worker": "worker",
    "Payload": "payloads",
    "PayloadHandler": "registry",
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'echo.queue' has no attribute {name!r}")
    home = module if "." in module else f"echo.queue.{module}"
    return getattr(importlib.import_module(home), name)
