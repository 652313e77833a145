"""The one way tests wait for something another task, thread or process does: `eventually`.

Every wait has a timeout and a pause between looks (STYLE 27), and says what it waited for when it
gives up. Where the test owns the work (jobs in the queue), it runs it instead of waiting:
`Worker.run_until_idle()`. `eventually_blocking` is the same for synchronous tests (a server in a
thread, a file watcher).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["eventually", "eventually_blocking"]

T = TypeVar("T")


async def eventually(
    predicate: Callable[[], Awaitable[T] | T],
    *,
    within: float = 10.0,
    interval: float = 0.02,
    what: str = "",
) -> T:
    """`predicate()`'s first truthy answer (awaited when it is a coroutine), asked every `interval`
    seconds; AssertionError after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        answer = predicate()
        if inspect.isawaitable(answer):
            answer = await answer
        if answer:
            return answer  # type: ignore[return-value]  # an awaited T
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what or getattr(predicate, '__name__', 'condition')} not reached in {within} s"
            )
        await asyncio.sleep(interval)


def eventually_blocking(
    predicate: Callable[[], T], *, within: float = 10.0, interval: float = 0.02, what: str = ""
) -> T:
    """`eventually` for a synchronous test: `predicate()`'s first truthy answer, blocking between looks."""
    deadline = time.monotonic() + within
    while not (answer := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what or getattr(predicate, '__name__', 'condition')} not reached in {within} s"
            )
        time.sleep(interval)
    return answer
