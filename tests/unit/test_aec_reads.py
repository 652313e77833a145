"""The AEC block reads the chat's attachments and registries at once; a store that fails leaves the
block without them, and the turn goes on (DESIGN §6)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from echo.adapters.store import errors as store_errors
from echo.capabilities import base
from echo.capabilities.context import filter as context_filter
from echo.domain import aec, bodies
from echo.ports import backends as backends_port
from echo.ports import store as store_port

ATTACHED = store_port.Attachment(
    source_id="src-1", chat_id="c1", file_id="f1", filename="notes.txt", mime_type="text/plain",
    mode="rag", status="ready",
)  # fmt: skip


class _Reads:
    """Both reads, each waiting until the other has started: they only finish when run at once."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.started: list[str] = []
        self.both = asyncio.Event()

    async def _enter(self, name: str) -> None:
        self.started.append(name)
        if len(self.started) == 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), 2)

    async def of_chat(self, user_id: str, chat_id: str) -> list[store_port.Attachment]:
        await self._enter("attachments")
        if self.fail:
            raise store_errors.TransientStoreError("down for the test")
        return [ATTACHED]

    async def snapshot(self, user_id: str, chat_id: str) -> tuple[list[Any], list[Any]]:
        await self._enter("registries")
        return [aec.PlanEntry("p1", "ship it", "active", "m")], []


def _inlet(reads: _Reads) -> dict[str, Any]:
    store = SimpleNamespace(tenant="echo_test", attachments=reads, registries=reads)
    backends = backends_port.Backends(store=cast(Any, store), index=None)
    flt = context_filter.ContextFilter(lambda counts: None, backends=lambda: backends)
    body = {"chat_id": "c1", "messages": [{"role": "user", "content": "hello"}]}
    ctx = base.HookContext(
        filter_id=flt.id,
        phase="inlet",
        user={"id": "u1"},
        ids=bodies.turn_ids(body, {"id": "u1"}),
        valves=None,
    )
    return asyncio.run(flt.inlet(body, ctx))


def test_the_attachments_and_registries_are_read_at_once() -> None:
    reads = _Reads()
    answer = _inlet(reads)
    assert sorted(reads.started) == ["attachments", "registries"]
    block = answer["messages"][-1]["content"]
    assert "notes.txt" in block
    assert "ship it" in block


def test_a_failing_store_leaves_the_block_without_them() -> None:
    answer = _inlet(_Reads(fail=True))
    block = answer["messages"][-1]["content"]
    assert "hello" in block
    assert "notes.txt" not in block
    assert "ship it" not in block
