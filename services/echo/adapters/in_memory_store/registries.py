"""The model's registries in memory: ``echo.adapters.store.registries`` over ``Tables``.

Plans and code entries keyed by (user, chat, id): another user's or another chat's entry is not
found. Listings take the ``limit`` most recently updated entries and answer them in the order they
were made, as ``registries.sql`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from echo.adapters.in_memory_store import tables as tables_module
from echo.domain import aec
from echo.ports import store as store_port

__all__ = ["Registries"]

storable_arguments = tables_module.storable_arguments


def _plan(plan_id: str, record: tables_module.PlanRecord) -> store_port.Plan:
    steps = tables_module.loaded(record.steps)
    return store_port.Plan(
        id=plan_id,
        goal=record.goal,
        status=record.status,
        model=record.model,
        steps=tuple(str(step) for step in steps or ()),
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _entry(entry_id: str, record: tables_module.CodeRecord, *, content: bool) -> store_port.CodeEntry:
    return store_port.CodeEntry(
        id=entry_id,
        lang=record.lang,
        lines=record.lines,
        last_commit=record.last_commit,
        version=record.version,
        created_at=record.created_at,
        updated_at=record.updated_at,
        content=record.content if content else None,
    )


class Registries(store_port.RegistryStore):
    """Plans and code entries of one tenant (``Tables``)."""

    def __init__(self, tables: tables_module.Tables) -> None:
        self.tables = tables

    def _recent_plans(self, user_id: str, chat_id: str, limit: int) -> list[store_port.Plan]:
        mine = [
            _plan(plan_id, record)
            for (owner, chat, plan_id), record in self.tables.plans.items()
            if (owner, chat) == (user_id, chat_id)
        ]
        recent = sorted(mine, key=lambda plan: (-plan.updated_at, plan.id))[:limit]
        return sorted(recent, key=lambda plan: (plan.created_at, plan.id))

    def _recent_code(self, user_id: str, chat_id: str, limit: int) -> list[store_port.CodeEntry]:
        mine = [
            _entry(entry_id, record, content=False)
            for (owner, chat, entry_id), record in self.tables.codex_entries.items()
            if (owner, chat) == (user_id, chat_id)
        ]
        recent = sorted(mine, key=lambda entry: (-entry.updated_at, entry.id))[:limit]
        return sorted(recent, key=lambda entry: (entry.created_at, entry.id))

    @storable_arguments
    async def save_plan(
        self,
        user_id: str,
        chat_id: str,
        *,
        goal: str,
        status: str,
        plan_id: str | None = None,
        steps: Sequence[str] | None = None,
        model: str | None = None,
    ) -> store_port.Plan:
        plan_id = plan_id or store_port.new_plan_id()
        key = (user_id, chat_id, plan_id)
        now = self.tables.now()
        known = self.tables.plans.get(key)
        if known is None:
            known = tables_module.PlanRecord(
                goal, status, model, tables_module.dumped(list(steps or ())), created_at=now, updated_at=now
            )
            self.tables.plans[key] = known
        else:
            known.goal, known.status, known.updated_at = goal, status, now
            if model is not None:
                known.model = model
            if steps is not None:
                known.steps = tables_module.dumped(list(steps))
        return _plan(plan_id, known)

    @storable_arguments
    async def update_plan(
        self,
        user_id: str,
        chat_id: str,
        plan_id: str,
        *,
        goal: str | None = None,
        status: str | None = None,
        steps: Sequence[str] | None = None,
    ) -> store_port.Plan | None:
        known = self.tables.plans.get((user_id, chat_id, plan_id))
        if known is None:
            return None
        if goal is not None:
            known.goal = goal
        if status is not None:
            known.status = status
        if steps is not None:
            known.steps = tables_module.dumped(list(steps))
        known.updated_at = self.tables.now()
        return _plan(plan_id, known)

    @storable_arguments
    async def list_plans(
        self, user_id: str, chat_id: str, *, limit: int = store_port.LIST_LIMIT
    ) -> list[store_port.Plan]:
        return self._recent_plans(user_id, chat_id, limit)

    @storable_arguments
    async def commit_code(
        self, user_id: str, chat_id: str, entry_id: str, *, lang: str, content: str, message: str
    ) -> store_port.CodeEntry:
        key = (user_id, chat_id, entry_id)
        now = self.tables.now()
        lines = aec.count_lines(content)
        known = self.tables.codex_entries.get(key)
        if known is None:
            known = tables_module.CodeRecord(lang, content, lines, message, 1, created_at=now, updated_at=now)
            self.tables.codex_entries[key] = known
        else:
            known.lang, known.content, known.lines, known.last_commit = lang, content, lines, message
            known.version += 1
            known.updated_at = now
        return _entry(entry_id, known, content=False)  # as the upsert's RETURNING: no content

    @storable_arguments
    async def read_code(self, user_id: str, chat_id: str, entry_id: str) -> store_port.CodeEntry | None:
        known = self.tables.codex_entries.get((user_id, chat_id, entry_id))
        return None if known is None else _entry(entry_id, known, content=True)

    @storable_arguments
    async def list_code(
        self, user_id: str, chat_id: str, *, limit: int = store_port.LIST_LIMIT
    ) -> list[store_port.CodeEntry]:
        return self._recent_code(user_id, chat_id, limit)

    @storable_arguments
    async def snapshot(
        self, user_id: str, chat_id: str, *, limit: int = store_port.SNAPSHOT_LIMIT
    ) -> tuple[list[aec.PlanEntry], list[aec.CodexEntry]]:
        return (
            [
                aec.PlanEntry(p.id, p.goal, p.status, p.model)
                for p in self._recent_plans(user_id, chat_id, limit)
            ],
            [
                aec.CodexEntry(e.id, e.lang, e.lines, e.last_commit)
                for e in self._recent_code(user_id, chat_id, limit)
            ],
        )

    @storable_arguments
    async def forget(self, user_id: str) -> dict[str, int]:
        plans = tables_module.forget_rows(self.tables.plans, user_id)
        code = tables_module.forget_rows(self.tables.codex_entries, user_id)
        return {"plans": plans, "codex_entries": code}
