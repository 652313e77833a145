"""Referenced chats on the `echo_compression` inlet (issue 8 item 3): the I/O around
`echo.domain.compression.references`, which decides what stands for each chat.

For each `files` entry of type `chat` (all of them at once, concurrently):

1. the chat's latest branch: from Open WebUI's API when `ECHO_OPENWEBUI_URL` and
   `ECHO_OPENWEBUI_API_KEY` are configured (its active branch, `history.currentId`; `output` items
   unfolded as the outlet does), used only when the chat's `user_id` is the user's; else, or when
   the API fails or does not know the chat, the store's chat head (`ConversationStore.latest_branch`,
   written by the outlet: chats ECHO has seen, per user) and the content-addressed messages;
2. the newest summary valid for that branch (`ConversationStore.best_summary`, one indexed lookup):
   identity is content, so the referenced chat's own summaries, and those of any chat of the user
   sharing its prefix, serve;
3. `references.render` within the reference's share of the budget. Over it, when a summary job
   can make it fit (`references.plan`), the job is enqueued as the referenced chat's own outlet
   would (`compression_jobs.enqueue_summary`: same key, so one job per branch point) and the inlet
   waits for it at most `reference_summary_wait_seconds`, and never past the hook's deadline; then
   it renders again with whatever summary exists, cut to the budget. The job goes on if the wait
   is over: its summary serves later references (and the referenced chat's own inlets).

What one inlet asks of its references travels as one ``Request`` (whose, how many tokens each may
take, under which valves, for which model and language, by when); the store, the job queue and Open
WebUI's API come from the backends (``echo.ports.backends``).

The wait is the one place an inlet waits on an LLM (seed 002; DESIGN §9). It polls the job's row
(a primary-key lookup every 50 ms, backing off to 250 ms): a finished job sends no notification,
and a wait of seconds does not deserve a listening connection per request.

A reference that cannot be resolved (unknown, another user's, the store or the API failing, out of
time) stays in `files`: Open WebUI then does what it does without ECHO (it injects the transcript
when its own access rules allow), and a status event names the reference left to Open WebUI. The
request never fails because of a reference (DESIGN §6). A chat ECHO has not seen for this user (the
store's chat heads are per user, so another user's chat reads the same; Open WebUI's API, asked with
the user's own chats in mind, may not know it either) is nothing failing: an info status, "…left to
Open WebUI: ECHO has not seen it among your chats", which never says whether another user has such a
chat. Every other outcome is a failure: logged with the chat ids, counted in
`echo_compression_failures_total{phase="inlet", reason="reference"}`, and a warning status event
names the reference and the reason ("another user's chat" when Open WebUI's API says so).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from echo.adapters.openwebui import client as openwebui_client
from echo.capabilities import events as events_module
from echo.capabilities.compression import jobs as compression_jobs
from echo.capabilities.compression import metrics as compression_metrics
from echo.config import valves as valves_module
from echo.domain import history, output_items
from echo.domain import jobs as domain
from echo.domain.compression import compaction, references, selection
from echo.domain.compression import messages as msgs
from echo.errors import ConfigError
from echo.ports import backends as backends_port
from echo.ports import store as store_port

__all__ = ["Applied", "Request", "Resolved", "Resolver", "insert_blocks", "strip_files"]

log = structlog.get_logger("echo.filters.compression")

TurnsOf = Callable[[Sequence[Mapping[str, Any]]], msgs.Turns]
Source = Literal["openwebui", "store"]

RESERVE_SECONDS = 0.1  # of the hook's deadline, left for assembling the request (and, before that, for
# rendering a reference once its wait is over)
_POLL_FIRST, _POLL_MOST = 0.05, 0.25  # seconds between two looks at the job's row
_NAME_CHARS = 80  # of a referenced chat's title in a status line (the title comes with the request)
UNSEEN = "ECHO has not seen it among your chats"  # never says whether another user has such a chat
_FINISHED = frozenset({domain.JobState.DONE, domain.JobState.DEAD})


@dataclass(frozen=True)
class Request:
    """What one inlet asks of its references: the user's (``user_id``) in chat ``chat_id``, at most
    ``budget`` tokens each, under the valves ``settings``, for the chat's ``model`` and
    ``base_model``, in ``locale``, by ``deadline`` (a monotonic instant; None: no deadline)."""

    user_id: str
    chat_id: str | None
    budget: int
    settings: valves_module.CompressionValves
    model: str | None
    base_model: str | None
    locale: str
    deadline: float | None


@dataclass(frozen=True)
class _Window:
    """When a reference's summary wait ends (``wait_until``) and when the whole step ends (``ends``,
    None: no deadline), both monotonic instants."""

    wait_until: float
    ends: float | None


@dataclass(frozen=True)
class Resolved:
    """A referenced chat and the block that stands for it. ``job_id``: the summary job enqueued for
    it on this inlet (None when none was needed); ``waited``: seconds spent waiting for that job."""

    reference: references.ChatReference
    block: references.ReferenceBlock
    source: Source
    job_id: int | None = None
    waited: float = 0.0


@dataclass
class Applied:
    """The references of one inlet: the blocks to insert, and what to say about them."""

    resolved: list[Resolved] = field(default_factory=list)
    events: list[events_module.StatusEvent] = field(default_factory=list)

    @property
    def taken(self) -> set[str]:
        return {item.reference.chat_id for item in self.resolved}


def insert_blocks(messages: Sequence[Mapping[str, Any]], blocks: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``messages`` with ``blocks`` just before the last user turn (the current message), which
    they belong to; at the end when there is none."""
    kinds = msgs.kinds_of(messages)
    at = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        if kinds[index] is msgs.Kind.TURN and msgs.role_of(messages[index]) == "user":
            at = index
            break
    return [*messages[:at], *blocks, *messages[at:]]


