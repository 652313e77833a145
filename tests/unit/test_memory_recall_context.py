"""Recall injects only what the request does not hold yet, above the floor, within the budget; the
memory search tool has the same floor and says each result's score.

In process: `MemoryFilter` and `search_memories` over the hash embedder, the in-memory vector store
and the in-memory conversation store (for the summary the compression filter names in `metadata`).
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

from echo.adapters import in_memory_store
from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities import base
from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.memory import backends as memory_backends
from echo.capabilities.memory import distill
from echo.capabilities.memory import filter as memory_filter
from echo.capabilities.memory import search as memory_search
from echo.config import valves as valves_module
from echo.domain import bodies, tokens
from echo.domain.compression import allowance
from echo.domain.memory import context, records
from echo.ports import backends as backends_port
from echo.ports import store as store_port
from echo.ports import vectors as vectors_base

USER = "u1"
FACT = "Alice is allergic to peanuts"
COVERED = "c" * 64


def turns(prefix: str, count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{prefix}{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"{prefix} message {i}",
        }
        for i in range(count)
    ]


def invariants(messages: list[dict[str, Any]]) -> list[str]:
    return [link.invariant for link in compression_costs.Costs().prepare(messages).turns.links]


class Runtime:
    def __init__(self) -> None:
        self.embedder = FakeEmbedder(dimension=32)
        self.vectors: InMemoryVectorStore | None = InMemoryVectorStore(dimension=32)
        self.tables = in_memory_store.Tables()
        self.conversations = in_memory_store.Conversations(self.tables)

    def backends(self) -> backends_port.Backends:
        store = cast(
            backends_port.Repositories, SimpleNamespace(tenant="t", conversations=self.conversations)
        )
        return backends_port.Backends(store=store, index=memory_backends.RuntimeBackends(cast(Any, self)))

    async def remember(
        self, memory_id: str, text: str, sources: list[str] | None, chat_id: str = "c1"
    ) -> None:
        window = records.WindowRef(chat_id, memory_id * 64, tuple(sources or ()))
        now = time.time()
        memory = records.Memory(
            memory_id, USER, memory_id, text, 3, ("t",), chat_id, 1, now, now, (window,) if sources else ()
        )
        vector = (await self.embedder.embed([text]))[0]
        assert self.vectors is not None
        point = vectors_base.Point(
            id=memory_id, vector=vector, user_id=USER, chat_id=chat_id, payload=distill.point_payload(memory)
        )
        await self.vectors.upsert(vectors_base.Kind.MEMORY, [point])


def inlet(
    runtime: Runtime,
    messages: list[dict[str, Any]],
    *,
    summary: str | None = None,
    room: int | None = None,
    **valves: Any,
) -> Any:
    body: dict[str, Any] = {
        "messages": [*messages, {"role": "user", "content": FACT}],
        "metadata": {"user_id": USER, "chat_id": "c1"},
    }
    if summary is not None:
        body = context.with_summary(body, summary)
    if room is not None:
        body = allowance.with_room(body, room)
    settings = valves_module.MemoryValves(**{"RECALL_MIN_SIMILARITY": 0.5, **valves})
    ctx = base.HookContext(
        "echo_memory", "inlet", {"id": USER}, bodies.turn_ids(body, {"id": USER}), settings
    )
    flt = memory_filter.MemoryFilter(runtime.backends)
    return flt.inlet(body, ctx)


def recalled(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content.split("</echo_memories>", 1)[0] if content.startswith("<echo_memories") else ""


async def test_a_memory_whose_messages_the_request_carries_is_not_recalled_until_they_leave() -> None:
    runtime = Runtime()
    chat = turns("here", 6)
    await runtime.remember("a", f"{FACT}, said here", invariants(chat[2:5]))
    await runtime.remember("b", f"{FACT}, said elsewhere", invariants(turns("elsewhere", 4)))
    held = memory_filter.memory_metrics.MEMORY_RECALL_HELD._value.get()

    block = recalled(await inlet(runtime, chat))
    assert "said elsewhere" in block
    assert "said here" not in block  # its messages are all in the request
    assert memory_filter.memory_metrics.MEMORY_RECALL_HELD._value.get() == held + 1

    block = recalled(await inlet(runtime, chat[:3] + chat[5:]))  # messages 3 and 4 left the context
    assert "said here" in block
    assert "said elsewhere" in block


async def test_a_memory_the_injected_summary_states_is_not_recalled() -> None:
    runtime = Runtime()
    chat = turns("long", 10)
    await runtime.remember("a", f"{FACT}, said early", invariants(chat)[1:4])
    refs = invariants(chat)[1:8]
    stating, other = "e" * 64, "f" * 64
    await runtime.conversations.save_summary(
        store_port.NewSummary(
            USER, stating, 8, 1, f"Early on: {FACT}, said early.", "en-US", "m", "offline", refs
        )
    )
    await runtime.conversations.save_summary(
        store_port.NewSummary(
            USER, other, 8, 1, "They talked about the weather.", "en-US", "m", "offline", refs
        )
    )
    request = chat[:1] + chat[8:]  # head, (the summary stands for 1..7), tail
    assert "said early" in recalled(await inlet(runtime, request))  # no summary named: they left
    assert recalled(await inlet(runtime, request, summary=stating)) == ""  # the summary states it
    assert "said early" in recalled(await inlet(runtime, request, summary=other))  # the summary lost it
    assert "said early" in recalled(await inlet(runtime, request, summary="d" * 64))  # another summary


async def test_the_chats_own_memories_take_only_the_room_compression_freed() -> None:
    runtime = Runtime()
    chat = turns("here", 6)
    await runtime.remember("a", f"{FACT}, said here long ago", invariants(turns("gone", 4)))
    await runtime.remember("b", f"{FACT}, said in another chat", invariants(turns("other", 4)), "c2")
    unlimited = recalled(await inlet(runtime, chat))
    assert "long ago" in unlimited
    assert "another chat" in unlimited
    nothing_freed = recalled(await inlet(runtime, chat, room=0))  # a chat under the threshold
    assert "another chat" in nothing_freed  # what this chat would not hold otherwise
    assert "long ago" not in nothing_freed  # it would cost more than Open WebUI's own request
    assert "long ago" in recalled(await inlet(runtime, chat, room=400))


async def test_memories_without_sources_and_below_the_floor() -> None:
    runtime = Runtime()
    await runtime.remember("old", f"{FACT}, an older point", None)  # written before sources were kept
    await runtime.remember("far", "Oslo weather gets cold during winter", invariants(turns("x", 2)))
    block = recalled(await inlet(runtime, turns("here", 2)))
    assert "an older point" in block
    assert "Oslo" not in block  # below the floor
    assert "Oslo" in recalled(await inlet(runtime, turns("here", 2), RECALL_MIN_SIMILARITY=0.0))


async def test_the_block_keeps_to_its_token_budget() -> None:
    runtime = Runtime()
    for i in range(12):
        await runtime.remember(
            f"m{i}", f"{FACT} number {i} " + "and more words " * 8, invariants(turns(f"c{i}", 2))
        )
    body = await inlet(runtime, turns("here", 2), RECALL_MAX_TOKENS=200, RECALL_MIN_SIMILARITY=0.0)
    block = recalled(body) + "</echo_memories>"
    assert 1 <= block.count("\n- [") < 12
    assert tokens.estimate_tokens(block) <= 200


async def test_search_memories_has_the_floor_and_says_each_score() -> None:
    runtime = Runtime()
    await runtime.remember("a", FACT, None)
    await runtime.remember("b", "Oslo weather gets cold during winter", None)
    found = await memory_search.search_memories(runtime.backends(), USER, FACT, 5)
    assert [hit["id"] for hit in found] == ["a"]
    assert found[0]["score"] > memory_search.MIN_SCORE
    everything = await memory_search.search_memories(runtime.backends(), USER, FACT, 5, min_score=-1.0)
    assert {hit["id"] for hit in everything} == {"a", "b"}
    assert all(isinstance(hit["score"], float) for hit in everything)
