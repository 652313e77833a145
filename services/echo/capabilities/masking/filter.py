"""Outlet secret masking shared by `echo_context` and the pipe models' own outlet (seed 000).

Masking costs CPU in proportion to the text (about 1 µs a character for crafted text that is all match
starts, 32 s for a 32 MiB body), so it must neither hold the event loop nor outlive the hook's deadline:

- past `INLINE_CHARS` of assistant text it runs on a worker thread, in chunks of `CHUNK_CHARS` (no single
  regex call holds the interpreter long, so the loop and `/healthz` keep answering);
- it stops shortly before the hook's deadline and fails closed: a text it could not finish keeps its
  verified, masked beginning followed by `WITHHELD`, and a text it could not start is `WITHHELD` whole.
  Texts are verified shortest first, so the few long ones are the ones cut.
- when even that cannot be waited for (the hook errs or its deadline passes first), `withhold_suspect`
  withholds every assistant text where a secret might start (`masking.may_hold_secret`).
Never is unverified text passed on (a short text no secret can start in is not withheld: ids, types).

A chat sends every earlier answer again on each turn, so a text verified clean (nothing masked, up to
`CHUNK_CHARS`) is remembered per process (`_CleanTexts`, bounded by characters; texts that held a
secret are never kept) and not scanned again: a turn scans what is new in it. When nothing was masked
or withheld, the body is answered without a second walk.
`unverified_text` counts, beside the secret kinds, texts withheld; a masking that ran out of time says
so in a status line (`events`). Every text the web UI shows of an assistant message is masked: its
content, output items (tool-call arguments and tool results), reasoning, tool calls and sources
(`bodies.map_assistant_text`); `mask_value` masks a JSON value (a tool call's arguments).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from echo.capabilities import events as events_module
from echo.domain import bodies, masking

__all__ = [
    "CHUNK_CHARS",
    "INLINE_CHARS",
    "WITHHELD",
    "OnMasked",
    "mask_and_report",
    "mask_outlet_body",
    "mask_text",
    "mask_value",
    "withhold_suspect",
]

log = structlog.get_logger("echo.filters")

OnMasked = Callable[[Mapping[str, int]], None]
StopCheck = Callable[[], bool]

WITHHELD = "[SUITE MASQUÉE PAR SÉCURITÉ : VÉRIFICATION DES SECRETS NON TERMINÉE À TEMPS]"
UNVERIFIED = "unverified_text"
CHUNK_CHARS = 32 * 1024  # about 30 ms of crafted text, under 1 ms of prose, per step
INLINE_CHARS = 16 * 1024  # below this, masking on the loop costs less than a thread hop
_HANDBACK_S = 0.25  # masking stops this long (at most a fifth of the time left) before the deadline
_HANDBACK_SHARE = 0.2
_SPARED_CHARS = 4096  # an unverified text this short is kept when no secret can start in it


def _never() -> bool:
    return False


class _CleanTexts:
    """Texts `masking.mask_secrets` verified to hold no secret, least recently seen dropped first past
    `max_chars` characters in all; shared by the loop and the masking threads (a lock)."""

    def __init__(self, max_chars: int) -> None:
        self._texts: OrderedDict[str, None] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()

    def known(self, texts: list[str]) -> set[str]:
        """Those of `texts` verified clean before (each now the most recently seen)."""
        found: set[str] = set()
        with self._lock:
            for text in texts:
                if text in self._texts:
                    self._texts.move_to_end(text)
                    found.add(text)
        return found

    def add(self, text: str) -> None:
        if len(text) > CHUNK_CHARS:
            return
        with self._lock:
            if text in self._texts:
                return
            self._texts[text] = None
            self._chars += len(text)
            while self._chars > self._max_chars:
                dropped, _ = self._texts.popitem(last=False)
                self._chars -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()
            self._chars = 0


CLEAN_TEXTS_CHARS = 8 * 1024 * 1024  # about 8 to 32 MB of texts remembered clean
_CLEAN = _CleanTexts(CLEAN_TEXTS_CHARS)


def _mask_text(text: str, should_stop: StopCheck) -> tuple[str, Counter[str], bool]:
    """The masked text, its counts, and whether it was verified to its end (else it ends in WITHHELD)."""
    if len(text) <= CHUNK_CHARS:
        result = masking.mask_secrets(text)
        return result.text, Counter(result.counts), True
    masker, pieces = masking.StreamMasker(), []
    for at in range(0, len(text), CHUNK_CHARS):
        if should_stop():
            pieces.append(WITHHELD)  # what the masker still held back is unverified too
            return "".join(pieces), Counter(masker.counts), False
        pieces.append(masker.feed(text[at : at + CHUNK_CHARS]))
    pieces.append(masker.flush())
    return "".join(pieces), Counter(masker.counts), True


class _OutletMasking:
    """One body's masking: run by one thread, read by another (the lock guards what it has verified)."""

    def __init__(self, body: Mapping[str, Any], should_stop: StopCheck) -> None:
        self.body = body
        texts = bodies.assistant_texts(body)
        clean = _CLEAN.known(list(texts))
        # Verified clean on an earlier call: as they are, without a scan.
        self._verified: dict[str, str] = {text: text for text in clean}
        self.texts = sorted(texts - clean, key=len)  # what is left to scan
        self.size = sum(map(len, self.texts))
        self._all = len(texts)
        self._changed = False  # whether any text was masked or cut
        self.cancelled = threading.Event()
        self._should_stop = should_stop
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def stopped(self) -> bool:
        return self.cancelled.is_set() or self._should_stop()

    def run(self) -> None:
        for text in self.texts:
            if self.stopped():
                return
            masked, counts, complete = _mask_text(text, self.stopped)
            clean = complete and not counts
            with self._lock:
                self._verified[text] = text if clean else masked
                self._changed = self._changed or not clean
                self._counts.update(counts)
                if not complete:
                    self._counts[UNVERIFIED] += 1
            if clean:
                _CLEAN.add(text)

    def result(self) -> tuple[dict[str, Any], Counter[str]]:
        """The body with what was verified so far; every other assistant text is WITHHELD, but a short
        one no secret can start in (an id, a type, a status)."""
        with self._lock:
            verified, counts = dict(self._verified), Counter(self._counts)
            unchanged = not self._changed and len(verified) == self._all
        if unchanged:  # every text verified, none masked: the body as it is (no second walk)
            return dict(self.body), counts
        withheld: set[str] = set()

        def final(text: str) -> str:
            found = verified.get(text)
            if found is not None:
                return found
            if len(text) <= _SPARED_CHARS and not masking.may_hold_secret(text):
                return text
            withheld.add(text)
            return WITHHELD

        body = bodies.map_assistant_text(self.body, final)
        if withheld:
            counts[UNVERIFIED] += len(withheld)
        return body, counts


