"""The work of `echo_compression`'s outlet: store the branch, and past the threshold enqueue its summary.

One statement (`ConversationStore.outlet_statement`) stores the turns this process has not stored
yet for the user, records the chat's latest branch (referenced chats and manual compaction read it)
unless this process recorded that very head last (Open WebUI sends a turn's outlet twice), and,
when the whole branch reaches `compression_threshold_tokens`, looks up the summary valid for it.
Then the branch is assembled as the next inlet will assemble it; when that still reaches the
threshold, one `summary` job is planned (`echo.domain.compression.planning`) and enqueued with its
messages in one transaction (`compression_jobs.enqueue_summary`, idempotent on the branch point).

Every step that walks the messages runs through `compression_costs.off_loop` (a worker thread for
`OFFLOAD_MESSAGES` messages or more). Store errors reach the filter, which reports them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from echo.adapters.store import conversations
from echo.capabilities import base
from echo.capabilities.compression import caches as caches_module
from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.compression import jobs as compression_jobs
from echo.capabilities.compression import payloads as compression_payloads
from echo.capabilities.compression import reporting
from echo.config import valves as valves_module
from echo.domain.compression import assembly, budgets, planning, selection
from echo.errors import ConfigError
from echo.ports import backends as backends_port
from echo.ports import store as store_port

__all__ = ["Branch", "Outlet"]

log = structlog.get_logger("echo.filters.compression")


@dataclasses.dataclass(frozen=True)
class Branch:
    """One outlet's branch (its messages unfolded, hashed and priced) and what it is judged under:
    the valves in force, the thresholds and assembly policy they give for the chat's model."""

    user_id: str
    chat_id: str | None
    messages: Sequence[Mapping[str, Any]]
    prepared: compression_costs.Prepared
    settings: valves_module.CompressionValves
    limits: budgets.Thresholds
    policy: assembly.AssemblyPolicy
    model: str | None
    base_model: str | None


@dataclasses.dataclass(frozen=True)
class _Planned:
    """An outlet's summary plan: the branch's assembled tokens, the plan, its job (or why the valves
    allow none) and the planned messages as stored."""

    tokens: int
    plan: planning.SummaryPlan
    job: compression_payloads.SummaryPayload | ConfigError
    messages: dict[str, dict[str, Any]]


class Outlet:
    """Stores branches and enqueues their summaries, with the filter's costs and memos."""

    def __init__(self, name: str, costs: compression_costs.Costs, caches: caches_module.Caches) -> None:
        self.name = name
        self.costs = costs
        self.caches = caches

    async def run(self, store: backends_port.Repositories, branch: Branch, ctx: base.HookContext) -> None:
        """Store the branch and, past the threshold, enqueue its summary job (see the module docstring)."""
        profile, turns = branch.prepared.profile, branch.prepared.turns
        # Even the whole branch below the threshold: no summary to look up.
        lookup = budgets.needs_summary(sum(profile.costs), branch.limits)
        row = await self._statement(store, branch, lookup)
        if not lookup:
            return
        previous = selection.select_summary(turns.hashes, [row.summary]) if row is not None else None

        def plan_summary() -> _Planned | None:
            """The summary to enqueue (None: none is due), from the branch as the inlet assembles it."""
            result = assembly.assemble(
                branch.messages,
                policy=branch.policy,
                summary=previous,
                counter=self.costs.count,
                kinds=profile.kinds,
                costs=profile.costs,
                groups=branch.prepared.groups,
                positions=turns.positions,
            )
            if not budgets.needs_summary(result.tokens_assembled, branch.limits):
                return None
            plan = planning.plan_summary(
                branch.messages,
                turns,
                keep_first=branch.settings.keep_first,
                keep_last=branch.settings.keep_last,
                previous=previous,
            )
            if plan is None:
                return None
            try:
                job = compression_jobs.summary_job(
                    plan,
                    turns,
                    branch.settings,
                    branch.messages,
                    model=branch.model,
                    base_model=branch.base_model,
                    user_id=branch.user_id,
                    chat_id=branch.chat_id,
                )
            except ConfigError as error:  # said on the loop, in the hook's log context
                return _Planned(result.tokens_assembled, plan, error, {})
            # The statement above stored the branch (or this process did before): the job's turns
            # are not sent again, a second encoding of thousands of rows on the loop for nothing.
            unstored = self.caches.unstored(
                store.tenant, branch.user_id, (link.invariant for link in turns.links[plan.start : plan.stop])
            )
            planned = compression_jobs.planned_messages(
                plan, turns, branch.messages, stored=lambda invariant: invariant not in unstored
            )
            return _Planned(result.tokens_assembled, plan, job, planned)

        planned = await compression_costs.off_loop(len(branch.messages), lambda stop: plan_summary())
        if planned is None:
            return
        if isinstance(planned.job, ConfigError):
            reporting.not_planned(self.name, planned.job, ctx)
            return
        job_id = await compression_jobs.enqueue_summary(
            store.transactions, store.conversations, store.jobs, planned.job, planned.messages
        )
        log.info(
            "summary_enqueued",
            job_id=job_id,
            tokens=planned.tokens,
            threshold=branch.limits.compression_threshold_tokens,
            turns=len(planned.plan.invariants),
            covered_hash=planned.plan.covered_hash[:12],
        )

    async def _statement(
        self, store: backends_port.Repositories, branch: Branch, lookup: bool
    ) -> store_port.SummaryRow | None:
        """The outlet's one statement (see the module docstring); the summary found when ``lookup``."""
        turns, messages = branch.prepared.turns, branch.messages
        tenant, user_id, chat_id = store.tenant, branch.user_id, branch.chat_id

        def new_rows() -> dict[str, dict[str, Any]]:
            new: dict[str, dict[str, Any]] = {}
            unstored = self.caches.unstored(tenant, user_id, (link.invariant for link in turns.links))
            for link, position in zip(turns.links, turns.positions, strict=True):
                if link.invariant in unstored and link.invariant not in new:
                    new[link.invariant] = conversations.stored_message(messages[position])
            return new

        new = await compression_costs.off_loop(len(turns), lambda stop: new_rows())
        head_key, head = (tenant, user_id, chat_id or ""), turns.hashes[-1]
        record = bool(chat_id) and self.caches.head(head_key) != head
        if not new and not record and not lookup:
            return None
        row = await store.conversations.outlet_statement(
            user_id,
            new,
            chat_id=chat_id if record else None,
            invariants=[link.invariant for link in turns.links] if record else (),
            head_hash=head,
            lookup=turns.hashes if lookup else (),
        )
        self.caches.remember(tenant, user_id, new)
        if record:
            self.caches.record_head(head_key, head)
        return row
