"""CPU-bound work off the event loop, and the loop's turn at the GIL while that work runs.

A worker thread doing pure-Python work holds the GIL: the event loop gets it back when the interpreter
switches threads, every `sys.getswitchinterval()` (5 ms by default), and with several busy threads
only after any of them. A `/healthz` behind a large body's parsing and answering waited 6 to 10 ms
(p50) and 50 to 75 ms (p99) so, nearly all of it for the GIL. While work runs through `to_thread` or
`run` (or inside `busy()`), the switch interval is `SWITCH_SECONDS`, so the loop waits about that long
for each turn; the interval it had is restored when the last such work ends.

Standard library only: every layer may use it (the filters, the jobs, the LLM adapters, the hooks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

__all__ = ["SWITCH_SECONDS", "busy", "run", "to_thread"]

SWITCH_SECONDS = 0.001

_P = ParamSpec("_P")
_T = TypeVar("_T")
_lock = threading.Lock()
_active = 0
_saved: float | None = None


@contextlib.contextmanager
def busy() -> Iterator[None]:
    """While inside, the interpreter switches threads every `SWITCH_SECONDS` at most."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = sys.getswitchinterval()
            if _saved > SWITCH_SECONDS:
                sys.setswitchinterval(SWITCH_SECONDS)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                sys.setswitchinterval(_saved)
                _saved = None


def _busy_call(call: Callable[[], _T]) -> _T:
    with busy():
        return call()


async def to_thread(func: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`asyncio.to_thread(func, *args, **kwargs)`, the work inside `busy()`."""
    return await asyncio.to_thread(_busy_call, functools.partial(func, *args, **kwargs))


async def run(executor: concurrent.futures.Executor, func: Callable[[], _T]) -> _T:
    """`func()` on `executor`, inside `busy()`, with the caller's context (log fields) as
    `asyncio.to_thread` passes it."""
    loop = asyncio.get_running_loop()
    call = functools.partial(_busy_call, func)
    return await loop.run_in_executor(executor, contextvars.copy_context().run, call)
