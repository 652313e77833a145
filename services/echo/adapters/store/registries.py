"""The model's registries (migration 0011): its plans and its code entries, per user and chat.

The tool server's `save_plan` / `update_plan` / `commit_code` write them, the model reads them back
with `list_plans` / `read_code` / `list_code`, and the context filter lists them every turn in the
AEC block (`snapshot`, bounded). Every statement filters on user_id and chat_id (DESIGN §7): another
user's or another chat's plan is not found, never shown.

Forgetting: ``forget`` deletes every plan and code entry of a user (``echo.capabilities.memory.forgetting``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from echo.adapters.store import pool, queries
from echo.domain import aec
from echo.ports import store as store_port

__all__ = ["SNAPSHOT_LIMIT", "CodeEntry", "Plan", "Registries", "new_plan_id"]

# The values and limits live in the port (re-exported here, so `registries.Plan` still works).
SNAPSHOT_LIMIT = store_port.SNAPSHOT_LIMIT
LIST_LIMIT = store_port.LIST_LIMIT
Plan = store_port.Plan
CodeEntry = store_port.CodeEntry
new_plan_id = store_port.new_plan_id


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.adapters.store", "registries.sql")


def _plan(row: pool.Record) -> Plan:
    return Plan(
        id=row["plan_id"],
        goal=row["goal"],
        status=row["status"],
        model=row["model"],
        steps=tuple(str(step) for step in row["steps"] or ()),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


def _code_entry(row: pool.Record) -> CodeEntry:
    return CodeEntry(
        id=row["entry_id"],
        lang=row["lang"],
        lines=int(row["lines"]),
        last_commit=row["last_commit"],
        version=int(row["version"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        content=row.get("content"),
    )


def _count(status: str) -> int:
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class Registries(store_port.RegistryStore):
    """Plans and code entries of one tenant (the store's schema)."""

    def __init__(self, store: pool.Store) -> None:
        self.store = store

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
    ) -> Plan:
        """Create a plan (a new id when none is given) or replace the one with this id; steps and
        model are kept when not given."""
        row = await self.store.fetchrow(
            _sql()["save_plan"],
            user_id,
            chat_id,
            plan_id or new_plan_id(),
            goal,
            status,
            model,
            None if steps is None else list(steps),
        )
        assert row is not None  # an upsert always returns its row
        return _plan(row)

    async def update_plan(
        self,
        user_id: str,
        chat_id: str,
        plan_id: str,
        *,
        goal: str | None = None,
        status: str | None = None,
        steps: Sequence[str] | None = None,
    ) -> Plan | None:
        """Change what is given; None when this user has no such plan in this chat."""
        row = await self.store.fetchrow(
            _sql()["update_plan"],
            user_id,
            chat_id,
            plan_id,
            goal,
            status,
            None if steps is None else list(steps),
        )
        return None if row is None else _plan(row)

    async def get_plan(self, user_id: str, chat_id: str, plan_id: str) -> Plan | None:
        row = await self.store.fetchrow(_sql()["get_plan"], user_id, chat_id, plan_id)
        return None if row is None else _plan(row)

    async def list_plans(self, user_id: str, chat_id: str, *, limit: int = LIST_LIMIT) -> list[Plan]:
        """The `limit` most recently updated plans of the chat, in the order they were made."""
        rows = await self.store.fetch(_sql()["list_plans"], user_id, chat_id, limit)
        return [_plan(row) for row in rows]

    async def commit_code(
        self, user_id: str, chat_id: str, entry_id: str, *, lang: str, content: str, message: str
    ) -> CodeEntry:
        """Store a code entry's new content (version 1, or one up); its lines are counted here."""
        row = await self.store.fetchrow(
            _sql()["commit_code"],
            user_id,
            chat_id,
            entry_id,
            lang,
            content,
            aec.count_lines(content),
            message,
        )
        assert row is not None  # an upsert always returns its row
        return _code_entry(row)

    async def read_code(self, user_id: str, chat_id: str, entry_id: str) -> CodeEntry | None:
        row = await self.store.fetchrow(_sql()["read_code"], user_id, chat_id, entry_id)
        return None if row is None else _code_entry(row)

    async def list_code(self, user_id: str, chat_id: str, *, limit: int = LIST_LIMIT) -> list[CodeEntry]:
        """The `limit` most recently committed entries of the chat (no content), oldest first."""
        rows = await self.store.fetch(_sql()["list_code"], user_id, chat_id, limit)
        return [_code_entry(row) for row in rows]

    async def snapshot(
        self, user_id: str, chat_id: str, *, limit: int = SNAPSHOT_LIMIT
    ) -> tuple[list[aec.PlanEntry], list[aec.CodexEntry]]:
        """What the AEC block lists: the `limit` most recently updated plans and code entries."""
        sql = _sql()
        async with self.store.connection() as connection:
            plans = await connection.fetch(sql["snapshot_plans"], user_id, chat_id, limit)
            code = await connection.fetch(sql["list_code"], user_id, chat_id, limit)
        return (
            [aec.PlanEntry(row["plan_id"], row["goal"], row["status"], row["model"]) for row in plans],
            [
                aec.CodexEntry(row["entry_id"], row["lang"], int(row["lines"]), row["last_commit"])
                for row in code
            ],
        )

    async def forget(self, user_id: str) -> dict[str, int]:
        """Delete every plan and code entry of a user, in one transaction; how many of each."""
        sql = _sql()
        async with self.store.transaction() as connection:
            plans = await connection.execute(sql["forget_plans"], user_id)
            code = await connection.execute(sql["forget_codex"], user_id)
        return {"plans": _count(plans), "codex_entries": _count(code)}
