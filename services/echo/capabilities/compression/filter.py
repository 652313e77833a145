"""`echo_compression` (seed 002 v1.7.2): asynchronous, branch-aware context compression, the thin filter.

Inlet (no LLM call): the turns' chain (`echo.domain.compression.messages`, the current user message's files
from `body["files"]` merged in first), ONE indexed lookup of the newest summary valid for this branch
(`echo.adapters.store.conversations`), then `echo.domain.compression.assembly`: system messages in place, the
first
`keep_first` turns, the fenced summary, the uncovered tail (at least `keep_last`), tool outputs
trimmed, within `max_context_tokens` of the chat's model. Status events go to `ctx.events`: context
usage (`show_token_usage_status`, from `token_usage_status_threshold` %), a warning above 90 %, and
"summary applied". Open WebUI's background tasks (titles, queries: `metadata.task`) pass untouched.

Referenced chats (`files` entries of type `chat`, `echo.capabilities.compression.references`): each becomes
one
protected `<echo_reference>` block just before the current message (its stored summary, summary +
tail, the whole chat, or a summary made now: the one inlet that may wait on an LLM, at most
`reference_summary_wait_seconds`, asked for with `deadline_extension`), and leaves `files`.

Outlet (never waits on an LLM; the body comes back unchanged): the branch's messages are stored
once per user by invariant hash (Open WebUI's `output` items are unfolded into the tool-call
messages the inlet sees, so both sides hash the same turns) and recorded as the chat's latest branch
(`Conversations.record_head`: referenced chats and manual compaction read it); when the branch,
as the next inlet would assemble it, reaches `compression_threshold_tokens`, one `summary` job is
enqueued for the branch point (`echo.capabilities.compression.summary`), idempotent on `summary_job_key`: a
replayed
outlet adds nothing.

A summary job of the chat that gave up (`summary_fail_mode` silent skipped it, or raise dead-lettered
it) is told on the chat's next inlet, once: a warning event with the reason, read in the same
statement as the summary (`Conversations.inlet_lookup`), counted in
`echo_compression_summary_failures_shown_total`.

Failure policy (DESIGN §6): on a store error either hook returns the body unchanged, logs with the
chat id, counts `echo_compression_failures_total` and adds a warning event. Without a store (an app
built without backends) the inlet still trims to the budget and the outlet stores nothing.

Cost (`echo.capabilities.compression.costs`): hashing and pricing a message is cached per process (keyed
by its text), and each chat's previous request stands for the prefix the next one shares with it, so
a new turn costs its new messages plus the assembly; chats of `OFFLOAD_MESSAGES` messages or more are
worked on a worker thread (`compression_costs.off_loop`: every step that walks the messages, the
outlet's unfolding, the rows it stores and its summary plan included), so the event loop stays free
and the hook's deadline holds; work the hook no longer waits for stops. The outlet
makes one statement (new messages, the chat's head when it changed, the summary lookup) and looks no
summary up while the whole branch is below the threshold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import structlog

from echo.adapters.store import conversations, pool
from echo.adapters.store import errors as store_errors
from echo.capabilities import base
from echo.capabilities import events as events_module
from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.compression import jobs as compression_jobs
from echo.capabilities.compression import payloads as compression_payloads
from echo.capabilities.compression import references as references_filter
from echo.config import valves as valves_module
from echo.domain.compression import assembly, budgets, locales, planning, references, selection
from echo.domain.compression import messages as msgs
from echo.errors import ConfigError
from echo.queue import queue
from echo.support import metrics

__all__ = ["OFFLOAD_MESSAGES", "CompressionFilter", "Costs", "StoreProvider", "unfold_output_items"]

Costs = compression_costs.Costs

log = structlog.get_logger("echo.filters.compression")

StoreProvider = Callable[[], pool.Store | None]
"""The store of the running service, or None (no backends): asked on every call."""

OFFLOAD_MESSAGES = compression_costs.OFFLOAD_MESSAGES  # from this many messages, CPU work is off the loop
WARN_PERCENT = 90  # context usage above which a warning is shown whatever the valves (seed 002)
_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class _Planned:
    """An outlet's summary plan: the branch's assembled tokens, the plan, its job (or why the valves
    allow none) and the planned messages as stored."""

    tokens: int
    plan: planning.SummaryPlan
    job: compression_payloads.SummaryPayload | ConfigError
    messages: dict[str, dict[str, Any]]


def unfold_output_items(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The outlet's messages as the next inlet will send them: an assistant message whose `output`
    items hold tool calls becomes an assistant message with `tool_calls` per batch of calls, a `tool`
    message per result, and an assistant message with the text that follows (Open WebUI 0.12.4
    rebuilds history from `output` so; reasoning items are not part of it)."""
    unfolded: list[Mapping[str, Any]] = []
    for message in messages:
        items = message.get("output")
        if (
            msgs.role_of(message) == "assistant"
            and isinstance(items, list)
            and any(isinstance(item, Mapping) and item.get("type") == "function_call" for item in items)
        ):
            unfolded.extend(_from_output(items))
        else:
            unfolded.append(message)
    return unfolded


