"""The model's registries on a real PostgreSQL (echo.adapters.store.registries): plans and code entries per
user and chat, versions, the bounded AEC snapshot, isolation, and forgetting."""

from __future__ import annotations

import asyncio

import pytest

from echo.adapters.store import errors as store_errors
from echo.adapters.store import pool, registries
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities.backends import on_store
from echo.capabilities.memory import forgetting
from echo.domain import aec


async def test_a_plan_is_created_with_a_generated_id_then_saved_and_updated(store: pool.Store) -> None:
    book = registries.Registries(store)
    made = await book.save_plan("u1", "c1", goal="Refactor the auth module", status="todo", model="MODEL_PRO")
    assert made.id.startswith("plan_")
    assert (made.goal, made.status, made.model, made.steps) == (
        "Refactor the auth module",
        "todo",
        "MODEL_PRO",
        (),
    )
    stepped = await book.save_plan(
        "u1", "c1", plan_id=made.id, goal="Refactor auth", status="in_progress", steps=["read", "split"]
    )
    assert (stepped.id, stepped.goal, stepped.status, stepped.steps) == (
        made.id,
        "Refactor auth",
        "in_progress",
        ("read", "split"),
    )
    assert stepped.model == "MODEL_PRO"  # kept when not given
    again = await book.save_plan("u1", "c1", plan_id=made.id, goal="Refactor auth", status="blocked")
    assert again.steps == ("read", "split")  # kept when not given
    assert again.created_at == made.created_at
    assert again.updated_at >= made.updated_at
    updated = await book.update_plan("u1", "c1", made.id, status="done")
    assert updated is not None
    assert (updated.goal, updated.status, updated.steps) == ("Refactor auth", "done", ("read", "split"))
    emptied = await book.update_plan("u1", "c1", made.id, steps=[])
    assert emptied is not None
    assert emptied.steps == ()
    assert await book.get_plan("u1", "c1", made.id) == emptied
    assert await book.update_plan("u1", "c1", "plan_nope", status="done") is None


async def test_a_named_plan_keeps_its_id_and_ids_differ_when_generated(store: pool.Store) -> None:
    book = registries.Registries(store)
    named = await book.save_plan("u1", "c1", plan_id="plan_abc", goal="g", status="todo")
    assert named.id == "plan_abc"
    first = await book.save_plan("u1", "c1", goal="a", status="todo")
    second = await book.save_plan("u1", "c1", goal="b", status="todo")
    assert len({named.id, first.id, second.id}) == 3
    assert [plan.id for plan in await book.list_plans("u1", "c1")] == ["plan_abc", first.id, second.id]


async def test_a_status_outside_the_schema_is_a_constraint_violation(store: pool.Store) -> None:
    with pytest.raises(store_errors.ConstraintViolation):
        await registries.Registries(store).save_plan("u1", "c1", goal="g", status="finished")


async def test_code_commits_count_lines_and_go_one_version_up(store: pool.Store) -> None:
    book = registries.Registries(store)
    first = await book.commit_code(
        "u1", "c1", "mon_script.py", lang="python", content="a = 1\nb = 2\n", message="feat: start"
    )
    assert (first.version, first.lines, first.last_commit, first.content) == (1, 2, "feat: start", None)
    second = await book.commit_code(
        "u1", "c1", "mon_script.py", lang="python", content="a = 1\nb = 2\nc = 3", message="feat: add c"
    )
    assert (second.version, second.lines, second.last_commit) == (2, 3, "feat: add c")
    read = await book.read_code("u1", "c1", "mon_script.py")
    assert read is not None
    assert (read.content, read.version, read.lines, read.lang) == ("a = 1\nb = 2\nc = 3", 2, 3, "python")
    empty = await book.commit_code(
        "u1", "c1", "empty.txt", lang="text", content="", message="chore: placeholder"
    )
    assert empty.lines == 0
    listed = await book.list_code("u1", "c1")
    assert [(entry.id, entry.version, entry.content) for entry in listed] == [
        ("mon_script.py", 2, None),
        ("empty.txt", 1, None),
    ]
    assert await book.read_code("u1", "c1", "nope.py") is None


