"""The replay driver: a transcript through the filters, turn by turn, with the job worker running.

Per exchange, as Open WebUI 0.12.4 calls a Pipelines server: the inlet body (the branch so far as
`role`/`content` messages, assistant `output` items unfolded into tool calls and results the way
Open WebUI rebuilds them, the system prompt first, `metadata` with the ids, the user message's
`files`) through every filter's inlet in priority order; then the recorded reply stands for the
model's answer, and the flat outlet body (messages with ids and `output` items) goes through every
outlet. Each hook runs as the service runs it (`echo.entrypoints.http.runner.run_hook`: its deadline valve,
the body unchanged on a failure). After the outlets the driver waits until the tenant's queue has
no ready or running job, so the summary the outlet enqueued is there for the next inlet (a model
takes seconds, a user longer; the replay does not wait for wall-clock time).

`session` builds it on a store: the filters with that store, the process's job handlers
(`echo.capabilities.handlers.builtin_registry`: the offline provider unless a model is configured) on an
in-process `Worker`, a fresh user id per session so no summary of an earlier run is reused, and that
user's summaries and messages forgotten at the end.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import structlog
from pydantic import ValidationError

from echo.adapters.store import errors as store_errors
from echo.capabilities import backends as capability_backends
from echo.capabilities import base, registry
from echo.capabilities import events as events_module
from echo.capabilities import handlers as capability_handlers
from echo.capabilities.compression import filter as compression_filter
from echo.config import snapshot
from echo.config import valves as valves_module
from echo.domain import bodies, output_items, transcripts
from echo.domain import jobs as domain
from echo.domain import replay_reports as reports
from echo.domain.compression import budgets
from echo.domain.compression import messages as msgs
from echo.entrypoints.http import runner
from echo.errors import ConfigError
from echo.ports import backends as backends_port
from echo.queue import queue, worker

if TYPE_CHECKING:
    from echo.adapters.store.pool import Store
    from echo.config.settings import Settings

__all__ = [
    "Drain",
    "QueueDrain",
    "Replayer",
    "compression_valves",
    "inlet_body",
    "inlet_messages",
    "outlet_body",
    "session",
    "summary_covers",
    "tokens_of",
]

log = structlog.get_logger("echo.replay")

Drain = Callable[[], Awaitable[bool]]
"""Waits until the background work of a turn is done; False when it gave up waiting."""

ValvesOf = Callable[[str], valves_module.Valves | None]

_COVERS = re.compile(r'<echo_summary\b[^>]*\bcovers="(\d+)"')
_INLET_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def compression_valves(
    base: valves_module.CompressionValves,
    *,
    threshold: int | None = None,
    max_context: int | None = None,
    keep_last: int | None = None,
    style: str | None = None,
    max_summary_tokens: int | None = None,
) -> valves_module.CompressionValves:
    """``base`` with a replay's overrides (None: keep the configured valve).

    A threshold or a ceiling given applies whatever the chat's model: ``model_thresholds`` is emptied
    (an entry for the export's model would win otherwise). Without ``max_summary_tokens``, a
    configured one that breaks the 80 % rule for the replay's smaller window is lowered to a quarter
    of that window. ``ConfigError`` names the valve that is wrong.
    """
    data = base.model_dump()
    given = {
        "compression_threshold_tokens": threshold,
        "max_context_tokens": max_context,
        "keep_last": keep_last,
        "compression_style": style,
        "max_summary_tokens": max_summary_tokens,
    }
    data.update({key: value for key, value in given.items() if value is not None})
    if threshold is not None or max_context is not None:
        data["model_thresholds"] = {}
    try:
        if max_summary_tokens is None:
            probe = valves_module.CompressionValves.model_validate({**data, "max_summary_tokens": 1})
            window, _ = valves_module.effective_summary_window(probe)
            if data["max_summary_tokens"] >= valves_module.SUMMARY_OUTPUT_SHARE * window:
                data["max_summary_tokens"] = max(1, window // 4)
        return valves_module.CompressionValves.model_validate(data)
    except ValidationError as error:
        raise ConfigError(snapshot.describe_validation_error(error, "echo_compression")) from error


class QueueDrain:
    """Waits until the tenant's queue has no ready or running job (at most ``within`` seconds)."""

    def __init__(self, jobs: queue.JobQueue, *, within: float = 120.0, poll: float = 0.01) -> None:
        self.jobs = jobs
        self.within = within
        self.poll = poll

    async def __call__(self) -> bool:
        deadline = time.monotonic() + self.within
        while True:
            depths = await self.jobs.depths()
            busy = sum(
                depth.jobs if depth.state is domain.JobState.RUNNING else depth.ready
                for depth in depths
                if depth.state in (domain.JobState.RUNNING, domain.JobState.PENDING)
            )
            if not busy:
                return True
            if time.monotonic() >= deadline:
                log.warning("replay_jobs_still_running", jobs=busy, waited_s=self.within)
                return False
            await asyncio.sleep(self.poll)


def _inlet_message(message: Mapping[str, Any]) -> dict[str, Any]:
    return {key: message[key] for key in _INLET_KEYS if key in message}


def inlet_messages(
    transcript: transcripts.Transcript, history: Sequence[transcripts.Message]
) -> list[dict[str, Any]]:
    """The messages of an inlet body for ``history`` (see the module docstring)."""
    unfolded = output_items.unfold_output_items([m.recorded() for m in history])
    sent = [_inlet_message(message) for message in unfolded]
    if transcript.system:
        sent.insert(0, {"role": "system", "content": transcript.system})
    return sent


def inlet_body(
    transcript: transcripts.Transcript,
    history: Sequence[transcripts.Message],
    *,
    user_id: str,
    reply_id: str,
    session_id: str = "echoctl-replay",
) -> dict[str, Any]:
    """The inlet body Open WebUI sends for the turn that ends ``history`` (a user message, usually)."""
    last = history[-1] if history else None
    body: dict[str, Any] = {
        "model": transcript.model or "",
        "stream": True,
        "messages": inlet_messages(transcript, history),
        "metadata": {
            "chat_id": transcript.id,
            "user_id": user_id,
            "message_id": reply_id,
            "user_message_id": last.id if last is not None else None,
            "session_id": session_id,
        },
    }
    files = last.fields.get("files") if last is not None and last.role == "user" else None
    if isinstance(files, list) and files:
        body["files"] = files
    return body


def outlet_body(
    transcript: transcripts.Transcript,
    history: Sequence[transcripts.Message],
    *,
    session_id: str = "echoctl-replay",
) -> dict[str, Any]:
    """The flat outlet body Open WebUI sends after the reply that ends ``history``."""
    return {
        "model": transcript.model or "",
        "messages": [message.recorded() for message in history],
        "chat_id": transcript.id,
        "session_id": session_id,
        "id": history[-1].id,
    }


def tokens_of(messages: Sequence[Mapping[str, Any]]) -> int:
    """What a request's messages cost (the filters' own estimate)."""
    return sum(msgs.message_tokens(message) for message in messages)


def summary_covers(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many messages the injected summary among ``messages`` stands for (0: none)."""
    for message in messages:
        found = _COVERS.match(msgs.content_text(message.get("content")).lstrip())
        if found:
            return int(found.group(1))
    return 0


class Replayer:
    """Plays transcripts through ``filters`` (ascending priority) with the valves ``valves_of`` gives."""

    def __init__(
        self,
        filters: Sequence[base.Filter],
        valves_of: ValvesOf,
        *,
        user: Mapping[str, Any],
        drain: Drain | None = None,
        session_id: str = "echoctl-replay",
    ) -> None:
        self.filters = sorted(filters, key=lambda flt: flt.priority)
        self.valves_of = valves_of
        self.user = dict(user)
        self.drain = drain
        self.session_id = session_id

    async def _through(
        self, phase: base.Phase, body: dict[str, Any]
    ) -> tuple[dict[str, Any], list[events_module.StatusEvent]]:
        raised: list[events_module.StatusEvent] = []
        for flt in self.filters:
            ctx = base.HookContext(
                filter_id=flt.id,
                phase=phase,
                user=self.user,
                ids=bodies.turn_ids(body, self.user),
                valves=self.valves_of(flt.id),
            )
            body = json.loads(await runner.run_hook(flt, body, ctx))
            raised.extend(ctx.events)
        return body, raised

    async def inlet(
        self,
        transcript: transcripts.Transcript,
        history: Sequence[transcripts.Message],
        *,
        reply_id: str,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[events_module.StatusEvent]]:
        """Run the inlets for the turn that ends ``history``: (messages sent, messages sent on, events)."""
        body = inlet_body(
            transcript, history, user_id=self.user["id"], reply_id=reply_id, session_id=self.session_id
        )
        answer, raised = await self._through("inlet", body)
        kept = answer.get("messages")
        return body["messages"], kept if isinstance(kept, list) else body["messages"], raised

    async def outlet(
        self, transcript: transcripts.Transcript, history: Sequence[transcripts.Message]
    ) -> None:
        """Run the outlets after the recorded reply that ends ``history``."""
        await self._through("outlet", outlet_body(transcript, history, session_id=self.session_id))

    async def replay(
        self,
        transcript: transcripts.Transcript,
        *,
        on_turn: Callable[[reports.Turn], None] | None = None,
    ) -> reports.Replayed:
        """Every exchange of ``transcript``, in order; ``on_turn`` hears of each as it ends."""
        history: list[transcripts.Message] = []
        turns: list[reports.Turn] = []
        final: list[dict[str, Any]] = []
        stalled = 0
        for number, exchange in enumerate(transcript.exchanges, start=1):
            history.extend(exchange.sent)
            reply_id = exchange.replies[0].id if exchange.replies else f"{exchange.sent[-1].id}-reply"
            started = time.perf_counter()
            sent, final, raised = await self.inlet(transcript, history, reply_id=reply_id)
            inlet_ms = (time.perf_counter() - started) * 1000
            outlet_ms = 0.0
            if exchange.replies:
                history.extend(exchange.replies)
                started = time.perf_counter()
                await self.outlet(transcript, history)
                outlet_ms = (time.perf_counter() - started) * 1000
                if self.drain is not None and not await self.drain():
                    stalled += 1
            turn = reports.Turn(
                number=number,
                messages=len(sent),
                sent=len(final),
                tokens_before=tokens_of(sent),
                tokens_after=tokens_of(final),
                summary_covers=summary_covers(final),
                inlet_ms=inlet_ms,
                outlet_ms=outlet_ms,
                warnings=tuple(e.description for e in raised if e.level in ("warning", "error")),
            )
            turns.append(turn)
            if on_turn is not None:
                on_turn(turn)
        settings = self.valves_of(compression_filter.CompressionFilter.id)
        limits = (
            budgets.thresholds_for(settings, transcript.model)
            if isinstance(settings, valves_module.CompressionValves)
            else None
        )
        return reports.Replayed(
            transcript,
            tuple(turns),
            tuple(final),
            stalled,
            threshold=limits.compression_threshold_tokens if limits else None,
            max_context=limits.max_context_tokens if limits else None,
        )

    async def probe(self, transcript: transcripts.Transcript, question: str) -> list[dict[str, Any]]:
        """The messages the inlets send on when ``question`` follows the whole conversation."""
        asked = transcripts.Message(id=f"{transcript.id}-probe", role="user", content=question)
        _, kept, _ = await self.inlet(transcript, [*transcript.messages, asked], reply_id=f"{asked.id}-reply")
        return kept


def _ignore_masked(counts: Mapping[str, int]) -> None:
    log.info("replay_secrets_masked", counts=dict(counts))


@asynccontextmanager
async def session(
    store: Store,
    settings: Settings,
    valves_of: ValvesOf,
    *,
    concurrency: int = 2,
    drain_seconds: float = 120.0,
) -> AsyncIterator[Replayer]:
    """A `Replayer` on ``store`` with a running worker; the session's user is forgotten at the end."""
    repositories = capability_backends.on_store(store)
    handlers = capability_handlers.builtin_registry(settings, repositories)
    runs = worker.Worker.from_settings(store, handlers, settings, concurrency=concurrency)
    backends = backends_port.Backends(store=repositories)  # no index: echo_memory passes bodies through
    filters = registry.build_filters((), _ignore_masked, backends=lambda: backends)
    user = {"id": f"replay-{secrets.token_hex(6)}", "name": "echoctl replay", "role": "user"}
    drain = QueueDrain(queue.JobQueue(store), within=drain_seconds)
    await runs.start()
    try:
        yield Replayer(list(filters.filters.values()), valves_of, user=user, drain=drain)
    finally:
        await runs.stop()
        for spec in handlers:
            close = getattr(spec.handler, "aclose", None)
            if close is not None:
                await close()
        try:
            await repositories.conversations.forget(user["id"])
        except store_errors.StoreError as error:  # the replay's own error, if any, is the one to see
            log.warning("replay_user_not_forgotten", user_id=user["id"], error=str(error))
