"""Summary jobs of `echo_compression`: one way in for the outlet and for manual compaction.

Two callers enqueue a `summary` job (`echo.capabilities.compression.summary`): the outlet, when a branch
reaches `compression_threshold_tokens`, and a manual compaction (`POST /chats/{chat_id}/compact`,
`echoctl compact`), at once. Both build its payload with `summary_job` (`payloads.SummaryPayload`:
the valves in force, the summary window, the conversation's language) and commit it with
`enqueue_summary`: the planned messages and the job in one transaction, idempotent on
`planning.summary_job_key`, so a compaction and an outlet that plan the same branch point share one
job.

`compact` is the manual compaction itself: the chat's latest branch as the outlet last recorded it
(`Conversations.latest_branch`), its messages from the content-addressed store, the newest summary
valid for it, then `echo.domain.compression.compaction.plan_compaction`. It reads and writes the store only;
store errors (`echo.ports.store.StoreError`) and an invalid summary window (`ConfigError`) reach the
caller, which says so to its own client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from echo.adapters.store import conversations
from echo.capabilities.compression import payloads
from echo.config import thresholds
from echo.config import valves as valves_module
from echo.domain import kinds
from echo.domain.compression import budgets, compaction, locales, planning
from echo.domain.compression import messages as msgs
from echo.ports import backends as backends_port
from echo.ports import store as store_port

__all__ = ["Compacted", "compact", "enqueue_summary", "latest_user_texts", "planned_messages", "summary_job"]

log = structlog.get_logger("echo.filters.compression")

_LOCALE_SAMPLE = 4  # latest user messages the conversation's language is read from


def latest_user_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The latest user texts, newest first (what `locales.detect_locale` reads)."""
    texts = []
    for message in reversed(messages):
        if msgs.role_of(message) == "user":
            texts.append(msgs.content_text(message.get("content")))
            if len(texts) >= _LOCALE_SAMPLE:
                break
    return texts


def summary_job(
    plan: planning.SummaryPlan,
    turns: msgs.Turns,
    settings: valves_module.CompressionValves,
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str | None,
    base_model: str | None,
    user_id: str,
    chat_id: str | None,
) -> payloads.SummaryPayload:
    """The `summary` job of `plan` under the valves `settings`, for the chat's `model` (None: unknown,
    the worker's default model unless `summary_model` names one). `ConfigError` when the summary
    window breaks the 80% rule (`budgets.summary_window`)."""
    window = budgets.summary_window(settings, model, base_model)
    return payloads.SummaryPayload.planned(
        plan,
        user_id=user_id,
        parent=turns.hashes[plan.start - 1] if plan.start else None,
        model=settings.summary_model or (thresholds.normalise_model_id(model) if model else ""),
        window=window,
        style=settings.compression_style,
        max_share=settings.max_summary_share,
        temperature=settings.summary_temperature,
        fail_mode=settings.summary_fail_mode,
        locale=locales.detect_locale(latest_user_texts(messages)),
        chat_id=chat_id,
    )


def planned_messages(
    plan: planning.SummaryPlan,
    turns: msgs.Turns,
    messages: Sequence[Mapping[str, Any]],
    stored: Callable[[str], bool] | None = None,
) -> dict[str, dict[str, Any]]:
    """The planned turns as the store keeps them (invariant hash -> `stored_message`), but those
    `stored(invariant)` says the store holds already (the outlet that just stored the branch)."""
    return {
        link.invariant: conversations.stored_message(messages[position])
        for link, position in zip(turns.links[plan.start : plan.stop], plan.positions, strict=True)
        if stored is None or not stored(link.invariant)
    }


async def enqueue_summary(
    store: store_port.Transactions,
    conversation_store: store_port.ConversationStore,
    jobs: backends_port.Jobs,
    job: payloads.SummaryPayload,
    planned: Mapping[str, Mapping[str, Any]],
) -> int:
    """Store the `planned` messages and enqueue `job` in one transaction; the job's id (the existing
    job's when its branch point was enqueued before)."""
    async with store.transaction() as connection:
        await conversation_store.remember(job.user_id, planned, connection=connection)
        return await jobs.enqueue(
            kinds.SUMMARY, job.to_payload(), idempotency_key=job.key, connection=connection
        )


