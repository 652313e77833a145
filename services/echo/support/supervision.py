"""Background tasks that cannot die unnoticed: every `asyncio` task of the runtime starts here.

A task that raises is logged with its name and context, counted in
`echo_background_task_failures_total{task}`, and then, by how it was started:

- `keep_running(name, factory)`: a loop that must go on (config watcher, lease renewal, queue
  metrics, retention sweep) is started again (tenacity, never giving up) after an exponential
  backoff (1 s, 2 s, 4 s … 60 s; back to 1 s once a run lasted longer than the cap; at least an
  error's `retry_after_s`, never past the cap). Whatever it raised, `retryable` or not: a loop that
  stopped for good would leave the service quietly degraded, and a permanent error (a config file
  that does not parse) is fixed outside the process, then picked up by the next run.
  `readiness()` shows its failures, and the service stays ready: restarting is the remedy;
- `run(name, coroutine)`: a one-shot task (warm-up, the worker's claiming loop, a job) is not
  restarted. A `vital` one's failure is kept and `readiness()` reports it (not ok, naming the task
  and its error) until the process ends; a non-vital one (a job) is only logged and counted.

Cancellation is how an owner stops its tasks, never a failure. A task that returns is done.
The supervisor holds a reference to each task (asyncio keeps only weak ones), so none is collected
while it runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

import structlog
import tenacity

from echo import errors
from echo.support import metrics

__all__ = ["Backoff", "Supervised", "Supervisor", "TaskRecord"]

log = structlog.get_logger("echo.supervision")

TaskState = Literal["running", "restarting", "failed", "done", "stopped"]


@dataclass(frozen=True)
class Backoff:
    """Delay before restart number n (1, 2, …): first · factor^(n-1), at most `max_seconds`."""

    first_seconds: float = 1.0
    factor: float = 2.0
    max_seconds: float = 60.0

    def __post_init__(self) -> None:
        if not (0 <= self.first_seconds <= self.max_seconds and self.factor >= 1):
            raise ValueError("need 0 <= first_seconds <= max_seconds and factor >= 1")

    def delay(self, failures_in_a_row: int) -> float:
        exponent = min(max(failures_in_a_row - 1, 0), 64)
        return min(self.max_seconds, self.first_seconds * self.factor**exponent)


@dataclass
class TaskRecord:
    """What `readiness()` shows about one named task."""

    name: str
    restartable: bool
    vital: bool
    state: TaskState = "running"
    failures: int = 0
    last_error: str | None = None

    def as_check(self) -> dict[str, Any]:
        return {"state": self.state, "failures": self.failures, "error": self.last_error}


class Supervised:
    """One supervised task: cancel or await `task` (it never raises but CancelledError); `error`
    is what ended it when it failed (a restarted task keeps its last one)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.error: BaseException | None = None
        self.task: asyncio.Task[None]  # set by the supervisor right after construction

    def cancel(self) -> None:
        self.task.cancel()

    def done(self) -> bool:
        return self.task.done()


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class Supervisor:
    """Starts, watches and restarts the background tasks of one process."""

    def __init__(
        self, *, backoff: Backoff | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.backoff = backoff or Backoff()
        self._clock = clock
        self._records: dict[str, TaskRecord] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- starting ----------------------------------------------------------------------------

    def keep_running(self, name: str, factory: Callable[[], Awaitable[None]], **context: Any) -> Supervised:
        """Run `factory()` now and again after each failure (with backoff), until cancelled."""
        record = self._records[name] = TaskRecord(name, restartable=True, vital=False)
        handle = Supervised(name)
        return self._start(handle, record, self._keep_running(handle, record, factory, context))

    def run(
        self, name: str, coroutine: Coroutine[Any, Any, None], *, vital: bool = True, **context: Any
    ) -> Supervised:
        """Run `coroutine` once; a failure of a `vital` one makes `readiness()` not ok."""
        record = TaskRecord(name, restartable=False, vital=vital)
        if vital:
            self._records[name] = record
        handle = Supervised(name)
        self._start(handle, record, self._run_once(handle, record, coroutine, context))
        # Cancelled before it ran, the coroutine was never awaited: close it (a no-op once it ran).
        handle.task.add_done_callback(lambda _: coroutine.close())
        return handle

    def _start(self, handle: Supervised, record: TaskRecord, body: Coroutine[Any, Any, None]) -> Supervised:
        handle.task = asyncio.create_task(body, name=f"echo-{record.name}")
        self._tasks.add(handle.task)

        def ended(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            if task.cancelled():
                record.state = "stopped"  # by its owner: never a failure

        handle.task.add_done_callback(ended)
        return handle

    # -- watching ----------------------------------------------------------------------------

    async def _keep_running(
        self,
        handle: Supervised,
        record: TaskRecord,
        factory: Callable[[], Awaitable[None]],
        context: dict[str, Any],
    ) -> None:
        started = 0.0
        series_began = 1  # the attempt number that opened the current run of failures

        async def attempt() -> None:
            nonlocal started
            record.state = "running"
            started = self._clock()
            await factory()

        def wait(state: tenacity.RetryCallState) -> float:
            nonlocal series_began
            if self._clock() - started > self.backoff.max_seconds:
                series_began = state.attempt_number  # it ran well for a while: start the backoff over
            delay = self.backoff.delay(state.attempt_number - series_began + 1)
            asked = errors.retry_after(state.outcome.exception() if state.outcome else None)
            return delay if asked is None else min(max(delay, asked), self.backoff.max_seconds)

        def failed(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            assert isinstance(error, Exception)  # only those are retried (CancelledError is not one)
            handle.error = error
            self._failed(record, error, context, restart_in=state.upcoming_sleep)
            record.state = "restarting"

        restarting = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception_type(Exception),
            wait=wait,
            stop=tenacity.stop_never,
            before_sleep=failed,
        )
        await restarting(attempt)
        record.state = "done"

    async def _run_once(
        self,
        handle: Supervised,
        record: TaskRecord,
        coroutine: Coroutine[Any, Any, None],
        context: dict[str, Any],
    ) -> None:
        try:
            await coroutine
        except Exception as error:
            handle.error = error
            record.state = "failed"
            self._failed(record, error, context, restart_in=None)
        else:
            record.state = "done"

    def _failed(
        self, record: TaskRecord, error: Exception, context: dict[str, Any], *, restart_in: float | None
    ) -> None:
        record.failures += 1
        record.last_error = describe(error)
        metrics.BACKGROUND_TASK_FAILURES.labels(record.name).inc()
        outcome = {"restart_in": round(restart_in, 3)} if restart_in is not None else {"restarted": False}
        log.error(
            "background_task_failed",
            task=record.name,
            error=record.last_error,
            failures=record.failures,
            exc_info=error,
            **outcome,
            **context,
        )

    # -- reporting and stopping ----------------------------------------------------------------

    def failure(self, name: str) -> str | None:
        """The error of the named one-shot task when it failed, else None."""
        record = self._records.get(name)
        return record.last_error if record is not None and record.state == "failed" else None

    def readiness(self) -> dict[str, Any]:
        """`ok` unless a vital task failed; `tasks`: each named task's state, failures, last error."""
        failed = [r for r in self._records.values() if r.vital and r.state == "failed"]
        check: dict[str, Any] = {
            "ok": not failed,
            "tasks": {name: record.as_check() for name, record in sorted(self._records.items())},
        }
        if failed:
            check["error"] = "; ".join(f"{r.name} failed: {r.last_error}" for r in failed)
        return check

    async def aclose(self) -> None:
        """Cancel every task still running and wait for them."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
