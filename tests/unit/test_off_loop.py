"""CPU-bound steps on large inputs run off the event loop's thread (issue 18, part 9): hashing and
pricing a long chat in the filters, the offline LLM's extractive work, and they stop when the hook
stops waiting. Checked by where the work runs (spies), never by how long it takes."""

from __future__ import annotations

import asyncio
import sys
import threading
from types import SimpleNamespace
from typing import Any, cast

import pytest

from echo.adapters.llm.offline import OfflineLLM
from echo.adapters.store import errors as store_errors
from echo.capabilities import base
from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.compression import filter as compression_filter
from echo.capabilities.context import filter as context_filter
from echo.capabilities.masking import filter as masking_filter
from echo.capabilities.memory import filter as memory_filter
from echo.domain import bodies, extractive, output_items
from echo.domain.compression import allowance
from echo.ports import backends as backends_port
from echo.ports import llm
from echo.support import offload


class Threads:
    """Records the thread each call of the spied functions ran on."""

    def __init__(self) -> None:
        self.seen: dict[str, list[threading.Thread]] = {}

    def spy(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        original = getattr(owner, name)
        key = f"{getattr(owner, '__name__', owner)}.{name}"

        def spied(*args: Any, **kwargs: Any) -> Any:
            self.seen.setdefault(key, []).append(threading.current_thread())
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, spied)

    def off(self, key: str, loop_thread: threading.Thread) -> bool:
        """Every call of `key` ran, and none on `loop_thread`."""
        threads = self.seen.get(key, [])
        return bool(threads) and all(thread is not loop_thread for thread in threads)


@pytest.fixture
def threads() -> Threads:
    return Threads()


@pytest.fixture
def few(monkeypatch: pytest.MonkeyPatch) -> None:
    """A "large" request from 4 messages on, so the tests stay small."""
    monkeypatch.setattr(compression_costs, "OFFLOAD_MESSAGES", 4)


def chat(count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about rivers"}
        for i in range(count)
    ]


def context(filter_id: str, phase: base.Phase, body: dict[str, Any]) -> base.HookContext:
    return base.HookContext(
        filter_id=filter_id,
        phase=phase,
        user={"id": "u1"},
        ids=bodies.turn_ids(body, {"id": "u1"}),
        valves=None,
    )


async def test_off_loop_runs_small_work_here_and_large_work_on_a_worker_thread(few: None) -> None:
    here = threading.current_thread()
    seen: list[threading.Thread] = []

    def work(stop: compression_costs.StopCheck) -> str:
        seen.append(threading.current_thread())
        return "done"

    assert await compression_costs.off_loop(3, work) == "done"
    assert await compression_costs.off_loop(4, work) == "done"
    assert seen[0] is here
    assert seen[1] is not here
    assert seen[1].name.startswith("echo-filters")


async def test_work_the_hook_no_longer_waits_for_is_told_to_stop(few: None) -> None:
    entered, stopped = threading.Event(), threading.Event()

    def work(stop: compression_costs.StopCheck) -> None:
        entered.set()
        while not stop():
            stopped.wait(0.001)
        stopped.set()

    task = asyncio.create_task(compression_costs.off_loop(10, work))
    assert await asyncio.to_thread(entered.wait, 30)
    task.cancel()  # the hook's deadline
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(stopped.wait, 30)


def test_prepare_stops_when_told_and_remembers_nothing() -> None:
    costs = compression_costs.Costs()
    messages = chat(compression_costs.STOP_EVERY * 3)
    looks = iter([False, False, True])
    with pytest.raises(compression_costs.Abandoned):
        costs.prepare(messages, ("chat",), lambda: next(looks, True))
    # Nothing half-done stands for the chat: the same request is prepared in full.
    assert costs.prepare(messages, ("chat",)) == compression_costs.Costs().prepare(messages)


