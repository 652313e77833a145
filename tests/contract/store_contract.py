"""The contract every adapter of the store port passes (saq style: subclass it, provide ``backend``).

``Backend`` gathers one tenant's repositories, typed by the port's Protocols, and two hooks on the
backend's job queue (``Memories.job_alive`` asks whether a job still exists). Each test starts from
an empty tenant; ``alice`` and ``bob`` share it, so every test also checks that one user never sees,
changes or forgets the other's rows.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from echo.domain import aec, chain, shadow
from echo.domain.attachments import routing
from echo.domain.memory import records
from echo.ports import store as store_port

ALICE, BOB = "alice", "bob"
WAIT = 5.0  # seconds any one wait of these tests may take


@dataclass
class Backend:
    conversations: store_port.ConversationStore
    memories: store_port.MemoryStore
    attachments: store_port.AttachmentStore
    registries: store_port.RegistryStore
    shadow: store_port.ShadowStore
    transactions: store_port.Transactions
    add_job: Callable[[], Awaitable[int]]
    """Add a job to the backend's queue; its id."""
    drop_job: Callable[[int], Awaitable[None]]
    """Delete a job (as forgetting its user does)."""
    other_shadow: Callable[[], store_port.ShadowStore]
    """The same tenant's shadow as another process sees it (no cache in common with ``shadow``)."""


def digest(name: object) -> str:
    """A 64-hex-digit hash standing for ``name`` (an invariant, a cumulative or a window key)."""
    return hashlib.sha256(str(name).encode()).hexdigest()


def branch(*names: object) -> list[str]:
    return [digest(name) for name in names]


def new_summary(
    user_id: str, covered: str, count: int, text: str = "summary", **kw: Any
) -> store_port.NewSummary:
    fields: dict[str, Any] = {
        "head_count": 0,
        "locale": "en",
        "model": "m",
        "provider": "p",
        "refs": [digest(f"ref{i}") for i in range(count)],
    }
    fields.update(kw)
    return store_port.NewSummary(
        user_id=user_id, covered_hash=covered, covered_count=count, text=text, **fields
    )


