"""Large parsed bodies, freed a step at a time on a thread of their own.

Freeing a parsed body is a C-level cascade that holds the GIL from start to end (0.1 to 0.3 s for a
million messages) on whichever thread drops the last reference: at the end of a request, the event
loop's. `when_unused(value)` keeps a reference to a large value; a daemon thread looks every
`POLL_SECONDS` whether it holds the last one, and then takes the value apart a slice of `STEP` members
at a time, so each step frees a bounded number of objects and the loop gets the GIL between steps. A
member larger than a step (`stepwise_json`'s measure) is set aside and taken apart the same way, once
it too is referenced by nothing else.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from echo.entrypoints.http import stepwise_json
from echo.support import offload

__all__ = ["POLL_SECONDS", "STEP", "pending", "when_unused"]

POLL_SECONDS = 0.05
STEP = 2048  # members freed per step (a fraction of a millisecond of small messages)

_lock = threading.Lock()
_held: list[Any] = []
_wake = threading.Event()
_thread: threading.Thread | None = None


def when_unused(value: Any) -> None:
    """Free `value` on the release thread, in steps, once nothing else references it."""
    global _thread
    with _lock:
        _held.append(value)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="echo-release", daemon=True)
            _thread.start()
    _wake.set()


def pending() -> int:
    """Values held, still in use elsewhere or not yet taken apart."""
    with _lock:
        return len(_held)


def _run() -> None:
    while True:
        _wake.wait()
        _wake.clear()
        while True:
            unused = _take_unused()
            with offload.busy():
                while unused:
                    _take_apart(unused.pop())  # no other name for it here: the callee holds it alone
            with _lock:
                if not _held:
                    break
            _wake.wait(POLL_SECONDS)
            _wake.clear()


def _take_unused() -> list[Any]:
    """The held values nothing else references any more, no longer held."""
    with _lock:
        # `_held[index]` alone: the list's reference and getrefcount's argument.
        unused = [index for index in range(len(_held)) if sys.getrefcount(_held[index]) <= 2]
        return [_held.pop(index) for index in reversed(unused)]


def _large(value: Any) -> bool:
    return isinstance(value, dict | list) and stepwise_json.cost(value, STEP) > STEP


def _take_apart(root: Any) -> None:
    stack: list[Any] = [root]
    del root
    while stack:
        item = stack.pop()
        # Ours alone (the local name and getrefcount's argument)? Else held again, for later.
        if sys.getrefcount(item) > 2:
            with _lock:
                _held.append(item)
            del item
            continue
        if type(item) is list:
            while item:
                piece = item[-STEP:]
                del item[-STEP:]
                stack.extend(member for member in piece if _large(member))
                del piece  # frees the small members: at most STEP of them
        elif type(item) is dict:
            while item:
                piece = [item.popitem()[1] for _ in range(min(STEP, len(item)))]
                stack.extend(member for member in piece if _large(member))
                del piece
        del item