async def test_concurrent_commits_of_one_entry_lose_no_version(store: pool.Store) -> None:
    book = registries.Registries(store)
    await asyncio.gather(
        *(
            book.commit_code("u1", "c1", "f.py", lang="python", content=f"v{i}", message=f"m{i}")
            for i in range(8)
        )
    )
    read = await book.read_code("u1", "c1", "f.py")
    assert read is not None
    assert read.version == 8


async def test_another_user_or_chat_never_sees_a_plan_or_an_entry(store: pool.Store) -> None:
    book = registries.Registries(store)
    plan = await book.save_plan("u1", "c1", plan_id="p", goal="mine", status="todo")
    await book.commit_code("u1", "c1", "secret.py", lang="python", content="KEY = 1", message="m")
    for user, chat in (("u2", "c1"), ("u1", "c2")):
        assert await book.get_plan(user, chat, plan.id) is None
        assert await book.update_plan(user, chat, plan.id, status="done") is None
        assert await book.list_plans(user, chat) == []
        assert await book.read_code(user, chat, "secret.py") is None
        assert await book.list_code(user, chat) == []
        assert await book.snapshot(user, chat) == ([], [])
    # The same ids in another user's chat are their own rows.
    theirs = await book.save_plan("u2", "c1", plan_id="p", goal="theirs", status="done")
    assert theirs.goal == "theirs"
    mine = await book.get_plan("u1", "c1", "p")
    assert mine is not None
    assert (mine.goal, mine.status) == ("mine", "todo")


async def test_the_snapshot_lists_what_the_aec_block_shows_bounded_to_the_most_recent(
    store: pool.Store,
) -> None:
    book = registries.Registries(store)
    await book.save_plan(
        "u1",
        "c1",
        plan_id="plan_abc",
        goal="Refactorer le module d'auth",
        status="in_progress",
        model="MODEL_PRO",
    )
    await book.commit_code(
        "u1", "c1", "mon_script.py", lang="python", content="x\n" * 142, message="feat: add error handler"
    )
    await book.commit_code(
        "u1", "c1", "config.yaml", lang="yaml", content="k: v\n" * 38, message="chore: update timeout"
    )
    plans, codex = await book.snapshot("u1", "c1")
    assert plans == [aec.PlanEntry("plan_abc", "Refactorer le module d'auth", "in_progress", "MODEL_PRO")]
    assert codex == [
        aec.CodexEntry("mon_script.py", "python", 142, "feat: add error handler"),
        aec.CodexEntry("config.yaml", "yaml", 38, "chore: update timeout"),
    ]
    for i in range(5):
        await book.save_plan("u1", "c1", plan_id=f"p{i}", goal=f"g{i}", status="todo")
    await book.update_plan("u1", "c1", "plan_abc", status="done")  # the most recently updated now
    plans, codex = await book.snapshot("u1", "c1", limit=3)
    assert [plan.id for plan in plans] == ["plan_abc", "p3", "p4"]  # the 3 most recent, in creation order
    assert len(codex) == 2
    assert registries.SNAPSHOT_LIMIT == 50


async def test_forgetting_a_user_deletes_their_plans_and_code_only(store: pool.Store) -> None:
    book = registries.Registries(store)
    for user in ("quinn", "rosa"):
        await book.save_plan(user, "c1", goal="g", status="todo")
        await book.save_plan(user, "c2", goal="g", status="todo")
        await book.commit_code(user, "c1", "a.py", lang="python", content="1", message="m")
    parts = forgetting.builtin_forgetting(on_store(store), lambda: InMemoryVectorStore(dimension=4))
    done = await parts.forget("quinn")
    assert done.failed == {}
    assert done.deleted["registries"] == {"plans": 2, "codex_entries": 1}
    for table in ("plans", "codex_entries"):
        assert await store.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = 'quinn'") == 0
    assert len(await book.list_plans("rosa", "c1")) == 1
    assert len(await book.list_code("rosa", "c1")) == 1
    assert await book.forget("quinn") == {"plans": 0, "codex_entries": 0}  # idempotent
