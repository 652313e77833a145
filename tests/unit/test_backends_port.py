"""The backends port (`echo.ports.backends`): what the runtime gives the filters, and what they do
with parts absent or not ready yet; no PostgreSQL (the store is never asked)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities import base, registry
from echo.capabilities.memory import search as memory_search
from echo.domain import bodies, tokens
from echo.entrypoints import runtime
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base

USER = {"id": "u1"}


def _runtime() -> runtime.Runtime:
    return runtime.Runtime(
        store=cast(Any, SimpleNamespace(schema="echo_t1")), embedder=FakeEmbedder(dimension=16)
    )


async def test_the_runtime_gives_one_value_whose_index_is_ready_after_the_warm_up() -> None:
    rt = _runtime()
    backends = rt.backends()
    assert rt.backends() is backends
    assert backends.store is not None
    assert backends.store.tenant == "echo_t1"
    assert backends.openwebui is None
    index = backends.index
    assert index is not None
    assert (index.embedder(), await index.vectors()) == (None, None)  # still warming up: neither
    rt.vectors = InMemoryVectorStore(dimension=16)
    assert (index.embedder(), await index.vectors()) == (rt.embedder, rt.vectors)  # both


async def test_memory_search_is_not_ready_until_the_index_is() -> None:
    rt = _runtime()
    for backends in (backends_port.NONE, rt.backends()):
        with pytest.raises(memory_search.BackendsNotReady) as refused:
            await memory_search.search_memories(backends, "u1", "dogs", 3)
        assert refused.value.retryable
    rt.vectors = InMemoryVectorStore(dimension=16)
    assert await memory_search.search_memories(rt.backends(), "u1", "dogs", 3) == []


async def test_filters_built_without_backends_pass_what_needs_a_store() -> None:
    filters = registry.build_filters((), lambda counts: None)
    body = {
        "chat_id": "c1",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    }
    for hook_id in ("echo_compression", "echo_memory"):
        flt = filters.get(hook_id)
        assert flt is not None
        ctx = base.HookContext(hook_id, "outlet", USER, bodies.turn_ids(body, USER), None)
        assert await flt.outlet(body, ctx) is body  # nothing stored, nothing enqueued, no event
        assert ctx.events == []


async def test_memory_search_keeps_to_its_token_budget_nearest_first_and_says_each_score() -> None:
    rt = _runtime()
    rt.vectors = InMemoryVectorStore(dimension=16)
    embedder = FakeEmbedder(dimension=16)
    texts = [f"Caroline adopted a dog named Rex number {n} " + "and walks him daily " * 6 for n in range(6)]
    vectors = await embedder.embed(texts)
    await rt.vectors.upsert(
        vectors_base.Kind.MEMORY,
        [
            vectors_base.Point(id=f"m{n}", vector=vector, user_id="u1", payload={"summary": text})
            for n, (text, vector) in enumerate(zip(texts, vectors, strict=True))
        ],
    )
    each = tokens.estimate_tokens(texts[0])
    unbounded = await memory_search.search_memories(
        rt.backends(), "u1", texts[0], 6, min_score=-1.0, max_tokens=None
    )
    assert len(unbounded) == 6
    bounded = await memory_search.search_memories(
        rt.backends(), "u1", texts[0], 6, min_score=-1.0, max_tokens=2 * each + 1
    )
    assert [hit["id"] for hit in bounded] == [hit["id"] for hit in unbounded][:2]  # nearest first
    assert bounded[0]["summary"] == texts[0]
    assert all(isinstance(hit["score"], float) for hit in bounded)