def strip_files(body: Mapping[str, Any], chat_ids: set[str]) -> dict[str, Any]:
    """``body`` without the chat entries of ``chat_ids`` in ``files`` and ``metadata.files`` (Open WebUI
    reads the latter for what it injects; both go, so no transcript is injected twice)."""
    new = dict(body)
    if "files" in new:
        new["files"] = references.without_references(new["files"], chat_ids)
    metadata = new.get("metadata")
    if isinstance(metadata, Mapping) and "files" in metadata:
        new["metadata"] = {**metadata, "files": references.without_references(metadata["files"], chat_ids)}
    return new


class Resolver:
    """Resolves the referenced chats of one inlet (see the module docstring)."""

    def __init__(
        self,
        store: backends_port.Repositories,
        openwebui: backends_port.OpenWebUI | None,
        *,
        turns_of: TurnsOf,
        counter: msgs.TokenCounter,
    ) -> None:
        self.store = store
        self.openwebui = openwebui
        self._turns_of = turns_of
        self._counter = counter

    async def resolve_all(self, found: Sequence[references.ChatReference], request: Request) -> Applied:
        """Every reference of ``found`` that could be resolved before the request's deadline, in
        their order; the others stay in ``files``."""
        applied = Applied()
        if not found:
            return applied
        chat_id, budget = request.chat_id, request.budget
        started = time.monotonic()
        ends = request.deadline - RESERVE_SECONDS if request.deadline is not None else None
        wait_until = started + request.settings.reference_summary_wait_seconds
        if ends is not None:  # a waiting reference still reads its summary and renders after the wait
            wait_until = min(wait_until, ends - RESERVE_SECONDS)
        window = _Window(wait_until, ends)
        timeout = None if ends is None else max(0.0, ends - time.monotonic())
        results = await asyncio.gather(  # each reference on its own; none outlives the hook's deadline
            *(asyncio.wait_for(self._resolve(reference, request, window), timeout) for reference in found),
            return_exceptions=True,
        )
        for reference, result in zip(found, results, strict=True):
            outcome: Resolved | str
            if isinstance(result, (TimeoutError, asyncio.CancelledError)):
                outcome = "out of time"
            elif isinstance(result, Exception):
                outcome = _failure_reason(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                outcome = result
            if isinstance(outcome, Resolved):
                applied.resolved.append(outcome)
                applied.events.append(_event(outcome))
                log.info(
                    "reference_injected",
                    chat_id=chat_id,
                    referenced_chat_id=reference.chat_id,
                    source=outcome.source,
                    mode=outcome.block.mode,
                    tokens=outcome.block.tokens,
                    budget=budget,
                    shown_turns=outcome.block.shown_turns,
                    omitted_turns=outcome.block.omitted_turns,
                    job_id=outcome.job_id,
                    waited_s=round(outcome.waited, 3),
                )
                continue
            if outcome == "unknown":  # neither ECHO nor the API knows it for this user: nothing failed
                log.info("reference_left_to_openwebui", chat_id=chat_id, referenced_chat_id=reference.chat_id)
                applied.events.append(
                    events_module.StatusEvent(
                        f"Referenced chat “{_named(reference)}” left to Open WebUI: {UNSEEN}"
                    )
                )
                continue
            compression_metrics.COMPRESSION_FAILURES.labels("inlet", "reference").inc()
            log.warning(
                "reference_failed",
                chat_id=chat_id,
                referenced_chat_id=reference.chat_id,
                reason=outcome,
                returned="reference left to Open WebUI",
            )
            applied.events.append(
                events_module.StatusEvent(
                    f"Referenced chat “{_named(reference)}” was left to Open WebUI ({outcome})",
                    "warning",
                )
            )
        return applied

    async def _resolve(
        self, reference: references.ChatReference, request: Request, window: _Window
    ) -> Resolved | str:
        """The block of one reference, or why there is none ("unknown", "another user's chat")."""
        user_id, budget, settings, locale = request.user_id, request.budget, request.settings, request.locale
        loaded = await self._branch(reference.chat_id, user_id, window.ends)
        if isinstance(loaded, str):
            return loaded
        branch, source = loaded
        if not branch.messages:
            return "unknown"
        summary = await self._summary(user_id, branch)
        block = references.render(
            reference, branch, summary, budget=budget, locale=locale, counter=self._counter
        )
        if block.mode != "cut":
            return Resolved(reference, block, source)
        plan = references.plan(branch, summary, keep_first=settings.keep_first, keep_last=settings.keep_last)
        if plan is None:
            return Resolved(reference, block, source)
        try:
            job = compression_jobs.summary_job(
                plan,
                branch.turns,
                settings,
                branch.messages,
                model=request.model,
                base_model=request.base_model,
                user_id=user_id,
                chat_id=reference.chat_id,
            )
        except ConfigError as error:
            log.error("reference_summary_not_planned", referenced_chat_id=reference.chat_id, error=str(error))
            return Resolved(reference, block, source)
        planned = compression_jobs.planned_messages(plan, branch.turns, branch.messages)
        job_id = await compression_jobs.enqueue_summary(
            self.store.transactions, self.store.conversations, self.store.jobs, job, planned
        )
        started = time.monotonic()
        await self._wait(job_id, window.wait_until)
        waited = time.monotonic() - started
        summary = await self._summary(user_id, branch)
        block = references.render(
            reference, branch, summary, budget=budget, locale=locale, counter=self._counter
        )
        return Resolved(reference, block, source, job_id=job_id, waited=waited)

    async def _summary(self, user_id: str, branch: compaction.Branch) -> selection.StoredSummary | None:
        row = await self.store.conversations.best_summary(user_id, branch.turns.hashes)
        return row.summary if row is not None else None

    async def _wait(self, job_id: int, until: float) -> None:
        """Until the job is done or dead, or ``until`` (a monotonic instant)."""
        delay = _POLL_FIRST
        while True:
            info = await self.store.jobs.get(job_id)
            if info is None or info.state in _FINISHED:  # None: swept by retention, so finished
                return
            left = until - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 1.5, _POLL_MOST)

    async def _branch(
        self, chat_id: str, user_id: str, ends: float | None
    ) -> tuple[compaction.Branch, Source] | str:
        """The chat's latest branch and where it came from, or why there is none (``ends``: the
        monotonic instant the whole step ends, None: the client's own timeout)."""
        if self.openwebui is not None:
            timeout = None if ends is None else max(0.05, ends - time.monotonic())
            try:
                answer = await self.openwebui.chat(chat_id, timeout_s=timeout)
            except openwebui_client.OpenWebUIError as error:
                log.warning("reference_api_failed", referenced_chat_id=chat_id, error=str(error))
                answer = None
            if answer is not None:
                owner = history.chat_owner(answer)
                if owner != user_id:
                    log.warning(
                        "reference_refused",
                        referenced_chat_id=chat_id,
                        reason="the chat belongs to another user" if owner else "the chat names no owner",
                    )
                    return "another user's chat"
                return self._from_messages(history.active_branch(answer)), "openwebui"
        invariants = await self.store.conversations.latest_branch(user_id, chat_id)
        if invariants is None:
            return "unknown"
        stored = await self.store.conversations.messages(user_id, invariants)
        try:
            return compaction.rebuild_branch(invariants, stored), "store"
        except compaction.MissingMessages as error:
            return f"its stored branch is incomplete ({error})"

    def _from_messages(self, messages: Sequence[Mapping[str, Any]]) -> compaction.Branch:
        """The branch of a chat's message list: its turns only, hashed as the outlet hashes them."""
        unfolded = output_items.unfold_output_items(messages)
        kinds = msgs.kinds_of(unfolded)
        turn_messages = [
            message for message, kind in zip(unfolded, kinds, strict=True) if kind is msgs.Kind.TURN
        ]
        return compaction.Branch(tuple(turn_messages), self._turns_of(turn_messages))


def _failure_reason(error: BaseException) -> str:
    if isinstance(error, store_port.StoreError):
        return store_port.describe(error)
    log.error("reference_error", error=repr(error), exc_info=error)
    return f"error: {type(error).__name__}"


_DESCRIBED: dict[references.Mode, str] = {
    "summary": "its stored summary",
    "mixed": "its stored summary and the messages after it",
    "whole": "in full",
    "cut": "cut to fit",
}


def _named(reference: references.ChatReference) -> str:
    """The reference's title (else its id) as a status line shows it: at most `_NAME_CHARS`."""
    name = reference.title or reference.chat_id
    return name if len(name) <= _NAME_CHARS else name[: _NAME_CHARS - 1] + "…"


def _event(item: Resolved) -> events_module.StatusEvent:
    title = _named(item.reference)
    how = _DESCRIBED[item.block.mode]
    if item.job_id is not None and item.block.summary is not None:
        how = "summarised now" + (", cut to fit" if item.block.mode == "cut" else "")
    return events_module.StatusEvent(f"Referenced chat “{title}” added: {how} ({item.block.tokens:,} tokens)")