def message(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


def window(name: str, chat_id: str | None = "chat-1") -> records.WindowRef:
    return records.WindowRef(
        chat_id=chat_id, key=digest(name), invariants=(digest(name + "-m"),), message_ids=("m1",)
    )


def distilled(summary: str = "likes tea", memory_id: str = "pref-tea") -> records.Distilled:
    return records.Distilled(summary=summary, importance=3, memory_id=memory_id, tags=("drinks", "tea"))


def new_attachment(chat_id: str = "chat-1", content: str | None = "a", **kw: Any) -> store_port.NewAttachment:
    fields: dict[str, Any] = {
        "file_id": "file-1",
        "filename": "notes.txt",
        "mime_type": "text/plain",
        "mode": routing.Mode.RAG,
        "status": "pending",
        "size_bytes": 10,
        "pending_text": "the text",
    }
    fields.update(kw)
    sha = None if content is None else hashlib.sha256(content.encode()).hexdigest()
    return store_port.NewAttachment(chat_id=chat_id, content_sha256=sha, **fields)


NOW = 1_700_000_000.0


def payload(data: bytes, mime_type: str = "image/png") -> shadow.Payload:
    return shadow.Payload(shadow.payload_hash("inline_data", mime_type, data), "inline_data", mime_type, data)


def point(
    name: str,
    *,
    payloads: tuple[shadow.Payload, ...] = (),
    signatures: tuple[shadow.Signature, ...] = (),
    journal: tuple[shadow.JournalEntry, ...] = (),
    rich: bool = True,
    skeleton: list[dict[str, Any]] | None = None,
) -> shadow.PointRecord:
    form = None
    if rich:
        parts: list[dict[str, Any]] = [{"ref": p.hash} for p in payloads] or [{"text": name}]
        form = shadow.Dehydrated(
            skeleton=skeleton if skeleton is not None else [{"role": "model", "parts": parts}],
            payloads=payloads,
            signatures=signatures,
        )
    return shadow.PointRecord(
        cumulative=digest(name),
        position=0,
        parent=None,
        invariant=digest(name + "-inv"),
        role="model",
        chat_id="chat-1",
        model="gemini",
        form=form,
        journal=journal,
    )


class StoreContract:
    # The port ------------------------------------------------------------------------------------

    async def test_every_repository_is_an_adapter_of_its_protocol(self, backend: Backend) -> None:
        expected = {
            "conversations": store_port.ConversationStore,
            "memories": store_port.MemoryStore,
            "attachments": store_port.AttachmentStore,
            "registries": store_port.RegistryStore,
            "shadow": store_port.ShadowStore,
        }
        for name, protocol in expected.items():
            repository = getattr(backend, name)
            assert protocol in type(repository).__mro__, name  # the adapters subclass their Protocol
            for member in protocol.__dict__:
                if not member.startswith("_"):
                    assert callable(getattr(repository, member)), f"{name}.{member}"
        async with backend.transactions.transaction() as connection:
            assert connection is not None

    # Conversations: messages -------------------------------------------------------------------

    async def test_remember_stores_each_message_once_per_user(self, backend: Backend) -> None:
        store = backend.conversations
        one, two, three = branch(1, 2, 3)
        await store.remember(ALICE, {one: message("first")})
        async with backend.transactions.transaction() as connection:
            await store.remember(
                ALICE, {one: message("changed"), two: message("second")}, connection=connection
            )
        await store.remember(ALICE, {})
        assert await store.messages(ALICE, [one, two, three, one]) == {
            one: message("first"),
            two: message("second"),
        }
        assert await store.messages(ALICE, []) == {}
        assert await store.messages(BOB, [one, two]) == {}
        await store.remember(BOB, {one: message("bob's")})
        assert await store.messages(BOB, iter([one])) == {one: message("bob's")}
        assert (await store.messages(ALICE, [one]))[one] == message("first")

    async def test_messages_read_back_are_copies_with_storable_text(self, backend: Backend) -> None:
        store = backend.conversations
        (one,) = branch(1)
        await store.remember(ALICE, {one: {"role": "user", "content": [{"type": "text", "text": "a\x00b"}]}})
        found = await store.messages(ALICE, [one])
        assert found[one]["content"] == [{"type": "text", "text": "a\ufffdb"}]
        found[one]["content"] = "mutated"
        assert (await store.messages(ALICE, [one]))[one]["content"] == [{"type": "text", "text": "a\ufffdb"}]

    # Conversations: summaries ------------------------------------------------------------------

    async def test_save_summary_keeps_one_per_branch_point_and_reads_it_back(self, backend: Backend) -> None:
        store = backend.conversations
        c = branch(*range(1, 5))
        first = new_summary(ALICE, c[3], 4, "four", head_count=1, locale="fr", model="gm", provider="gemini")
        assert await store.save_summary(first) is True
        assert await store.save_summary(new_summary(ALICE, c[3], 4, "again")) is False
        row = await store.summary(ALICE, c[3])
        assert row is not None
        assert (row.summary.covered_hash, row.summary.covered_count, row.summary.head_count) == (c[3], 4, 1)
        assert (row.summary.text, row.locale, row.model, row.provider) == ("four", "fr", "gm", "gemini")
        assert row.refs == tuple(first.refs)
        assert row.summary.summary_id
        assert row.summary.created_at > 0
        assert await store.summary(ALICE, c[2]) is None
        assert await store.summary(BOB, c[3]) is None
        assert await store.save_summary(new_summary(BOB, c[3], 4, "bob's")) is True
        bob_row = await store.summary(BOB, c[3])
        assert bob_row is not None
        assert bob_row.summary.text == "bob's"
        assert bob_row.summary.summary_id != row.summary.summary_id

    async def test_summary_text_is_made_storable(self, backend: Backend) -> None:
        (one,) = branch(1)
        await backend.conversations.save_summary(new_summary(ALICE, one, 1, "nul\x00here"))
        row = await backend.conversations.summary(ALICE, one)
        assert row is not None
        assert row.summary.text == "nul\ufffdhere"

    async def test_summaries_at_answers_the_users_branch_points_among_the_hashes(
        self, backend: Backend
    ) -> None:
        store = backend.conversations
        c = branch(*range(1, 6))
        await store.save_summary(new_summary(ALICE, c[1], 2))
        await store.save_summary(new_summary(ALICE, c[3], 4))
        await store.save_summary(new_summary(BOB, c[4], 5))
        assert await store.summaries_at(ALICE, [*c, digest("other"), c[1]]) == {c[1]: 2, c[3]: 4}
        assert await store.summaries_at(BOB, c) == {c[4]: 5}
        assert await store.summaries_at(ALICE, []) == {}
        assert await store.summaries_at(BOB, [c[1]]) == {}

    async def test_best_summary_is_the_valid_one_that_covers_the_most(self, backend: Backend) -> None:
        store = backend.conversations
        c = branch(*range(1, 6))
        await store.save_summary(new_summary(ALICE, c[1], 2, "two"))
        await store.save_summary(new_summary(ALICE, c[3], 4, "four"))
        await store.save_summary(new_summary(BOB, c[4], 5, "bob's five"))

        async def best(user: str, hashes: list[str]) -> str | None:
            row = await store.best_summary(user, hashes)
            return None if row is None else row.summary.text

        assert await best(ALICE, c) == "four"
        assert await best(ALICE, c[:3]) == "two"  # the branch stops before the fourth turn
        assert await best(ALICE, [c[0], c[1], digest("edited"), digest("x")]) == "two"  # a sibling
        assert await best(ALICE, c[:1]) is None
        assert await best(ALICE, []) is None
        assert await best(BOB, c) == "bob's five"
        assert await best(BOB, c[:4]) is None
        assert await best("carol", c) is None

    async def test_best_summary_needs_the_key_at_the_position_it_covers(self, backend: Backend) -> None:
        store = backend.conversations
        c = branch(*range(1, 4))
        await store.save_summary(new_summary(ALICE, c[2], 2, "stale"))  # keyed by turn 3, covering 2
        await store.save_summary(new_summary(ALICE, c[1], 2, "two"))
        row = await store.best_summary(ALICE, c)
        assert row is not None
        assert row.summary.text == "two"
        assert await store.best_summary(ALICE, [c[2], c[0]]) is None  # c[2] at position 1: not covering 1

    async def test_best_summary_far_back_on_a_long_branch(self, backend: Backend) -> None:
        store = backend.conversations
        c = branch(*range(300))
        await store.save_summary(new_summary(ALICE, c[9], 10, "ten"))
        await store.save_summary(new_summary(ALICE, c[99], 100, "hundred"))
        row = await store.best_summary(ALICE, c)  # both beyond the last 128 positions
        assert row is not None
        assert row.summary.text == "hundred"
        await store.save_summary(new_summary(ALICE, c[250], 251, "near the end"))
        row = await store.best_summary(ALICE, c)
        assert row is not None
        assert row.summary.text == "near the end"

    async def test_branch_hashes_must_be_digests(self, backend: Backend) -> None:
        store = backend.conversations
        with pytest.raises(ValueError, match="64 hex"):
            await store.best_summary(ALICE, ["short"])
        with pytest.raises(ValueError, match="64 hex"):
            await store.inlet_lookup(ALICE, [digest(1), "short"], "chat-1")
        with pytest.raises(ValueError, match="64 hex"):
            await store.outlet_statement(
                ALICE,
                {digest(1): message("m")},
                chat_id="c",
                invariants=[digest(1)],
                head_hash=None,
                lookup=["x"],
            )
        assert await store.messages(ALICE, [digest(1)]) == {}  # refused before anything was written
        assert await store.latest_branch(ALICE, "c") is None

    # Conversations: summary failures and the inlet ---------------------------------------------

    async def test_inlet_lookup_takes_the_chats_failure_once(self, backend: Backend) -> None:
        store = backend.conversations
        c = branch(1, 2)
        await store.save_summary(new_summary(ALICE, c[1], 2, "two"))
        found = await store.inlet_lookup(ALICE, c, "chat-1")
        assert found.failure is None
        assert found.summary is not None
        assert found.summary.summary.text == "two"

        await store.record_summary_failure(ALICE, "chat-1", "llm", "first")
        await store.record_summary_failure(ALICE, "chat-1", "empty", "x" * 500)
        await store.record_summary_failure(ALICE, "chat-2", "llm", "other chat")
        await store.record_summary_failure(BOB, "chat-1", "llm", "bob's")
        await store.record_summary_failure(ALICE, "", "llm", "no chat: nothing")

        assert (await store.inlet_lookup(ALICE, c, None)).failure is None
        assert (await store.inlet_lookup(ALICE, c, "")).failure is None
        found = await store.inlet_lookup(ALICE, c, "chat-1")
        assert found.failure == store_port.SummaryFailure("empty", "x" * store_port.FAILURE_DETAIL_CHARS, 2)
        assert found.summary is not None
        assert found.summary.summary.text == "two"
        assert await store.inlet_lookup(ALICE, c, "chat-1") == store_port.InletLookup(found.summary, None)

        empty = await store.inlet_lookup(ALICE, [], "chat-2")
        assert empty == store_port.InletLookup(None, store_port.SummaryFailure("llm", "other chat", 1))
        bob = await store.inlet_lookup(BOB, c, "chat-1")
        assert bob.summary is None
        assert bob.failure == store_port.SummaryFailure("llm", "bob's", 1)

    async def test_clear_summary_failure_forgets_the_chats_failure_only(self, backend: Backend) -> None:
        store = backend.conversations
        await store.record_summary_failure(ALICE, "chat-1", "llm", "gone")
        await store.record_summary_failure(BOB, "chat-1", "llm", "kept")
        await store.clear_summary_failure(ALICE, "chat-1")
        await store.clear_summary_failure(ALICE, "")
        await store.clear_summary_failure(ALICE, "never")
        assert (await store.inlet_lookup(ALICE, [], "chat-1")).failure is None
        assert (await store.inlet_lookup(BOB, [], "chat-1")).failure == store_port.SummaryFailure(
            "llm", "kept", 1
        )

    # Conversations: chat heads and the outlet --------------------------------------------------

    async def test_record_head_and_latest_branch(self, backend: Backend) -> None:
        store = backend.conversations
        i = branch("i1", "i2", "i3")
        await store.record_head(ALICE, "chat-1", i[:2])
        assert await store.latest_branch(ALICE, "chat-1") == i[:2]
        async with backend.transactions.transaction() as connection:
            await store.record_head(ALICE, "chat-1", i, connection=connection)
        assert await store.latest_branch(ALICE, "chat-1") == i
        await store.record_head(ALICE, "chat-2", [])
        assert await store.latest_branch(ALICE, "chat-2") == []
        await store.record_head(ALICE, "", i)
        assert await store.latest_branch(ALICE, "") is None
        assert await store.latest_branch(ALICE, "unknown") is None
        assert await store.latest_branch(BOB, "chat-1") is None

    async def test_a_head_with_an_unchanged_head_hash_is_not_rewritten(self, backend: Backend) -> None:
        store = backend.conversations
        i = branch("i1", "i2")
        head = chain.cumulative_hash(i[0], None)
        await store.record_head(ALICE, "chat-1", i[:1], head_hash=head)
        await store.record_head(ALICE, "chat-1", i, head_hash=head)
        assert await store.latest_branch(ALICE, "chat-1") == i[:1]
        await store.record_head(ALICE, "chat-1", i)  # its own head hash: a new one
        assert await store.latest_branch(ALICE, "chat-1") == i

    async def test_outlet_statement_remembers_records_the_head_and_looks_up(self, backend: Backend) -> None:
        store = backend.conversations
        i = branch("i1", "i2")
        c = branch("c1", "c2")
        await store.save_summary(new_summary(ALICE, c[0], 1, "one"))
        await store.remember(ALICE, {i[0]: message("kept")})
        row = await store.outlet_statement(
            ALICE,
            {i[0]: message("not again"), i[1]: message("answer", "assistant")},
            chat_id="chat-1",
            invariants=i,
            head_hash=c[1],
            lookup=c,
        )
        assert row is not None
        assert row.summary.text == "one"
        assert await store.messages(ALICE, i) == {i[0]: message("kept"), i[1]: message("answer", "assistant")}
        assert await store.latest_branch(ALICE, "chat-1") == i

        nothing = await store.outlet_statement(
            ALICE, {}, chat_id=None, invariants=i[:1], head_hash=c[0], lookup=[]
        )
        assert nothing is None
        assert await store.latest_branch(ALICE, "chat-1") == i
        bob = await store.outlet_statement(
            BOB, {}, chat_id="chat-1", invariants=i[:1], head_hash=c[0], lookup=c
        )
        assert bob is None  # alice's summary is not bob's
        assert await store.latest_branch(BOB, "chat-1") == i[:1]
        assert await store.latest_branch(ALICE, "chat-1") == i

    # Conversations: the lock and forgetting ----------------------------------------------------

    async def test_summary_lock_holds_one_holder_per_user_and_scope(self, backend: Backend) -> None:
        store = backend.conversations
        order: list[str] = []
        held = asyncio.Event()
        release = asyncio.Event()

        async def first() -> None:
            async with store.summary_lock(ALICE, "chat:1"):
                order.append("first in")
                held.set()
                await asyncio.wait_for(release.wait(), WAIT)
                order.append("first out")

        async def second() -> None:
            async with store.summary_lock(ALICE, "chat:1"):
                order.append("second in")

        holder = asyncio.create_task(first())
        await asyncio.wait_for(held.wait(), WAIT)
        waiter = asyncio.create_task(second())
        async with asyncio.timeout(WAIT):  # another scope and another user do not wait
            async with store.summary_lock(ALICE, "chat:2"):
                pass
            async with store.summary_lock(BOB, "chat:1"):
                pass
        await asyncio.sleep(0.05)
        assert order == ["first in"]
        release.set()
        await asyncio.wait_for(asyncio.gather(holder, waiter), WAIT)
        assert order == ["first in", "first out", "second in"]

    async def test_summary_lock_is_released_when_the_block_raises(self, backend: Backend) -> None:
        store = backend.conversations
        with pytest.raises(RuntimeError):
            async with store.summary_lock(ALICE, "chat:1"):
                raise RuntimeError("job failed")
        async with asyncio.timeout(WAIT), store.summary_lock(ALICE, "chat:1"):
            pass

    async def test_forget_deletes_one_users_conversations(self, backend: Backend) -> None:
        store = backend.conversations
        c = branch(1, 2)
        for user in (ALICE, BOB):
            await store.remember(user, {c[0]: message("m"), c[1]: message("n")})
            await store.save_summary(new_summary(user, c[1], 2))
            await store.record_head(user, "chat-1", c)
            await store.record_summary_failure(user, "chat-1", "llm", "d")
        assert await store.forget(ALICE) == (1, 2)
        assert await store.messages(ALICE, c) == {}
        assert await store.summaries_at(ALICE, c) == {}
        assert await store.latest_branch(ALICE, "chat-1") is None
        assert (await store.inlet_lookup(ALICE, c, "chat-1")) == store_port.InletLookup(None, None)
        assert await store.forget(ALICE) == (0, 0)
        assert len(await store.messages(BOB, c)) == 2
        assert await store.latest_branch(BOB, "chat-1") == c
        bob = await store.inlet_lookup(BOB, c, "chat-1")
        assert bob.summary is not None
        assert bob.failure is not None

    # Memories ----------------------------------------------------------------------------------

    async def _insert(self, backend: Backend, user: str, memory_id: str, name: str = "w1", **kw: Any) -> bool:
        async with backend.transactions.transaction() as connection:
            return await backend.memories.insert(
                connection, user, memory_id, distilled(**kw), window(name), provider="p", model="m"
            )

    async def test_insert_and_get_a_memory(self, backend: Backend) -> None:
        store = backend.memories
        assert await self._insert(backend, ALICE, "mem-1") is True
        assert await self._insert(backend, ALICE, "mem-1", "w2", summary="other") is False
        row = await store.get(ALICE, "mem-1")
        assert row is not None
        assert row.indexed_version == 0
        memory = row.memory
        assert (memory.id, memory.user_id, memory.memory_id, memory.summary) == (
            "mem-1",
            ALICE,
            "pref-tea",
            "likes tea",
        )
        assert (memory.importance, memory.tags, memory.chat_id, memory.version) == (
            3,
            ("drinks", "tea"),
            "chat-1",
            1,
        )
        assert memory.provenance == (window("w1"),)
        assert memory.created_at == pytest.approx(memory.updated_at)
        assert memory.created_at > 0
        assert memory.history == ()
        async with backend.transactions.transaction() as connection:
            again = await store.get(ALICE, "mem-1", with_history=True, connection=connection)
        assert again is not None
        assert again.memory == memory
        assert again.memory.history == ()
        assert await store.get(ALICE, "missing") is None
        assert await store.get(BOB, "mem-1") is None
        assert await self._insert(backend, BOB, "mem-1", summary="bob's") is True
        bob = await store.get(BOB, "mem-1")
        assert bob is not None
        assert bob.memory.summary == "bob's"

    async def test_record_window_once_and_its_outcome(self, backend: Backend) -> None:
        store = backend.memories
        async with backend.transactions.transaction() as connection:
            assert await store.record_window(connection, ALICE, window("w1"), "created", "mem-1") is True
            assert (
                await store.record_window(connection, ALICE, window("w1"), "discarded", None, "dup") is False
            )
            assert (
                await store.record_window(connection, ALICE, window("w2"), "discarded", None, "trivial")
                is True
            )
            assert await store.window_outcome(ALICE, digest("w1"), connection=connection) == (
                "created",
                "mem-1",
            )
        assert await store.window_outcome(ALICE, digest("w2")) == ("discarded", None)
        assert await store.window_outcome(ALICE, digest("w3")) is None
        assert await store.window_outcome(BOB, digest("w1")) is None

    async def test_list_and_count_most_recently_updated_first(self, backend: Backend) -> None:
        store = backend.memories
        for memory_id in ("mem-a", "mem-b", "mem-c"):
            await self._insert(backend, ALICE, memory_id, "w-" + memory_id)
        await self._insert(backend, BOB, "mem-z")
        async with backend.transactions.transaction() as connection:
            assert await store.touch(connection, ALICE, "mem-a", window("w-touch")) == 1
        listed = [row.memory.id for row in await store.list(ALICE)]
        assert listed == ["mem-a", "mem-c", "mem-b"]
        assert [row.memory.id for row in await store.list(ALICE, limit=1, offset=1)] == ["mem-c"]
        assert await store.list(ALICE, offset=5) == []
        assert await store.count(ALICE) == 3
        assert await store.count(BOB) == 1
        assert await store.list("carol") == []
        assert await store.count("carol") == 0

    async def test_touch_dates_a_memory_and_adds_the_window(self, backend: Backend) -> None:
        store = backend.memories
        await self._insert(backend, ALICE, "mem-1")
        before = await store.get(ALICE, "mem-1")
        assert before is not None
        async with backend.transactions.transaction() as connection:
            assert await store.touch(connection, ALICE, "mem-1", window("w2", chat_id=None)) == 1
            assert await store.touch(connection, ALICE, "missing", window("w3")) is None
            assert await store.touch(connection, BOB, "mem-1", window("w4")) is None
        after = await store.get(ALICE, "mem-1")
        assert after is not None
        assert after.memory.provenance == (window("w1"), window("w2", chat_id=None))
        assert after.memory.updated_at > before.memory.updated_at
        assert (after.memory.version, after.memory.summary) == (1, "likes tea")

    async def test_merge_compares_and_sets_the_version_and_keeps_the_history(self, backend: Backend) -> None:
        store = backend.memories
        await self._insert(backend, ALICE, "mem-1")
        merged = await store.merge(
            ALICE,
            "mem-1",
            expected_version=1,
            summary="likes green tea",
            importance=4,
            tags=["tea", "green"],
            window=window("w2"),
        )
        assert merged == 2
        stale = await store.merge(
            ALICE, "mem-1", expected_version=1, summary="lost", importance=1, tags=[], window=window("w3")
        )
        assert stale is None
        assert await store.window_outcome(ALICE, digest("w3")) is None
        assert await store.window_outcome(ALICE, digest("w2")) == ("merged", "mem-1")
        for user, memory_id in ((BOB, "mem-1"), (ALICE, "missing")):
            assert (
                await store.merge(
                    user,
                    memory_id,
                    expected_version=1,
                    summary="x",
                    importance=1,
                    tags=[],
                    window=window("w5"),
                )
                is None
            )
        row = await store.get(ALICE, "mem-1", with_history=True)
        assert row is not None
        memory = row.memory
        assert (memory.summary, memory.importance, memory.tags, memory.version) == (
            "likes green tea",
            4,
            ("tea", "green"),
            2,
        )
        assert memory.provenance == (window("w1"), window("w2"))
        (old,) = memory.history
        assert (old.version, old.summary, old.importance, old.tags, old.window) == (
            1,
            "likes tea",
            3,
            ("drinks", "tea"),
            digest("w2"),
        )
        assert old.replaced_at > 0
        assert (
            await store.merge(
                ALICE,
                "mem-1",
                expected_version=2,
                summary="v3",
                importance=2,
                tags=["t"],
                window=window("w6"),
            )
            == 3
        )
        row = await store.get(ALICE, "mem-1", with_history=True)
        assert row is not None
        assert [v.version for v in row.memory.history] == [1, 2]
        plain = await store.get(ALICE, "mem-1")
        assert plain is not None
        assert plain.memory.history == ()

    async def test_mark_indexed_never_moves_back(self, backend: Backend) -> None:
        store = backend.memories
        await self._insert(backend, ALICE, "mem-1")
        await store.mark_indexed(ALICE, "mem-1", 2)
        async with backend.transactions.transaction() as connection:
            await store.mark_indexed(ALICE, "mem-1", 1, connection=connection)
        await store.mark_indexed(BOB, "mem-1", 5)
        await store.mark_indexed(ALICE, "missing", 5)
        row = await store.get(ALICE, "mem-1")
        assert row is not None
        assert row.indexed_version == 2

    async def test_delete_a_memory_with_its_history(self, backend: Backend) -> None:
        store = backend.memories
        await self._insert(backend, ALICE, "mem-1")
        await self._insert(backend, BOB, "mem-1")
        await store.merge(
            ALICE, "mem-1", expected_version=1, summary="s", importance=2, tags=[], window=window("w2")
        )
        assert await store.delete(BOB, "missing") is False
        assert await store.delete(ALICE, "mem-1") is True
        assert await store.delete(ALICE, "mem-1") is False
        assert await store.get(ALICE, "mem-1") is None
        assert await store.window_outcome(ALICE, digest("w2")) == ("merged", "mem-1")  # window records stay
        assert await self._insert(backend, ALICE, "mem-1", "w9") is True
        again = await store.get(ALICE, "mem-1", with_history=True)
        assert again is not None
        assert again.memory.history == ()
        assert again.memory.version == 1
        async with backend.transactions.transaction() as connection:
            assert await store.delete(ALICE, "mem-1", connection=connection) is True
        assert await store.get(BOB, "mem-1") is not None

    async def test_forget_deletes_one_users_memories_and_windows(self, backend: Backend) -> None:
        store = backend.memories
        for user in (ALICE, BOB):
            await self._insert(backend, user, "mem-1")
            await self._insert(backend, user, "mem-2", "w2")
            async with backend.transactions.transaction() as connection:
                await store.record_window(connection, user, window("w1"), "created", "mem-1")
        await store.merge(
            ALICE, "mem-1", expected_version=1, summary="s", importance=2, tags=[], window=window("w3")
        )
        assert await store.forget(ALICE) == 2
        assert await store.count(ALICE) == 0
        assert await store.window_outcome(ALICE, digest("w1")) is None
        async with backend.transactions.transaction() as connection:
            assert await store.forget(ALICE, connection=connection) == 0
        assert await store.count(BOB) == 2
        assert await store.window_outcome(BOB, digest("w1")) == ("created", "mem-1")
        assert await self._insert(backend, ALICE, "mem-1") is True
        row = await store.get(ALICE, "mem-1", with_history=True)
        assert row is not None
        assert row.memory.history == ()

    async def test_user_lock_is_held_until_the_transaction_ends(self, backend: Backend) -> None:
        store = backend.memories
        order: list[str] = []
        held = asyncio.Event()
        release = asyncio.Event()

        async def first() -> None:
            async with backend.transactions.transaction() as connection:
                await store.user_lock(connection, ALICE)
                await store.user_lock(connection, ALICE)  # taken again in the same transaction
                order.append("first in")
                held.set()
                await asyncio.wait_for(release.wait(), WAIT)
                order.append("first out")

        async def second() -> None:
            async with backend.transactions.transaction() as connection:
                await store.user_lock(connection, ALICE)
                order.append("second in")

        holder = asyncio.create_task(first())
        await asyncio.wait_for(held.wait(), WAIT)
        waiter = asyncio.create_task(second())
        async with asyncio.timeout(WAIT), backend.transactions.transaction() as connection:
            await store.user_lock(connection, BOB)  # another user does not wait
        await asyncio.sleep(0.05)
        assert order == ["first in"]
        release.set()
        await asyncio.wait_for(asyncio.gather(holder, waiter), WAIT)
        assert order == ["first in", "first out", "second in"]

    async def test_job_alive_while_the_job_exists(self, backend: Backend) -> None:
        job = await backend.add_job()
        assert await backend.memories.job_alive(None, job) is True
        async with backend.transactions.transaction() as connection:
            assert await backend.memories.job_alive(connection, job) is True
        await backend.drop_job(job)
        assert await backend.memories.job_alive(None, job) is False
        assert await backend.memories.job_alive(None, job + 1000) is False

    # Transactions: units of work ---------------------------------------------------------------

    async def test_a_transaction_that_raises_undoes_what_it_wrote_with_its_connection(
        self, backend: Backend
    ) -> None:
        memories, conversations = backend.memories, backend.conversations
        await self._insert(backend, ALICE, "mem-old")
        await self._insert(backend, ALICE, "mem-other", "w-other")
        async with backend.transactions.transaction() as connection:
            await memories.mark_indexed(ALICE, "mem-old", 1, connection=connection)
        one, two = branch("undo-1", "undo-2")
        await conversations.remember(ALICE, {one: message("kept")})

        async def failing() -> None:
            async with backend.transactions.transaction() as connection:
                await memories.user_lock(connection, ALICE)
                await conversations.remember(
                    ALICE, {one: message("rewritten?"), two: message("new")}, connection=connection
                )
                await conversations.record_head(ALICE, "chat-1", [one, two], connection=connection)
                assert await memories.insert(
                    connection, ALICE, "mem-new", distilled(), window("w-new"), provider="p", model="m"
                )
                await memories.record_window(connection, ALICE, window("w-new"), "created", "mem-new")
                assert await memories.touch(connection, ALICE, "mem-old", window("w-touch")) == 1
                await memories.mark_indexed(ALICE, "mem-old", 5, connection=connection)
                await backend.attachments.register(
                    connection, ALICE, new_attachment(), now=NOW, retention_seconds=60
                )
                # a write without the connection is a transaction of its own: it stays
                await memories.merge(
                    ALICE, "mem-other", expected_version=1, summary="merged", importance=2, tags=[],
                    window=window("w-merge"),
                )  # fmt: skip
                assert await memories.get(ALICE, "mem-new", connection=connection) is not None
                raise LookupError("the vector write failed")

        with pytest.raises(LookupError):
            await failing()
        assert await memories.get(ALICE, "mem-new") is None
        assert await memories.window_outcome(ALICE, digest("w-new")) is None
        old = await memories.get(ALICE, "mem-old")
        assert old is not None
        assert old.indexed_version == 1  # the block's touch and mark are undone
        assert old.memory.provenance == (window("w1"),)
        other = await memories.get(ALICE, "mem-other")
        assert other is not None
        assert (other.memory.version, other.memory.summary) == (2, "merged")  # the merge stays
        assert await memories.window_outcome(ALICE, digest("w-merge")) == ("merged", "mem-other")
        assert await conversations.messages(ALICE, [one, two]) == {one: message("kept")}
        assert await conversations.latest_branch(ALICE, "chat-1") is None
        assert await backend.attachments.of_chat(ALICE, "chat-1") == []
        async with asyncio.timeout(WAIT), backend.transactions.transaction() as connection:
            await memories.user_lock(connection, ALICE)  # the lock went with the block

    async def test_a_transaction_that_raises_undoes_its_deletions(self, backend: Backend) -> None:
        memories = backend.memories
        await self._insert(backend, ALICE, "mem-1")
        await memories.merge(
            ALICE, "mem-1", expected_version=1, summary="v2", importance=2, tags=[], window=window("w2")
        )
        await self._insert(backend, ALICE, "mem-2", "w3")

        async def failing() -> None:
            async with backend.transactions.transaction() as connection:
                assert await memories.delete(ALICE, "mem-1", connection=connection) is True
                assert await memories.forget(ALICE, connection=connection) == 1
                raise LookupError("the point's deletion failed")

        with pytest.raises(LookupError):
            await failing()
        assert await memories.count(ALICE) == 2
        row = await memories.get(ALICE, "mem-1", with_history=True)
        assert row is not None
        assert (row.memory.version, [v.version for v in row.memory.history]) == (2, [1])
        assert await memories.window_outcome(ALICE, digest("w2")) == ("merged", "mem-1")

    async def test_a_transaction_that_ends_keeps_its_writes(self, backend: Backend) -> None:
        one = digest("kept-1")
        async with backend.transactions.transaction() as connection:
            await backend.conversations.remember(ALICE, {one: message("m")}, connection=connection)
            await backend.conversations.record_head(ALICE, "chat-1", [one], connection=connection)
            await backend.memories.record_window(connection, ALICE, window("w1"), "discarded", reason="r")
        assert await backend.conversations.messages(ALICE, [one]) == {one: message("m")}
        assert await backend.conversations.latest_branch(ALICE, "chat-1") == [one]
        assert await backend.memories.window_outcome(ALICE, digest("w1")) == ("discarded", None)

    # Attachments -------------------------------------------------------------------------------

    async def _register(
        self,
        backend: Backend,
        user: str,
        new: store_port.NewAttachment,
        *,
        now: float = NOW,
        retention: float = 3600,
    ) -> tuple[str, bool]:
        async with backend.transactions.transaction() as connection:
            return await backend.attachments.register(
                connection, user, new, now=now, retention_seconds=retention
            )

    async def test_register_makes_one_row_per_content_and_chat(self, backend: Backend) -> None:
        store = backend.attachments
        first_id = routing.source_id(ALICE, "chat-1", int(NOW))
        assert await self._register(backend, ALICE, new_attachment()) == (first_id, True)
        assert await self._register(backend, ALICE, new_attachment(file_id="file-2"), now=NOW + 9) == (
            first_id,
            False,
        )
        second_id = routing.source_id(ALICE, "chat-1", int(NOW) + 1)  # the same second: the next one
        assert await self._register(backend, ALICE, new_attachment(content="b")) == (second_id, True)
        unknown = await self._register(backend, ALICE, new_attachment(content=None))
        assert unknown == (routing.source_id(ALICE, "chat-1", int(NOW) + 2), True)
        other_chat = await self._register(backend, ALICE, new_attachment(chat_id="chat-2"))
        assert other_chat == (routing.source_id(ALICE, "chat-2", int(NOW)), True)
        bob = await self._register(backend, BOB, new_attachment())
        assert bob == (routing.source_id(BOB, "chat-1", int(NOW)), True)

        found = await store.get(ALICE, first_id)
        assert found is not None
        assert found == store_port.Attachment(
            source_id=first_id,
            chat_id="chat-1",
            file_id="file-1",
            filename="notes.txt",
            mime_type="text/plain",
            mode="rag_ephemeral",
            status="pending",
            content_sha256=hashlib.sha256(b"a").hexdigest(),
            size_bytes=10,
            created_at=found.created_at,
        )
        assert found.created_at > 0
        assert await store.get(BOB, first_id) is None
        assert await store.get(ALICE, "missing") is None

    async def test_by_file_and_of_chat(self, backend: Backend) -> None:
        store = backend.attachments
        first, _ = await self._register(backend, ALICE, new_attachment(content="a", file_id="f"))
        second, _ = await self._register(backend, ALICE, new_attachment(content="b", file_id="f"))
        third, _ = await self._register(backend, ALICE, new_attachment(content="c", file_id="g"))
        await self._register(backend, ALICE, new_attachment(chat_id="chat-2", content="d", file_id="f"))
        found = await store.by_file(ALICE, "chat-1", "f")
        assert found is not None
        assert found.source_id == first
        assert await store.by_file(ALICE, "chat-1", "none") is None
        assert await store.by_file(BOB, "chat-1", "f") is None
        assert [a.source_id for a in await store.of_chat(ALICE, "chat-1")] == [first, second, third]
        assert [a.source_id for a in await store.of_chat(ALICE, "chat-1", limit=2)] == [first, second]
        assert await store.of_chat(BOB, "chat-1") == []
        assert await store.of_chat(ALICE, "chat-3") == []

    async def test_pending_text_and_the_marks(self, backend: Backend) -> None:
        store = backend.attachments
        source, _ = await self._register(backend, ALICE, new_attachment())
        assert await store.pending_text(ALICE, source) == "the text"
        assert await store.pending_text(BOB, source) is None
        assert await store.pending_text(ALICE, "missing") is None
        await store.mark_indexed(ALICE, source, 7)
        await store.mark_indexed(BOB, source, 99)
        assert await store.mark_ready(BOB, source, "stolen", "fast_path") is False
        assert await store.mark_failed(BOB, source, "stolen") is False
        assert await store.mark_ready(ALICE, "missing", "s", "fast_path") is False
        assert await store.mark_failed(ALICE, source, "too big") is True
        failed = await store.get(ALICE, source)
        assert failed is not None
        assert (failed.status, failed.error, failed.chunks, failed.summary) == ("failed", "too big", 7, None)
        assert await store.pending_text(ALICE, source) is None
        assert await store.mark_ready(ALICE, source, "the summary", "map_reduce") is True
        ready = await store.get(ALICE, source)
        assert ready is not None
        assert (ready.status, ready.summary, ready.summary_mode, ready.error) == (
            "ready",
            "the summary",
            "map_reduce",
            None,
        )

    async def test_expired_rows_of_every_user_soonest_first(self, backend: Backend) -> None:
        store = backend.attachments
        older, _ = await self._register(backend, ALICE, new_attachment(content="a"), retention=-120)
        await self._register(backend, ALICE, new_attachment(content="b"), retention=3600)
        bob, _ = await self._register(backend, BOB, new_attachment(content="c"), retention=-60)
        assert await store.expired() == [(ALICE, older), (BOB, bob)]
        assert await store.expired(limit=1) == [(ALICE, older)]
        await store.delete(ALICE, older)
        assert await store.expired() == [(BOB, bob)]

    async def test_delete_and_forget_one_users_files(self, backend: Backend) -> None:
        store = backend.attachments
        one, _ = await self._register(backend, ALICE, new_attachment(content="a"))
        await self._register(backend, ALICE, new_attachment(content="b"))
        await self._register(backend, BOB, new_attachment(content="a"))
        await store.delete(BOB, one)  # bob's source id is another: alice's row stays
        assert await store.get(ALICE, one) is not None
        await store.delete(ALICE, one)
        await store.delete(ALICE, one)
        assert await store.get(ALICE, one) is None
        assert await store.forget(ALICE) == 1
        assert await store.forget(ALICE) == 0
        assert len(await store.of_chat(BOB, "chat-1")) == 1

    # Registries --------------------------------------------------------------------------------

    async def test_save_plan_creates_or_replaces_keeping_steps_and_model(self, backend: Backend) -> None:
        store = backend.registries
        plan = await store.save_plan(
            ALICE, "chat-1", goal="ship", status="todo", steps=["a", "b"], model="gm"
        )
        assert plan.id.startswith("plan_")
        assert len(plan.id) == len("plan_") + 12
        assert (plan.goal, plan.status, plan.model, plan.steps) == ("ship", "todo", "gm", ("a", "b"))
        assert plan.created_at == pytest.approx(plan.updated_at)
        replaced = await store.save_plan(
            ALICE, "chat-1", goal="ship it", status="in_progress", plan_id=plan.id
        )
        assert (replaced.id, replaced.goal, replaced.status, replaced.model, replaced.steps) == (
            plan.id,
            "ship it",
            "in_progress",
            "gm",
            ("a", "b"),
        )
        assert replaced.created_at == plan.created_at
        assert replaced.updated_at > plan.updated_at
        emptied = await store.save_plan(ALICE, "chat-1", goal="g", status="done", plan_id=plan.id, steps=[])
        assert emptied.steps == ()
        assert emptied.model == "gm"
        bare = await store.save_plan(ALICE, "chat-1", goal="bare", status="todo", plan_id="p-bare")
        assert (bare.id, bare.steps, bare.model) == ("p-bare", (), None)
        elsewhere = await store.save_plan(BOB, "chat-1", goal="bob's", status="todo", plan_id=plan.id)
        assert elsewhere.goal == "bob's"
        assert elsewhere.model is None
        other_chat = await store.save_plan(ALICE, "chat-2", goal="other", status="todo", plan_id=plan.id)
        assert other_chat.steps == ()
        assert [p.goal for p in await store.list_plans(ALICE, "chat-1")] == ["g", "bare"]

    async def test_update_plan_changes_what_is_given(self, backend: Backend) -> None:
        store = backend.registries
        plan = await store.save_plan(ALICE, "chat-1", goal="ship", status="todo", steps=["a"], model="gm")
        updated = await store.update_plan(ALICE, "chat-1", plan.id, status="blocked")
        assert updated is not None
        assert (updated.goal, updated.status, updated.steps, updated.model) == (
            "ship",
            "blocked",
            ("a",),
            "gm",
        )
        updated = await store.update_plan(ALICE, "chat-1", plan.id, goal="ship now", steps=["x", "y"])
        assert updated is not None
        assert (updated.goal, updated.status, updated.steps) == (
            "ship now",
            "blocked",
            ("x", "y"),
        )
        assert updated.updated_at > plan.updated_at
        assert await store.update_plan(BOB, "chat-1", plan.id, goal="stolen") is None
        assert await store.update_plan(ALICE, "chat-2", plan.id, goal="stolen") is None
        assert await store.update_plan(ALICE, "chat-1", "plan_missing", goal="x") is None
        (kept,) = await store.list_plans(ALICE, "chat-1")
        assert kept.goal == "ship now"

    async def test_list_plans_takes_the_most_recently_updated_in_the_order_made(
        self, backend: Backend
    ) -> None:
        store = backend.registries
        ids = []
        for goal in ("one", "two", "three"):
            ids.append((await store.save_plan(ALICE, "chat-1", goal=goal, status="todo")).id)
        await store.update_plan(ALICE, "chat-1", ids[0], status="done")
        assert [p.goal for p in await store.list_plans(ALICE, "chat-1")] == ["one", "two", "three"]
        assert [p.goal for p in await store.list_plans(ALICE, "chat-1", limit=2)] == ["one", "three"]
        assert await store.list_plans(BOB, "chat-1") == []
        assert await store.list_plans(ALICE, "chat-2") == []

    async def test_commit_read_and_list_code(self, backend: Backend) -> None:
        store = backend.registries
        first = await store.commit_code(
            ALICE, "chat-1", "main.py", lang="python", content="a\nb\n", message="init"
        )
        assert (first.id, first.lang, first.lines, first.last_commit, first.version, first.content) == (
            "main.py",
            "python",
            2,
            "init",
            1,
            None,
        )
        await store.commit_code(ALICE, "chat-1", "util.py", lang="python", content="", message="empty")
        second = await store.commit_code(
            ALICE, "chat-1", "main.py", lang="py", content="a\nb\nc", message="more"
        )
        assert (second.version, second.lines, second.lang) == (2, 3, "py")
        assert second.created_at == first.created_at
        assert second.updated_at > first.updated_at
        read = await store.read_code(ALICE, "chat-1", "main.py")
        assert read is not None
        assert (read.content, read.version, read.last_commit) == ("a\nb\nc", 2, "more")
        assert await store.read_code(BOB, "chat-1", "main.py") is None
        assert await store.read_code(ALICE, "chat-2", "main.py") is None
        assert await store.read_code(ALICE, "chat-1", "missing.py") is None
        listed = await store.list_code(ALICE, "chat-1")
        assert [(e.id, e.lines, e.content) for e in listed] == [("main.py", 3, None), ("util.py", 0, None)]
        assert [e.id for e in await store.list_code(ALICE, "chat-1", limit=1)] == ["main.py"]
        assert await store.list_code(BOB, "chat-1") == []
        bob = await store.commit_code(BOB, "chat-1", "main.py", lang="go", content="x", message="bob")
        assert bob.version == 1

    async def test_snapshot_lists_what_the_aec_block_shows(self, backend: Backend) -> None:
        store = backend.registries
        assert await store.snapshot(ALICE, "chat-1") == ([], [])
        one = await store.save_plan(ALICE, "chat-1", goal="one", status="todo", model="gm")
        two = await store.save_plan(ALICE, "chat-1", goal="two", status="done")
        await store.commit_code(ALICE, "chat-1", "a.py", lang="python", content="x\n", message="m1")
        await store.commit_code(ALICE, "chat-1", "b.py", lang="python", content="y", message="m2")
        await store.save_plan(BOB, "chat-1", goal="bob's", status="todo")
        plans, code = await store.snapshot(ALICE, "chat-1")
        assert plans == [
            aec.PlanEntry(one.id, "one", "todo", "gm"),
            aec.PlanEntry(two.id, "two", "done", None),
        ]
        assert code == [aec.CodexEntry("a.py", "python", 1, "m1"), aec.CodexEntry("b.py", "python", 1, "m2")]
        plans, code = await store.snapshot(ALICE, "chat-1", limit=1)
        assert [p.id for p in plans] == [two.id]
        assert [c.id for c in code] == ["b.py"]
        assert await store.snapshot(ALICE, "chat-2") == ([], [])

    async def test_forget_deletes_one_users_registries(self, backend: Backend) -> None:
        store = backend.registries
        for user in (ALICE, BOB):
            await store.save_plan(user, "chat-1", goal="g", status="todo")
            await store.save_plan(user, "chat-2", goal="g", status="todo")
            await store.commit_code(user, "chat-1", "a.py", lang="python", content="x", message="m")
        assert await store.forget(ALICE) == {"plans": 2, "codex_entries": 1}
        assert await store.forget(ALICE) == {"plans": 0, "codex_entries": 0}
        assert await store.snapshot(ALICE, "chat-1") == ([], [])
        plans, code = await store.snapshot(BOB, "chat-1")
        assert len(plans) == 1
        assert len(code) == 1

    # Shadow ------------------------------------------------------------------------------------

    async def test_record_and_read_back_a_point(self, backend: Backend) -> None:
        store = backend.shadow
        image, text_payload = payload(b"\x89PNG bytes"), payload(b"long text", "text/plain")
        journal = (  # in call order, signatures in part order, as the domain gives them
            shadow.JournalEntry(0, "call_1", "weather", {"city": "Paris"}, "openwebui"),
            shadow.JournalEntry(1, "call_2", "search", {"q": "tea"}, "echo", {"hits": [1, 2]}),
        )
        signatures = (shadow.Signature(0, 2, b"sig-a"), shadow.Signature(1, 0, b"\x00sig-b"))
        record = point("p1", payloads=(image, text_payload), signatures=signatures, journal=journal)
        assert await store.record(ALICE, record) == 2
        found = await store.stored_points(ALICE, [digest("p1"), digest("unknown"), digest("p1")])
        assert list(found) == [digest("p1")]
        stored = found[digest("p1")]
        assert record.form is not None
        assert stored.cumulative == digest("p1")
        assert stored.role == "model"
        assert stored.skeleton == record.form.skeleton
        assert stored.refs == (image.hash, text_payload.hash)
        assert stored.signatures == signatures
        assert stored.journal == journal
        assert await store.stored_points(BOB, [digest("p1")]) == {}
        assert await store.stored_points(ALICE, []) == {}

    async def test_another_process_reads_the_point_back_in_part_and_call_order(
        self, backend: Backend
    ) -> None:
        journal = (
            shadow.JournalEntry(1, "call_2", "search", {"q": "tea"}, "echo", {"hits": [1, 2]}),
            shadow.JournalEntry(0, "call_1", "weather", {"city": "Paris"}, "openwebui"),
        )
        signatures = (shadow.Signature(1, 0, b"\x00sig-b"), shadow.Signature(0, 2, b"sig-a"))
        image = payload(b"\x89PNG bytes")
        record = point("p1", payloads=(image,), signatures=signatures, journal=journal)
        reader = backend.other_shadow()
        assert await reader.stored_points(ALICE, [digest("p1")]) == {}
        assert await backend.shadow.record(ALICE, record) == 1
        assert await backend.shadow.record(ALICE, point("p2", rich=False)) == 0
        reader = backend.other_shadow()
        found = await reader.stored_points(ALICE, [digest("p1"), digest("p2")])
        assert list(found) == [digest("p1")]
        stored = found[digest("p1")]
        assert record.form is not None
        assert stored.skeleton == record.form.skeleton
        assert stored.refs == (image.hash,)
        assert stored.signatures == (signatures[1], signatures[0])
        assert stored.journal == (journal[1], journal[0])
        assert await reader.payloads(ALICE, [image.hash]) == {image.hash: image}
        assert await backend.other_shadow().stored_points(BOB, [digest("p1")]) == {}
        await backend.shadow.forget(ALICE)
        assert await backend.other_shadow().stored_points(ALICE, [digest("p1")]) == {}

    async def test_a_stored_point_keeps_what_it_has_but_an_index_row_gets_its_form(
        self, backend: Backend
    ) -> None:
        store = backend.shadow
        assert await store.stored_points(ALICE, [digest("p1")]) == {}  # looked up before it is stored
        assert await store.record(ALICE, point("p1", rich=False)) == 0
        assert await store.stored_points(ALICE, [digest("p1")]) == {}  # an index row only
        first = point("p1", skeleton=[{"role": "model", "parts": [{"text": "first"}]}])
        assert await store.record(ALICE, first) == 0
        again = point(
            "p1",
            skeleton=[{"role": "model", "parts": [{"text": "second"}]}],
            payloads=(payload(b"new"),),
            signatures=(shadow.Signature(0, 0, b"s"),),
        )
        assert await store.record(ALICE, again) == 1  # the payload is new; the point keeps its form
        stored = (await store.stored_points(ALICE, [digest("p1")]))[digest("p1")]
        assert stored.skeleton == [{"role": "model", "parts": [{"text": "first"}]}]
        assert stored.refs == ()
        assert stored.signatures == ()
        assert await store.payloads(ALICE, [payload(b"new").hash]) == {payload(b"new").hash: payload(b"new")}

    async def test_payloads_are_stored_once_per_user(self, backend: Backend) -> None:
        store = backend.shadow
        shared, other = payload(b"shared"), payload(b"other")
        assert await store.record(ALICE, point("p1", payloads=(shared,))) == 1
        assert await store.record(ALICE, point("p2", payloads=(shared, other))) == 1
        assert await store.record(BOB, point("p1", payloads=(shared,))) == 1
        found = await store.payloads(ALICE, [shared.hash, other.hash, digest("unknown"), shared.hash])
        assert found == {shared.hash: shared, other.hash: other}
        assert isinstance(found[shared.hash].data, bytes)
        assert await store.payloads(BOB, [other.hash]) == {}
        assert await store.payloads(ALICE, []) == {}

    async def test_forget_deletes_one_users_shadow(self, backend: Backend) -> None:
        store = backend.shadow
        journal = (shadow.JournalEntry(0, "call_1", "f", {}, "openwebui"),)
        for user in (ALICE, BOB):
            await store.record(
                user,
                point(
                    "p1",
                    payloads=(payload(b"x"),),
                    signatures=(shadow.Signature(0, 0, b"s"),),
                    journal=journal,
                ),
            )
            await store.record(user, point("p2", rich=False))
        assert await store.forget(ALICE) == {
            "suture_index": 2,
            "rich_payloads": 1,
            "cognitive_signatures": 1,
            "tool_journal": 1,
        }
        assert await store.stored_points(ALICE, [digest("p1")]) == {}
        assert await store.payloads(ALICE, [payload(b"x").hash]) == {}
        assert await store.forget(ALICE) == {
            "suture_index": 0,
            "rich_payloads": 0,
            "cognitive_signatures": 0,
            "tool_journal": 0,
        }
        assert list(await store.stored_points(BOB, [digest("p1")])) == [digest("p1")]
        assert await store.record(ALICE, point("p1")) == 0
        assert list(await store.stored_points(ALICE, [digest("p1")])) == [digest("p1")]