def mask_outlet_body(
    body: Mapping[str, Any], should_stop: StopCheck = _never
) -> tuple[dict[str, Any], Counter[str]]:
    """Mask secrets in every text the web UI shows of an assistant message (`bodies.map_assistant_text`),
    here and now, until `should_stop()`; counts per kind name, and `unverified_text` for texts cut or
    withheld."""
    job = _OutletMasking(body, should_stop)
    job.run()
    return job.result()


@functools.cache
def _workers() -> concurrent.futures.ThreadPoolExecutor:
    # Its own threads: the default executor also runs embeddings, and a queued masking job would
    # spend the hook's time waiting. Each job ends by its deadline, so threads are not held long.
    return concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="echo-masking")


def _times(deadline: float | None) -> tuple[float | None, float | None]:
    """When masking stops, and when the loop stops waiting for it (both before `deadline`)."""
    if deadline is None:
        return None, None
    handback = min(_HANDBACK_S, _HANDBACK_SHARE * max(0.0, deadline - time.monotonic()))
    return deadline - handback, deadline - handback / 2


async def mask_and_report(
    body: Mapping[str, Any],
    on_masked: OnMasked,
    *,
    deadline: float | None = None,
    events: list[events_module.StatusEvent] | None = None,
    name: str = "ECHO",
) -> dict[str, Any]:
    """The masked body, ready before `deadline` (a `time.monotonic()` instant) when one is given; what
    was masked or withheld goes to `on_masked` (metrics and a log line). Text withheld because the
    check ran out of time is said in a status line appended to `events` (the hook's, named `name`)."""
    started = time.monotonic()
    stop_at, give_up_at = _times(deadline)
    job = _OutletMasking(body, _never if stop_at is None else lambda: time.monotonic() >= stop_at)
    if job.size <= INLINE_CHARS:
        job.run()
    else:
        future = asyncio.get_running_loop().run_in_executor(_workers(), job.run)
        wait = None if give_up_at is None else max(0.0, give_up_at - time.monotonic())
        try:
            await asyncio.wait_for(asyncio.shield(future), wait)
        except TimeoutError:
            log.warning("masking_not_handed_back", chars=job.size, returned="unverified texts withheld")
        finally:
            job.cancelled.set()  # on a timeout or a cancellation too: the thread stops at its next chunk
    masked, counts = job.result()
    if counts.get(UNVERIFIED):
        log.warning("masking_out_of_time", chars=job.size, withheld_texts=counts[UNVERIFIED])
        if events is not None:
            events.append(_out_of_time(name, counts[UNVERIFIED], time.monotonic() - started))
    if counts:
        on_masked(counts)
    return masked


def _out_of_time(name: str, withheld: int, elapsed_s: float) -> events_module.StatusEvent:
    texts = "1 text" if withheld == 1 else f"{withheld} texts"
    return events_module.StatusEvent(
        f"{name}: the secret check ran out of time after {round(elapsed_s * 1000)} ms;"
        f" {texts} that may hold a secret withheld",
        "warning",
    )


async def mask_text(text: str) -> masking.MaskResult:
    """`masking.mask_secrets` that keeps the loop free for a long text (no deadline: a pipe's answer)."""
    if len(text) <= INLINE_CHARS:
        return masking.mask_secrets(text)
    masked, counts, _ = await asyncio.get_running_loop().run_in_executor(_workers(), _mask_text, text, _never)
    return masking.MaskResult(masked, dict(counts))


def mask_value(value: Any) -> tuple[Any, Counter[str]]:
    """A JSON value (a tool call's arguments) with every string in it masked, and the counts; parts
    where nothing was masked are shared."""
    counts: Counter[str] = Counter()

    def rewrite(text: str) -> str:
        result = masking.mask_secrets(text)
        if not result.counts:
            return text
        counts.update(result.counts)
        return result.text

    return bodies.map_strings(value, rewrite), counts


def withhold_suspect(body: Mapping[str, Any], on_masked: OnMasked) -> dict[str, Any]:
    """The body with every assistant text where a secret might start replaced by WITHHELD: the answer
    of a masking outlet that failed or ran out of time."""
    withheld = 0

    def withhold(text: str) -> str:
        nonlocal withheld
        if not masking.may_hold_secret(text):
            return text
        withheld += 1
        return WITHHELD

    safe = bodies.map_assistant_text(body, withhold)
    if withheld:
        on_masked({UNVERIFIED: withheld})
    return safe