def _item_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            part["text"] for part in value if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def _from_output(items: Sequence[object]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []

    def flush() -> None:
        if texts or calls:
            message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
            if calls:
                message["tool_calls"] = list(calls)
            out.append(message)
        texts.clear()
        calls.clear()

    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            texts.append(_item_text(item.get("content")))
        elif kind == "function_call":
            call_id = item.get("call_id") or item.get("id") or ""
            function = {"name": item.get("name", ""), "arguments": item.get("arguments", "")}
            calls.append({"id": call_id, "type": "function", "function": function})
        elif kind == "function_call_output":
            flush()
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id", ""),
                    "content": _item_text(item.get("output")),
                }
            )
    flush()
    return out


def _all_dicts(messages: Sequence[object]) -> bool:
    return set(map(type, messages)) == {dict} or all(isinstance(m, dict) for m in messages)


def _with_current_files(messages: list[dict[str, Any]], files: object) -> list[dict[str, Any]]:
    """`messages` with the inlet's `body["files"]` merged into the last user message (for hashing)."""
    if not isinstance(files, list) or not files:
        return messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if msgs.role_of(message) == "user":
            own = message.get("files")
            merged = [*(own if isinstance(own, list) else ()), *files]
            return [*messages[:index], {**message, "files": merged}, *messages[index + 1 :]]
    return messages


