"""`echo_compression` (seed 002 v1.7.2): asynchronous, branch-aware context compression, the thin filter.

Inlet (no LLM call): the turns' chain (`echo.domain.compression.messages`, the current user message's
files from `body["files"]` merged in first), ONE indexed lookup of the newest summary valid for this
branch (`ConversationStore.inlet_lookup`), then `echo.domain.compression.assembly`: system messages
in place, the first `keep_first` turns, the fenced summary, the uncovered tail (at least
`keep_last`), tool outputs trimmed, within `max_context_tokens` of the chat's model. A summary that
would cost as much as the turns it stands for is not used. The tokens the assembly freed are left to
the filters after it (`echo.domain.compression.allowance`, in `metadata`): what `echo_memory` recalls
of the chat itself fits in them, so the chat never costs more than it came in (with the AEC block);
memories of the user's other chats keep to their own budget. Status events go
to `ctx.events`: context usage (`show_token_usage_status`, from `token_usage_status_threshold` %), a
warning above 90 %, and "summary applied". Open WebUI's background tasks (titles, queries:
`metadata.task`) pass untouched.

Referenced chats (`files` entries of type `chat`, `echo.capabilities.compression.references`): each
becomes one protected `<echo_reference>` block just before the current message (its stored summary,
summary + tail, the whole chat, or a summary made now: the one inlet that may wait on an LLM, at most
`reference_summary_wait_seconds`, asked for with `deadline_extension`), and leaves `files`.

Outlet (never waits on an LLM; the body comes back unchanged; `echo.capabilities.compression.outlet`):
the branch's messages are stored once per user by invariant hash (Open WebUI's `output` items are
unfolded into the tool-call messages the inlet sees, `echo.domain.output_items`, so both sides hash
the same turns) and recorded as the chat's latest branch (`ConversationStore.record_head`:
referenced chats and manual compaction read it); when the branch, as the next inlet would assemble
it, reaches `compression_threshold_tokens`, one `summary` job is enqueued for the branch point
(`echo.capabilities.compression.summary`), idempotent on `summary_job_key`: a replayed outlet adds
nothing.

A summary job of the chat that gave up (`summary_fail_mode` silent skipped it, or raise dead-lettered
it) is told on the chat's next inlet, once: a warning event with the reason, read in the same
statement as the summary (`ConversationStore.inlet_lookup`), counted in
`echo_compression_summary_failures_shown_total`.

Failure policy (DESIGN §6, `echo.capabilities.compression.reporting`): on a store error either hook
returns the body unchanged, logs with the chat id, counts `echo_compression_failures_total` and adds
a warning event. The store, the job queue and Open WebUI's API come from the backends
(`echo.ports.backends`, asked on every call); without a store (an app built without backends) the
inlet still trims to the budget and the outlet stores nothing.

Cost (`echo.capabilities.compression.costs`): hashing and pricing a message is cached per process (keyed
by its text), and each chat's previous request stands for the prefix the next one shares with it, so
a new turn costs its new messages plus the assembly; chats of `OFFLOAD_MESSAGES` messages or more are
worked on a worker thread (`compression_costs.off_loop`: every step that walks the messages, the
outlet's unfolding, the rows it stores and its summary plan included), so the event loop stays free
and the hook's deadline holds; work the hook no longer waits for stops. What the filter remembers
between calls is in `echo.capabilities.compression.caches`. The outlet (`…compression.outlet`)
makes one statement (new messages, the chat's head when it changed, the summary lookup) and looks no
summary up while the whole branch is below the threshold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.capabilities import base
from echo.capabilities.compression import caches as caches_module
from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.compression import outlet as outlet_module
from echo.capabilities.compression import references as references_filter
from echo.capabilities.compression import reporting
from echo.config import valves as valves_module
from echo.domain.compression import allowance, assembly, budgets, references, selection
from echo.domain.compression import messages as msgs
from echo.domain.memory import context as memory_context
from echo.ports import backends as backends_port
from echo.ports import store as store_port

__all__ = ["OFFLOAD_MESSAGES", "CompressionFilter", "Costs"]

Costs = compression_costs.Costs

OFFLOAD_MESSAGES = compression_costs.OFFLOAD_MESSAGES  # from this many messages, CPU work is off the loop


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


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    if len(messages) < OFFLOAD_MESSAGES and not _all_dicts(messages):
        return None
    return messages  # a long list is checked off the loop, by the step that walks it first


def _valves(ctx: base.HookContext) -> valves_module.CompressionValves:
    settings = ctx.valves
    return (
        settings
        if isinstance(settings, valves_module.CompressionValves)
        else valves_module.CompressionValves()
    )


@dataclass(frozen=True)
class _Terms:
    """What one call is judged under: the valves in force, the chat's model and its base model, and
    the thresholds they give."""

    settings: valves_module.CompressionValves
    model: str | None
    base_model: str | None
    limits: budgets.Thresholds


def _chat_references(body: Mapping[str, Any]) -> tuple[references.ChatReference, ...]:
    metadata = body.get("metadata")
    return references.chat_references(
        body.get("files"), metadata.get("files") if isinstance(metadata, Mapping) else None
    )


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

    def __init__(self, backends: base.BackendsProvider | None = None, costs: Costs | None = None) -> None:
        self._backends = backends or base.no_backends
        self.costs = costs or Costs()
        self.caches = caches_module.Caches()
        self._outlet = outlet_module.Outlet(self.name, self.costs, self.caches)

    def _terms(self, body: Mapping[str, Any], ctx: base.HookContext) -> _Terms:
        settings = _valves(ctx)
        model, base_model = self.caches.models(body)
        return _Terms(settings, model, base_model, budgets.thresholds_for(settings, model, base_model))

    def _prefix_key(
        self, ctx: base.HookContext, store: backends_port.Repositories | None
    ) -> tuple[str, str, str, str] | None:
        """Under which key `Costs.prepare` keeps this request for the chat's next one (None: no chat)."""
        if not ctx.ids.chat_id or not ctx.ids.user_id:
            return None
        return ctx.phase, store.tenant if store is not None else "", ctx.ids.user_id, ctx.ids.chat_id

    # -- inlet ---------------------------------------------------------------------------------

    def deadline_extension(self, body: Mapping[str, Any], ctx: base.HookContext) -> float:
        """Seconds to add to the inlet's deadline for this call: `reference_summary_wait_seconds`
        when the body references chats and a store can summarise them, else 0 (the one inlet that
        may wait on an LLM, seed 002; the hook runner asks before it starts the clock)."""
        if ctx.phase != "inlet" or ctx.ids.task or self._backends().store is None:
            return 0.0
        return float(_valves(ctx).reference_summary_wait_seconds) if _chat_references(body) else 0.0

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = _messages(body)
        if ctx.ids.task or messages is None:
            return body
        backends = self._backends()
        store = backends.store
        terms = self._terms(body, ctx)
        policy = assembly.AssemblyPolicy.from_valves(terms.settings, terms.limits)
        key = self._prefix_key(ctx, store)

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
        row: store_port.SummaryRow | None = None
        if store is not None and ctx.ids.user_id and len(turns):
            try:
                found = await store.conversations.inlet_lookup(ctx.ids.user_id, turns.hashes, ctx.ids.chat_id)
            except store_port.StoreError as error:
                reporting.store_failed(self.name, ctx, error)
                return allowance.with_room(body, 0)  # nothing freed: nothing of the chat is added
            row = found.summary
            if found.failure is not None:
                reporting.summary_failure_shown(self.name, found.failure, ctx)
        chosen = selection.select_summary(turns.hashes, [row.summary]) if row is not None else None
        locale = row.locale if row is not None and chosen is not None else None
        applied = await self._references(body, messages, ctx, backends, terms, locale)
        sent = messages
        if applied is not None and applied.resolved:  # protected blocks: kept whole, out of any summary
            sent = references_filter.insert_blocks(
                messages, [item.block.message for item in applied.resolved]
            )

        def assemble() -> tuple[assembly.Assembly, list[dict[str, Any]] | None]:
            """The assembly, and the messages to answer (None: the request's own, unchanged)."""
            found = locale or self.caches.locale(messages)
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

        result, answered = await compression_costs.off_loop(len(messages), lambda stop: assemble())
        reporting.assembled(result, terms.limits, terms.settings, ctx)
        room = allowance.room(result.tokens_before, result.tokens_after, terms.limits.max_context_tokens)
        if result.summary_injected and result.summary is not None:  # echo_memory recalls none of its turns
            body = memory_context.with_summary(body, result.summary.covered_hash)
        if applied is not None:
            ctx.events.extend(applied.events)
            if applied.resolved:
                new = references_filter.strip_files(body, applied.taken)
                return allowance.with_room({**new, "messages": answered}, room)
        if answered is None:
            return allowance.with_room(body, room)
        return allowance.with_room({**body, "messages": answered}, room)

    async def _references(
        self,
        body: Mapping[str, Any],
        messages: Sequence[Mapping[str, Any]],
        ctx: base.HookContext,
        backends: backends_port.Backends,
        terms: _Terms,
        locale: str | None,
    ) -> references_filter.Applied | None:
        """The referenced chats of this request (`files` entries of type `chat`), resolved
        (`echo.capabilities.compression.references`); None when there are none or no store to read
        them from."""
        found = _chat_references(body)
        if not found or backends.store is None or not ctx.ids.user_id:
            return None
        request_tokens = sum(msgs.message_tokens(message, self.costs.count) for message in messages)
        resolver = references_filter.Resolver(
            backends.store,
            backends.openwebui,
            turns_of=lambda turn_messages: self.costs.turns(turn_messages, msgs.kinds_of(turn_messages)),
            counter=self.costs.count,
        )
        request = references_filter.Request(
            user_id=ctx.ids.user_id,
            chat_id=ctx.ids.chat_id,
            budget=references.reference_budget(terms.limits.max_context_tokens, request_tokens, len(found)),
            settings=terms.settings,
            model=terms.model,
            base_model=terms.base_model,
            locale=locale or self.caches.locale(messages),
            deadline=ctx.deadline,
        )
        return await resolver.resolve_all(found, request)

    # -- outlet --------------------------------------------------------------------------------

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = _messages(body)
        store = self._backends().store
        user_id = ctx.ids.user_id
        if store is None or not user_id or messages is None:
            return body
        terms = self._terms(body, ctx)
        key = self._prefix_key(ctx, store)

        found = await compression_costs.prepared_branch(self.costs, messages, key)
        if found is None or not len(found[1].turns):
            return body
        unfolded, prepared = found
        # Open WebUI sends each turn's outlet twice (the second from /api/chat/completed): the same
        # branch under the same valves was handled here already.
        done_key = (store.tenant, user_id, ctx.ids.chat_id or "")
        done = (prepared.turns.hashes[-1], terms.settings.model_dump_json(), terms.model, terms.base_model)
        if ctx.ids.chat_id and self.caches.outlet_done(done_key, done):
            return body
        branch = outlet_module.Branch(
            user_id=user_id,
            chat_id=ctx.ids.chat_id,
            messages=unfolded,
            prepared=prepared,
            settings=terms.settings,
            limits=terms.limits,
            policy=assembly.AssemblyPolicy.from_valves(terms.settings, terms.limits),
            model=terms.model,
            base_model=terms.base_model,
        )
        try:
            await self._outlet.run(store, branch, ctx)
        except store_port.StoreError as error:
            reporting.store_failed(self.name, ctx, error)
            return body
        if ctx.ids.chat_id:
            self.caches.mark_outlet(done_key, done)
        return body
