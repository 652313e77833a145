"""`echo_memory` (seed 000, filter 2, conversation_memory_filter v4.0): the thin filter.

Outlet (never waits on an LLM, the body comes back unchanged): the branch's messages (Open WebUI's
`output` items unfolded as the next inlet will see them; system messages and ECHO's injected blocks are
not part of it) are placed on the hash chain (hashes cached per process, as in echo_compression); every
`WINDOW_SIZE` messages a window of `WINDOW_SIZE + WINDOW_OVERLAP` is due (`echo.domain.memory.windows`). For
each due window among the last ones, its messages are stored once by invariant hash and one `distill`
job is enqueued in the same transaction, idempotent on the window's key: a replayed outlet adds nothing.
An outlet with no window due, or only windows this process enqueued already, does no I/O at all.

Inlet (the one embedding call allowed on an inlet, DESIGN §5): the latest user message is embedded,
the user's nearest memories at or above `RECALL_MIN_SIMILARITY` are searched, those whose every source
message the request already holds left out (its own messages, and the turns of the summary
echo_compression names in `metadata`: `echo.domain.memory.context`, one store read for that summary's
row), ranked by similarity, importance and recency fused with the hybrid search's lexical order, taken
while they fit `RECALL_MAX_TOKENS` (at most `RECALL_TOP_K`, a cap above what the budget holds of
fact-sized memories), and put in front of that user message as one block fenced as background history
and not instructions (`echo.domain.memory.recall`). In the user's turn rather than a system message of
its own: many chat templates (Mistral, Gemma…) refuse a system message after the first turn, and
`echo.domain.chain` normalises the block away, so the turn hashes as if it were clean.
All of it runs under `INLET_DEADLINE_MS` less a margin: past it, or on any error, the turn goes on
without memories (`echo_memory_recalls_total{outcome}`). Open WebUI's background tasks (titles,
tags, queries) are left alone.

Backends (`echo.ports.backends`, asked on every call): the filter works where the service has a
store and an index (the hook service's runtime); without them it passes every body through. The
recall is skipped (`outcome="skipped"`) while the index is not ready yet (the warm-up).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from echo.adapters.store import conversations
from echo.capabilities import base
from echo.capabilities import events as events_module
from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.memory import metrics as memory_metrics
from echo.capabilities.memory import payloads as memory_payloads
from echo.config import valves as valves_module
from echo.domain import kinds, tokens
from echo.domain.compression import allowance, locales
from echo.domain.compression import messages as msgs
from echo.domain.memory import cleaning, recall, windows
from echo.domain.memory import context as memory_context
from echo.errors import EchoError
from echo.ports import backends as backends_port
from echo.ports import embeddings as embeddings_base
from echo.ports import store as store_port
from echo.ports import vectors as vectors_base
from echo.support import metrics

__all__ = ["MemoryFilter", "distill_job_key"]

log = structlog.get_logger("echo.filters.memory")

RECALL_CANDIDATES = 80  # nearest memories ranked (those the request holds left out) before the budget
_ENQUEUED_ENTRIES = 100_000  # job keys remembered; a full set is cleared (a re-enqueue is idempotent)
_DEADLINE_MARGIN_S = 0.02
_LEADING_BLOCK = re.compile(
    rf"\A\s*<{recall.MEMORIES_TAG}\b.*?</{recall.MEMORIES_TAG}\s*>\s*", re.DOTALL
)  # recall stops this long before the hook's deadline, so the hook answers in time


def distill_job_key(user_id: str, window_key: str) -> str:
    """The idempotency key of a window's distill job: the window's key, scoped to its user."""
    return f"distill:{user_id}:{window_key}"


def _file_names(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        files = message.get("files")
        for entry in files if isinstance(files, list) else ():
            if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
                found = cleaning.clean_messages([{"role": "user", "files": [entry]}])
                if found and found[0].files:
                    names[entry["id"]] = found[0].files[0]
    return names


class MemoryFilter:
    id = "echo_memory"
    name = "ECHO memory"
    priority = 20
    description = (
        "Long-term memory (seed 000, filter 2): every WINDOW_SIZE messages the outlet queues a background"
        " distillation into the user's memories (merged with similar ones); the inlet recalls the"
        " relevant ones, fenced as background history."
    )

    def __init__(self, backends: base.BackendsProvider | None = None) -> None:
        self._backends = backends or base.no_backends
        self.costs = compression_costs.Costs()  # per-process caches of message kinds and chain links
        self._enqueued: set[str] = set()  # job keys this process enqueued (a replay re-enqueues nothing)

    @staticmethod
    def _valves(ctx: base.HookContext) -> valves_module.MemoryValves:
        found = ctx.valves
        return found if isinstance(found, valves_module.MemoryValves) else valves_module.MemoryValves()

    @staticmethod
    def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        found = body.get("messages")
        if not isinstance(found, list) or not found:
            return None
        if len(found) < compression_costs.OFFLOAD_MESSAGES and not _all_dicts(found):
            return None
        return found  # a long list is checked off the loop, by the step that walks it

    # --- outlet: windows -> distill jobs ---

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = self._messages(body)
        user_id = ctx.ids.user_id
        backends = self._backends()
        store = backends.store
        if messages is None or not user_id or ctx.ids.task or store is None or backends.index is None:
            return body
        settings = self._valves(ctx)
        key = ("echo_memory", user_id, ctx.ids.chat_id) if ctx.ids.chat_id else None

        # The branch and its turns (a chat's next turn reuses this one's chain; a combined call reuses
        # echo_compression's), off the loop for a long chat's first outlet, then the windows due.
        found = await compression_costs.prepared_branch(self.costs, messages, key)
        if found is None:
            return body
        unfolded, prepared = found
        turns = prepared.turns
        due = [
            window
            for window in windows.due_windows(
                turns.hashes, size=settings.WINDOW_SIZE, overlap=settings.WINDOW_OVERLAP
            )
            if distill_job_key(user_id, window.key) not in self._enqueued
        ]
        if not due:
            return body
        try:
            await self._enqueue(store, user_id, ctx.ids.chat_id, unfolded, turns, due, settings)
        except store_port.StoreError as error:
            metrics.HOOK_FAILURES.labels(self.id, "outlet", "store").inc()
            reason = store_port.describe(error)
            log.warning(
                "memory_store_failed",
                phase="outlet",
                error=str(error),
                reason=reason,
                error_kind=type(error).__name__,
                returned="body unchanged",
            )
            ctx.events.append(
                events_module.StatusEvent(f"{self.name}: {reason}; nothing was memorised", "warning")
            )
        return body

    async def _enqueue(
        self,
        store: backends_port.Repositories,
        user_id: str,
        chat_id: str | None,
        messages: Sequence[Mapping[str, Any]],
        turns: msgs.Turns,
        due: Sequence[windows.Window],
        settings: valves_module.MemoryValves,
    ) -> None:
        async with store.transactions.transaction() as connection:
            for window in due:
                links = turns.links[window.start : window.stop]
                window_messages = [messages[turns.positions[link.index]] for link in links]
                await store.conversations.remember(
                    user_id,
                    {
                        link.invariant: conversations.stored_message(message)
                        for link, message in zip(links, window_messages, strict=True)
                    },
                    connection=connection,
                )
                job = memory_payloads.DistillPayload(
                    user_id=user_id,
                    chat_id=chat_id,
                    key=window.key,
                    start=window.start,
                    parent=turns.links[window.start - 1].cumulative if window.start else None,
                    invariants=tuple(link.invariant for link in links),
                    message_ids=tuple(link.message_id for link in links),
                    file_names=_file_names(window_messages),
                    model=settings.DISTILLATION_MODEL,
                    similarity_threshold=settings.SIMILARITY_THRESHOLD,
                    exact_match_threshold=settings.EXACT_MATCH_THRESHOLD,
                )
                job_id = await store.jobs.enqueue(
                    kinds.DISTILL,
                    job.to_payload(),
                    idempotency_key=distill_job_key(user_id, window.key),
                    connection=connection,
                )
                log.info("distill_enqueued", job_id=job_id, window=window.key[:12], messages=len(window))
        if len(self._enqueued) >= _ENQUEUED_ENTRIES:
            self._enqueued.clear()
        self._enqueued.update(distill_job_key(user_id, window.key) for window in due)

    # --- inlet: recall ---

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = self._messages(body)
        user_id = ctx.ids.user_id
        settings = self._valves(ctx)
        if messages is None or not user_id or ctx.ids.task or not settings.ENABLE_RECALL:
            return body
        room = allowance.room_of(body)  # what echo_compression freed: this chat's memories fit in it
        position = _last_user(messages)
        query = ""
        if position is not None:
            query = cleaning.clean_text(msgs.content_text(messages[position].get("content")))
        index = self._backends().index  # the embedder and vectors: both, or neither while not ready
        embedder = index.embedder() if index is not None else None
        vectors = await index.vectors() if index is not None else None
        if position is None or not query or embedder is None or vectors is None:
            memory_metrics.MEMORY_RECALLS.labels("skipped").inc()
            return body
        started = time.perf_counter()
        budget = settings.INLET_DEADLINE_MS / 1000.0
        if ctx.deadline is not None:
            budget = min(budget, ctx.deadline - time.monotonic())
        budget -= _DEADLINE_MARGIN_S
        try:
            if budget <= 0:
                raise TimeoutError
            async with asyncio.timeout(budget):
                held = _Held(self.costs, messages, body, self._backends().store, ctx)
                chosen = await self._recall(embedder, vectors, user_id, query, settings, held, room)
        except TimeoutError:
            memory_metrics.MEMORY_RECALLS.labels("timeout").inc()
            log.warning(
                "memory_recall_timeout", deadline_ms=settings.INLET_DEADLINE_MS, returned="body unchanged"
            )
            return body
        except (EchoError, ValueError) as error:
            memory_metrics.MEMORY_RECALLS.labels("error").inc()
            log.warning("memory_recall_failed", error=str(error), returned="body unchanged")
            return body
        finally:
            memory_metrics.MEMORY_RECALL_SECONDS.observe(time.perf_counter() - started)
        if not chosen:
            memory_metrics.MEMORY_RECALLS.labels("miss").inc()
            return body
        memory_metrics.MEMORY_RECALLS.labels("hit").inc()
        memory_metrics.MEMORY_RECALLED.inc(len(chosen))
        earlier = _earlier_user_texts(messages, position, 3)
        locale = locales.detect_locale([query, *earlier], _language(ctx))
        block = recall.memories_block(chosen, locale=locale)
        target = messages[position]
        log.info("memories_recalled", count=len(chosen), ids=[c.id for c in chosen])
        updated = {**target, "content": _with_block(target.get("content"), block)}

        def replaced(stop: compression_costs.StopCheck) -> list[dict[str, Any]]:
            return [*messages[:position], updated, *messages[position + 1 :]]

        return {**body, "messages": await compression_costs.off_loop(len(messages), replaced)}

    async def _recall(
        self,
        embedder: embeddings_base.Embedder,
        vectors: vectors_base.VectorStore,
        user_id: str,
        query: str,
        settings: valves_module.MemoryValves,
        held: _Held,
        room: int | None,
    ) -> list[recall.Candidate]:
        vector = (await embedder.embed([query]))[0]
        hits = await vectors.search(
            vectors_base.Kind.MEMORY,
            vector,
            user_id=user_id,
            limit=RECALL_CANDIDATES,
            min_score=settings.RECALL_MIN_SIMILARITY,
            query_text=query,
        )
        candidates = [
            recall.candidate(hit.id, hit.score, hit.payload, hit.chat_id, hit.lexical)
            for hit in hits
            if hit.user_id == user_id
        ]
        if any(c.sources is not None for c in candidates):  # what the request holds is not recalled
            request = await held.held()
            outside = [c for c in candidates if not memory_context.holds(request, c)]
            memory_metrics.MEMORY_RECALL_HELD.inc(len(candidates) - len(outside))
            candidates = outside
        ranked = recall.rank(candidates, min_similarity=settings.RECALL_MIN_SIMILARITY)
        return recall.select(
            ranked,
            budget_tokens=settings.RECALL_MAX_TOKENS,
            limit=settings.RECALL_TOP_K,
            counter=tokens.estimate_tokens,
            chat_id=held.chat_id,
            chat_budget=room,
        )


class _Held:
    """What a request holds (``echo.domain.memory.context``), worked out once, when recall asks: its
    own turns' invariant hashes and those of the summary echo_compression put in it."""

    def __init__(
        self,
        costs: compression_costs.Costs,
        messages: list[dict[str, Any]],
        body: Mapping[str, Any],
        store: backends_port.Repositories | None,
        ctx: base.HookContext,
    ) -> None:
        self._costs, self._messages, self._body, self._store, self._ctx = costs, messages, body, store, ctx

    @property
    def chat_id(self) -> str | None:
        return self._ctx.ids.chat_id

    async def held(self) -> memory_context.Held:
        ids = self._ctx.ids
        key = ("echo_memory", "inlet", ids.user_id, ids.chat_id) if ids.chat_id else None

        def invariants(stop: compression_costs.StopCheck) -> list[str]:
            if not _all_dicts(self._messages):
                return []
            return [link.invariant for link in self._costs.prepare(self._messages, key, stop).turns.links]

        own = await compression_costs.off_loop(len(self._messages), invariants)
        covered: tuple[str, ...] = ()
        text = ""
        summary = memory_context.summary_of(self._body)
        if summary is not None and self._store is not None and ids.user_id:
            row = await self._store.conversations.summary(ids.user_id, summary)
            if row is not None:
                covered, text = row.refs, row.summary.text
        return memory_context.held(own, covered, text)