Outcome = Literal["queued", "summarised", "nothing", "unknown_chat", "incomplete"]


@dataclass(frozen=True)
class Compacted:
    """What `compact` did. `queued`: a summary job (`job_id`, `state`) covers turns `start + 1` to
    `stop` of `turns`; `summarised`: the summary keyed `covered_hash` already covers them;
    `nothing`: every turn stays verbatim; `unknown_chat`: no branch is recorded for this chat and
    user; `incomplete`: the branch names messages no longer stored. `reason` says it in words."""

    outcome: Outcome
    user_id: str
    chat_id: str
    reason: str
    turns: int | None = None
    job_id: int | None = None
    state: str | None = None
    start: int | None = None
    stop: int | None = None
    covered_hash: str | None = None
    covered_count: int | None = None

    def to_wire(self) -> dict[str, Any]:
        """The JSON answer of the route (and of `echoctl compact --json`): the fields that apply."""
        wire: dict[str, Any] = {
            "status": "already_summarised" if self.outcome == "summarised" else self.outcome,
            "chat_id": self.chat_id,
            "user_id": self.user_id,
            "detail": self.reason,
        }
        for name in ("turns", "job_id", "state", "start", "stop", "covered_hash", "covered_count"):
            value = getattr(self, name)
            if value is not None:
                wire[name] = value
        return wire


async def compact(
    store: backends_port.Repositories,
    *,
    user_id: str,
    chat_id: str,
    settings: valves_module.CompressionValves,
    model: str | None = None,
) -> Compacted:
    """Enqueue a summary of the chat's latest branch now, whatever its size (see the module docstring).

    `settings`: the `echo_compression` valves in force; `model`: the chat's model, for the summary
    window and, when `summary_model` is empty, the summary model (None: the worker's default).
    """
    conversation_store = store.conversations
    invariants = await conversation_store.latest_branch(user_id, chat_id)
    if invariants is None:
        return Compacted(
            "unknown_chat",
            user_id,
            chat_id,
            f"chat {chat_id!r} is unknown to ECHO for user {user_id!r}: no completed turn of it has "
            "reached echo_compression's outlet",
        )
    stored = await conversation_store.messages(user_id, invariants)
    try:
        branch = compaction.rebuild_branch(invariants, stored)
    except compaction.MissingMessages as error:
        # Only a partial forget can do this (forgetting a user drops the chat heads too).
        log.warning("compaction_branch_incomplete", chat_id=chat_id, missing=len(error.missing))
        return Compacted(
            "incomplete",
            user_id,
            chat_id,
            f"chat {chat_id!r} of user {user_id!r}: {error}; it cannot be summarised until its next turn",
        )
    turns = branch.turns
    row = await conversation_store.best_summary(user_id, turns.hashes) if len(turns) else None
    decided = compaction.plan_compaction(
        branch.messages,
        turns,
        keep_first=settings.keep_first,
        keep_last=settings.keep_last,
        previous=row.summary if row is not None else None,
    )
    if decided.plan is None:
        covering = decided.previous if decided.outcome == "summarised" else None
        return Compacted(
            "summarised" if covering is not None else "nothing",
            user_id,
            chat_id,
            decided.reason,
            turns=decided.turns,
            covered_hash=covering.covered_hash if covering is not None else None,
            covered_count=covering.covered_count if covering is not None else None,
        )
    plan = decided.plan
    job = summary_job(
        plan, turns, settings, branch.messages, model=model, base_model=None, user_id=user_id, chat_id=chat_id
    )
    jobs = store.jobs
    job_id = await enqueue_summary(
        store.transactions, conversation_store, jobs, job, planned_messages(plan, turns, branch.messages)
    )
    info = await jobs.get(job_id)
    state = info.state.value if info is not None else "done"  # swept by retention in between
    log.info(
        "summary_enqueued",
        reason="manual compaction",
        chat_id=chat_id,
        job_id=job_id,
        state=state,
        turns=len(plan.invariants),
        covered_hash=plan.covered_hash[:12],
    )
    return Compacted(
        "queued",
        user_id,
        chat_id,
        decided.reason,
        turns=decided.turns,
        job_id=job_id,
        state=state,
        start=plan.start,
        stop=plan.stop,
        covered_hash=plan.covered_hash,
        covered_count=plan.stop,
    )