class CompressionFilter:
    id = "echo_compression"
    name = "ECHO compression"
    priority = 10
    description = (
        "Asynchronous, branch-aware context compression (seed 002 v1.7.2). Inlet: injects the newest "
        "summary valid for the current branch (fenced as history), keeps system messages, the first "
        "keep_first and last keep_last messages, trims long tool outputs and fits max_context_tokens. "
        "Outlet: stores the branch and, past compression_threshold_tokens, queues a background summary."
    )

    def __init__(
        self,
        store: StoreProvider | None = None,
        costs: Costs | None = None,
        openwebui: references_filter.OpenWebUIProvider | None = None,
    ) -> None:
        self._store_provider: StoreProvider = store or (lambda: None)
        self._openwebui_provider: references_filter.OpenWebUIProvider = openwebui or (lambda: None)
        self.costs = costs or Costs()
        self._ports: tuple[pool.Store, conversations.Conversations, queue.JobQueue] | None = None
        self._remembered: dict[tuple[str, str, str], None] = {}
        self._heads: dict[tuple[str, str, str], str] = {}  # (schema, user, chat) -> head hash recorded
        self._locales: dict[tuple[str, ...], str] = {}
        self._outlets: dict[tuple[str, str, str], tuple[str, str, str | None, str | None]] = {}
        self._base_models: dict[str, str] = {}

    # -- ports ---------------------------------------------------------------------------------

    def _stores(self) -> tuple[pool.Store, conversations.Conversations, queue.JobQueue] | None:
        store = self._store_provider()
        if store is None:
            return None
        if self._ports is None or self._ports[0] is not store:
            self._ports = (store, conversations.Conversations(store), queue.JobQueue(store))
        return self._ports

    def _locale(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """`locales.detect_locale` of the latest user texts, cached by those texts."""
        texts = tuple(compression_jobs.latest_user_texts(messages))
        found = self._locales.get(texts)
        if found is None:
            if len(self._locales) >= 10_000:
                self._locales.clear()
            found = self._locales[texts] = locales.detect_locale(list(texts))
        return found

    def _prefix_key(self, ctx: base.HookContext) -> tuple[str, str, str, str] | None:
        """Under which key `Costs.prepare` keeps this request for the chat's next one (None: no chat)."""
        if not ctx.ids.chat_id or not ctx.ids.user_id:
            return None
        store = self._store_provider()
        return ctx.phase, store.schema if store is not None else "", ctx.ids.user_id, ctx.ids.chat_id

    async def _cpu(self, size: int, work: Callable[[], _T]) -> _T:
        return await compression_costs.off_loop(size, lambda stop: work())

    @staticmethod
    def _valves(ctx: base.HookContext) -> valves_module.CompressionValves:
        settings = ctx.valves
        return (
            settings
            if isinstance(settings, valves_module.CompressionValves)
            else valves_module.CompressionValves()
        )

    def _models(self, body: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """The chat's model and its base model (custom models inherit thresholds): the inlet's
        metadata names the base model; the outlet has none, so the inlet's answer is remembered."""
        model = body.get("model") if isinstance(body.get("model"), str) else None
        metadata = body.get("metadata")
        info = metadata.get("model") if isinstance(metadata, Mapping) else None
        info = info.get("info") if isinstance(info, Mapping) else None
        base_model = info.get("base_model_id") if isinstance(info, Mapping) else None
        if model and isinstance(base_model, str) and base_model:
            if len(self._base_models) >= 10_000:
                self._base_models.clear()
            self._base_models[model] = base_model
            return model, base_model
        return model, self._base_models.get(model) if model else None

    @staticmethod
    def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        if len(messages) < OFFLOAD_MESSAGES and not _all_dicts(messages):
            return None
        return messages  # a long list is checked off the loop, by the step that walks it first

    def _store_failed(self, ctx: base.HookContext, error: store_errors.StoreError) -> None:
        metrics.COMPRESSION_FAILURES.labels(ctx.phase, "store").inc()
        reason = store_errors.describe(error, "the summary store")
        log.warning(
            "compression_store_failed",
            phase=ctx.phase,
            error=str(error),
            reason=reason,
            error_kind=type(error).__name__,
            returned="body unchanged",
        )
        ctx.events.append(
            events_module.StatusEvent(
                f"{self.name}: {reason}; the conversation was sent as it is",
                "warning",
            )
        )

    def _summary_failed(self, failure: conversations.SummaryFailure, ctx: base.HookContext) -> None:
        metrics.COMPRESSION_SUMMARY_FAILURES_SHOWN.labels(failure.reason).inc()
        times = f" ({failure.failures} times)" if failure.failures > 1 else ""
        log.warning(
            "summary_failure_shown", reason=failure.reason, detail=failure.detail, failures=failure.failures
        )
        ctx.events.append(
            events_module.StatusEvent(
                f"{self.name}: the summary of the earlier conversation failed{times} ({failure.detail}); "
                "this turn goes on without it",
                "warning",
            )
        )

    # -- inlet ---------------------------------------------------------------------------------

    def deadline_extension(self, body: Mapping[str, Any], ctx: base.HookContext) -> float:
        """Seconds to add to the inlet's deadline for this call: `reference_summary_wait_seconds`
        when the body references chats and a store can summarise them, else 0 (the one inlet that
        may wait on an LLM, seed 002; the hook runner asks before it starts the clock)."""
        if ctx.phase != "inlet" or ctx.ids.task or self._store_provider() is None:
            return 0.0
        metadata = body.get("metadata")
        found = references.chat_references(
            body.get("files"), metadata.get("files") if isinstance(metadata, Mapping) else None
        )
        return float(self._valves(ctx).reference_summary_wait_seconds) if found else 0.0

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = self._messages(body)
        if ctx.ids.task or messages is None:
            return body
        settings = self._valves(ctx)
        model, base_model = self._models(body)
        limits = budgets.thresholds_for(settings, model, base_model)
        policy = assembly.AssemblyPolicy.from_valves(settings, limits)
        key = self._prefix_key(ctx)

        def prepare(stop: compression_costs.StopCheck) -> compression_costs.Prepared | None:
            if not _all_dicts(messages):
                return None
            hashed = _with_current_files(messages, body.get("files"))  # no kind nor cost changes
            return self.costs.prepare(hashed, key, stop)

        found_prepared = await compression_costs.off_loop(len(messages), prepare)
        if found_prepared is None:
            return body
        prepared = found_prepared
        profile, turns = prepared.profile, prepared.turns
        row: conversations.SummaryRow | None = None
        ports = self._stores()
        if ports is not None and ctx.ids.user_id and len(turns):
            try:
                found = await ports[1].inlet_lookup(ctx.ids.user_id, turns.hashes, ctx.ids.chat_id)
            except store_errors.StoreError as error:
                self._store_failed(ctx, error)
                return body
            row = found.summary
            if found.failure is not None:
                self._summary_failed(found.failure, ctx)
        chosen = selection.select_summary(turns.hashes, [row.summary]) if row is not None else None
        locale = row.locale if row is not None and chosen is not None else None
        applied = await self._references(body, messages, ctx, settings, limits, model, base_model, locale)
        sent = messages
        if applied is not None and applied.resolved:  # protected blocks: kept whole, out of any summary
            sent = references_filter.insert_blocks(
                messages, [item.block.message for item in applied.resolved]
            )

        def assemble() -> tuple[assembly.Assembly, list[dict[str, Any]] | None]:
            """The assembly, and the messages to answer (None: the request's own, unchanged)."""
            found = locale or self._locale(messages)
            if sent is messages:
                known, groups = profile, prepared.groups
            else:
                known, groups = self.costs.profile(sent), None
            result = assembly.assemble(
                sent,
                policy=policy,
                summary=chosen,
                locale=found,
                counter=self.costs.count,
                kinds=known.kinds,
                costs=known.costs,
                groups=groups,
                positions=turns.positions if groups is not None else None,
            )
            unchanged = len(result.messages) == len(messages) and all(
                new is old for new, old in zip(result.messages, messages, strict=True)
            )
            if unchanged and not (applied is not None and applied.resolved):
                return result, None
            return result, [dict(message) for message in result.messages]

        result, answered = await self._cpu(len(messages), assemble)
        self._report(result, limits, settings, ctx)
        if applied is not None:
            ctx.events.extend(applied.events)
            if applied.resolved:
                new = references_filter.strip_files(body, applied.taken)
                return {**new, "messages": answered}
        if answered is None:
            return body
        return {**body, "messages": answered}

    async def _references(
        self,
        body: Mapping[str, Any],
        messages: Sequence[Mapping[str, Any]],
        ctx: base.HookContext,
        settings: valves_module.CompressionValves,
        limits: budgets.Thresholds,
        model: str | None,
        base_model: str | None,
        locale: str | None,
    ) -> references_filter.Applied | None:
        """The referenced chats of this request (`files` entries of type `chat`), resolved
        (`echo.capabilities.compression.references`); None when there are none or no store to read them
        from."""
        metadata = body.get("metadata")
        found = references.chat_references(
            body.get("files"), metadata.get("files") if isinstance(metadata, Mapping) else None
        )
        ports = self._stores()
        if not found or ports is None or not ctx.ids.user_id:
            return None
        request_tokens = sum(msgs.message_tokens(message, self.costs.count) for message in messages)
        resolver = references_filter.Resolver(
            *ports,
            self._openwebui_provider(),
            turns_of=lambda turn_messages: self.costs.turns(turn_messages, msgs.kinds_of(turn_messages)),
            unfold=unfold_output_items,
            counter=self.costs.count,
        )
        return await resolver.resolve_all(
            found,
            user_id=ctx.ids.user_id,
            budget=references.reference_budget(limits.max_context_tokens, request_tokens, len(found)),
            settings=settings,
            model=model,
            base_model=base_model,
            locale=locale or self._locale(messages),
            deadline=ctx.deadline,
            chat_id=ctx.ids.chat_id,
        )

    def _report(
        self,
        result: assembly.Assembly,
        limits: budgets.Thresholds,
        settings: valves_module.CompressionValves,
        ctx: base.HookContext,
    ) -> None:
        metrics.COMPRESSION_TOKENS.labels("before").observe(result.tokens_before)
        metrics.COMPRESSION_TOKENS.labels("after").observe(result.tokens_after)
        for action, count in (
            ("trimmed_tool_output", result.trimmed_tool_outputs),
            ("folded", result.folded),
            ("dropped_group", result.dropped_groups),
            ("dropped_summary", int(result.dropped_summary)),
            ("over_budget", int(result.over_budget)),
        ):
            if count:
                metrics.COMPRESSION_REDUCTIONS.labels(action).inc(count)
        if result.summary_injected:
            metrics.COMPRESSION_SUMMARIES_REUSED.inc()
            ctx.events.append(
                events_module.StatusEvent(
                    f"Earlier conversation summarised: {result.covered_turns} messages stand as one summary "
                    f"(context {result.tokens_before:,} → {result.tokens_after:,} tokens)"
                )
            )
        usage = 100.0 * result.tokens_after / max(1, limits.max_context_tokens)
        usage_line = f"{result.tokens_after:,} / {limits.max_context_tokens:,} tokens ({usage:.0f}%)"
        if result.over_budget:
            ctx.events.append(
                events_module.StatusEvent(
                    f"Context over its limit: the current turn alone needs {usage_line}", "warning"
                )
            )
        elif usage > WARN_PERCENT:
            ctx.events.append(events_module.StatusEvent(f"Context almost full: {usage_line}", "warning"))
        elif settings.show_token_usage_status and usage >= settings.token_usage_status_threshold:
            ctx.events.append(events_module.StatusEvent(f"Context: {usage_line}"))
        (log.info if settings.debug_mode else log.debug)(
            "compression_inlet",
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            summary=result.summary.covered_hash[:12] if result.summary_injected and result.summary else None,
            covered_turns=result.covered_turns,
            trimmed=result.trimmed_tool_outputs,
            folded=result.folded,
            dropped_groups=result.dropped_groups,
            thresholds=limits.source,
        )

    # -- outlet --------------------------------------------------------------------------------

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = self._messages(body)
        ports = self._stores()
        user_id = ctx.ids.user_id
        if ports is None or not user_id or messages is None:
            return body
        settings = self._valves(ctx)
        model, base_model = self._models(body)
        limits = budgets.thresholds_for(settings, model, base_model)
        policy = assembly.AssemblyPolicy.from_valves(settings, limits)
        key = self._prefix_key(ctx)

        def prepare(
            stop: compression_costs.StopCheck,
        ) -> tuple[list[Mapping[str, Any]], compression_costs.Prepared] | None:
            if not _all_dicts(messages):
                return None
            unfolded = unfold_output_items(messages)
            return unfolded, self.costs.prepare(unfolded, key, stop)

        found = await compression_costs.off_loop(len(messages), prepare)
        if found is None or not len(found[1].turns):
            return body
        unfolded, prepared = found
        store = ports[0]
        # Open WebUI sends each turn's outlet twice (the second from /api/chat/completed): the same
        # branch under the same valves was handled here already.
        done_key = (store.schema, user_id, ctx.ids.chat_id or "")
        done = (prepared.turns.hashes[-1], settings.model_dump_json(), model, base_model)
        if ctx.ids.chat_id and self._outlets.get(done_key) == done:
            return body
        try:
            await self._outlet_work(
                ports, ctx, unfolded, prepared, settings, limits, policy, model, base_model
            )
        except store_errors.StoreError as error:
            self._store_failed(ctx, error)
            return body
        if ctx.ids.chat_id:
            if len(self._outlets) >= compression_costs.CACHE_ENTRIES:
                self._outlets.clear()
            self._outlets[done_key] = done
        return body

    async def _outlet_work(
        self,
        ports: tuple[pool.Store, conversations.Conversations, queue.JobQueue],
        ctx: base.HookContext,
        unfolded: Sequence[Mapping[str, Any]],
        prepared: compression_costs.Prepared,
        settings: valves_module.CompressionValves,
        limits: budgets.Thresholds,
        policy: assembly.AssemblyPolicy,
        model: str | None,
        base_model: str | None,
    ) -> None:
        """Store the branch and, past the threshold, enqueue its summary job (the outlet's work)."""
        store, conversation_store, jobs = ports
        user_id = ctx.ids.user_id or ""
        profile, turns = prepared.profile, prepared.turns
        # Even the whole branch below the threshold: no summary to look up.
        lookup = budgets.needs_summary(sum(profile.costs), limits)
        row = await self._outlet_statement(
            store, conversation_store, user_id, ctx.ids.chat_id, unfolded, turns, lookup
        )
        if not lookup:
            return
        previous = selection.select_summary(turns.hashes, [row.summary]) if row is not None else None

        def plan_summary() -> _Planned | None:
            """The summary to enqueue (None: none is due), from the branch as the inlet assembles it."""
            result = assembly.assemble(
                unfolded,
                policy=policy,
                summary=previous,
                counter=self.costs.count,
                kinds=profile.kinds,
                costs=profile.costs,
                groups=prepared.groups,
                positions=turns.positions,
            )
            if not budgets.needs_summary(result.tokens_assembled, limits):
                return None
            plan = planning.plan_summary(
                unfolded,
                turns,
                keep_first=settings.keep_first,
                keep_last=settings.keep_last,
                previous=previous,
            )
            if plan is None:
                return None
            try:
                job = compression_jobs.summary_job(
                    plan,
                    turns,
                    settings,
                    unfolded,
                    model=model,
                    base_model=base_model,
                    user_id=user_id,
                    chat_id=ctx.ids.chat_id,
                )
            except ConfigError as error:  # said on the loop, in the hook's log context
                return _Planned(result.tokens_assembled, plan, error, {})
            # The statement above stored the branch (or this process did before): the job's turns
            # are not sent again, a second encoding of thousands of rows on the loop for nothing.
            remembered, schema = self._remembered, store.schema
            planned = compression_jobs.planned_messages(
                plan, turns, unfolded, stored=lambda invariant: (schema, user_id, invariant) in remembered
            )
            return _Planned(result.tokens_assembled, plan, job, planned)

        planned = await self._cpu(len(unfolded), plan_summary)
        if planned is None:
            return
        if isinstance(planned.job, ConfigError):
            self._not_planned(planned.job, ctx)
            return
        job_id = await compression_jobs.enqueue_summary(
            store, conversation_store, jobs, planned.job, planned.messages
        )
        log.info(
            "summary_enqueued",
            job_id=job_id,
            tokens=planned.tokens,
            threshold=limits.compression_threshold_tokens,
            turns=len(planned.plan.invariants),
            covered_hash=planned.plan.covered_hash[:12],
        )

    async def _outlet_statement(
        self,
        store: pool.Store,
        conversation_store: conversations.Conversations,
        user_id: str,
        chat_id: str | None,
        messages: Sequence[Mapping[str, Any]],
        turns: msgs.Turns,
        lookup: bool,
    ) -> conversations.SummaryRow | None:
        """One statement (`Conversations.outlet_statement`): store the turns this process has not
        stored yet for this user, record the chat's latest branch (referenced chats and manual
        compaction read it) unless this process recorded that very head last (Open WebUI sends a
        turn's outlet twice), and, when ``lookup``, the summary valid for the branch."""

        def new_rows() -> dict[str, dict[str, Any]]:
            new: dict[str, dict[str, Any]] = {}
            remembered, schema = self._remembered, store.schema
            for link, position in zip(turns.links, turns.positions, strict=True):
                if (schema, user_id, link.invariant) not in remembered and link.invariant not in new:
                    new[link.invariant] = conversations.stored_message(messages[position])
            return new

        new = await self._cpu(len(turns), new_rows)
        head_key, head = (store.schema, user_id, chat_id or ""), turns.hashes[-1]
        record = bool(chat_id) and self._heads.get(head_key) != head
        if not new and not record and not lookup:
            return None
        row = await conversation_store.outlet_statement(
            user_id,
            new,
            chat_id=chat_id if record else None,
            invariants=[link.invariant for link in turns.links] if record else (),
            head_hash=head,
            lookup=turns.hashes if lookup else (),
        )
        if len(self._remembered) + len(new) > compression_costs.CACHE_ENTRIES:
            self._remembered.clear()
        self._remembered.update(dict.fromkeys((store.schema, user_id, invariant) for invariant in new))
        if record:
            if len(self._heads) >= compression_costs.CACHE_ENTRIES:
                self._heads.clear()
            self._heads[head_key] = head
        return row

    def _job(
        self,
        plan: planning.SummaryPlan,
        turns: msgs.Turns,
        settings: valves_module.CompressionValves,
        messages: Sequence[Mapping[str, Any]],
        model: str | None,
        base_model: str | None,
        user_id: str,
        ctx: base.HookContext,
    ) -> compression_payloads.SummaryPayload | None:
        try:
            return compression_jobs.summary_job(
                plan,
                turns,
                settings,
                messages,
                model=model,
                base_model=base_model,
                user_id=user_id,
                chat_id=ctx.ids.chat_id,
            )
        except ConfigError as error:
            self._not_planned(error, ctx)
            return None

    def _not_planned(self, error: ConfigError, ctx: base.HookContext) -> None:
        metrics.COMPRESSION_FAILURES.labels(ctx.phase, "config").inc()
        log.error("summary_not_planned", error=str(error))
        ctx.events.append(events_module.StatusEvent(f"{self.name}: no summary, {error}", "error"))
