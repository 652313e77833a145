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
from echo.domain import bodies
from echo.entrypoints import runtime
from echo.ports import backends as backends_port

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