def _all_dicts(messages: Sequence[object]) -> bool:
    return set(map(type, messages)) <= {dict} or all(isinstance(m, dict) for m in messages)


def _last_user(messages: Sequence[Mapping[str, Any]]) -> int | None:
    return next(
        (i for i in range(len(messages) - 1, -1, -1) if _is_user(messages[i])),
        None,
    )


def _is_user(message: object) -> bool:
    return isinstance(message, Mapping) and msgs.role_of(message) == "user"


def _earlier_user_texts(messages: Sequence[Mapping[str, Any]], position: int, count: int) -> list[str]:
    """The texts of the `count` user messages before `position`, newest first (a bounded walk back)."""
    texts: list[str] = []
    for index in range(position - 1, -1, -1):
        if len(texts) >= count:
            break
        if _is_user(messages[index]):
            texts.append(msgs.content_text(messages[index].get("content")))
    return texts


def _with_block(content: object, block: str) -> object:
    """The user message's content with the memories block in front (an earlier block replaced, so a
    second pass of the filter, through the Function and Pipelines both, does not stack them)."""
    if isinstance(content, list):
        parts = [
            p
            for p in content
            if not (
                isinstance(p, Mapping) and isinstance(p.get("text"), str) and _LEADING_BLOCK.match(p["text"])
            )
        ]
        return [{"type": "text", "text": block}, *parts]
    text = content if isinstance(content, str) else ""
    return f"{block}\n\n{_LEADING_BLOCK.sub('', text, count=1)}"


def _language(ctx: base.HookContext) -> str | None:
    language = ctx.user.get("language") if isinstance(ctx.user, Mapping) else None
    return language if isinstance(language, str) else None