async def test_a_long_chats_compression_inlet_hashes_and_assembles_off_the_loop(
    few: None, threads: Threads, monkeypatch: pytest.MonkeyPatch
) -> None:
    flt = compression_filter.CompressionFilter()
    threads.spy(monkeypatch, flt.costs, "prepare")
    threads.spy(monkeypatch, compression_filter.assembly, "assemble")
    body = {"chat_id": "c1", "messages": chat(12)}
    assert await flt.inlet(body, context(flt.id, "inlet", body)) == allowance.with_room(body, 0)
    here = threading.current_thread()
    assert threads.off(f"{flt.costs}.prepare", here)
    assert threads.off("echo.domain.compression.assembly.assemble", here)


class _DownStore:
    def transaction(self) -> Any:
        raise store_errors.TransientStoreError("down for the test")


_DOWN = backends_port.Backends(
    store=cast(Any, SimpleNamespace(tenant="echo_test", transactions=_DownStore())),
    index=cast(Any, object()),  # never asked by the outlet
)


async def test_a_long_chats_first_memory_outlet_hashes_off_the_loop(
    few: None, threads: Threads, monkeypatch: pytest.MonkeyPatch
) -> None:
    flt = memory_filter.MemoryFilter(lambda: _DOWN)
    threads.spy(monkeypatch, flt.costs, "prepare")
    threads.spy(monkeypatch, output_items, "unfold_output_items")
    body = {"chat_id": "c1", "messages": chat(12)}
    ctx = context(flt.id, "outlet", body)
    assert await flt.outlet(body, ctx) is body
    here = threading.current_thread()
    assert threads.off(f"{flt.costs}.prepare", here)
    assert threads.off("echo.domain.output_items.unfold_output_items", here)
    assert "nothing was memorised" in ctx.events[0].description  # the windows were due: it got that far


async def test_a_long_chats_masking_outlet_runs_off_the_loop(
    few: None, threads: Threads, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads.spy(monkeypatch, bodies, "map_assistant_text")
    counts: list[Any] = []
    flt = context_filter.ContextFilter(counts.append)
    key = "AIza" + "SyD" + "x7" * 16
    body = {"chat_id": "c1", "messages": [*chat(11), {"role": "assistant", "content": f"the key: {key}"}]}
    answer = await flt.outlet(body, context(flt.id, "outlet", body))
    assert key not in str(answer)
    assert answer["messages"][:11] == body["messages"][:11]
    assert threads.off("echo.domain.bodies.map_assistant_text", threading.current_thread())
    assert masking_filter.WITHHELD not in str(answer)


async def test_the_offline_llm_computes_on_a_worker_thread(
    threads: Threads, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads.spy(monkeypatch, extractive, "summarize")
    request = llm.LLMRequest(
        model="m",
        messages=[("user", "The user lives in Lyon. " * 50)],
        max_output_tokens=50,
        purpose="summary",
    )
    result = await OfflineLLM("test").generate(request)
    assert result.text
    assert threads.off("echo.domain.extractive.summarize", threading.current_thread())


def test_spies_name_what_they_spy() -> None:
    threads = Threads()
    monkeypatch = pytest.MonkeyPatch()
    try:
        threads.spy(monkeypatch, extractive, "summarize")
        extractive.summarize("One sentence here. Another one there.", 20)
    finally:
        monkeypatch.undo()
    assert list(threads.seen) == ["echo.domain.extractive.summarize"]
    assert threads.off("echo.domain.extractive.summarize", threading.current_thread()) is False


async def test_while_work_runs_off_the_loop_the_loop_gets_the_gil_back_sooner() -> None:
    """A busy worker thread hands the GIL over every switch interval: 1 ms while offloaded work
    runs, the interval before it once the last such work ends."""
    before = sys.getswitchinterval()
    assert before > offload.SWITCH_SECONDS
    seen: list[float] = []
    entered, release = threading.Event(), threading.Event()

    def work() -> None:
        seen.append(sys.getswitchinterval())
        entered.set()
        release.wait(30)

    first = asyncio.create_task(offload.to_thread(work))
    assert await asyncio.to_thread(entered.wait, 30)
    assert await offload.to_thread(sys.getswitchinterval) == offload.SWITCH_SECONDS  # nested: still low
    assert sys.getswitchinterval() == offload.SWITCH_SECONDS  # while `work` runs
    release.set()
    await first
    assert seen == [offload.SWITCH_SECONDS]
    assert sys.getswitchinterval() == before
