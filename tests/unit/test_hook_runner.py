"""The hook runner's failure policy (DESIGN §6): a failed hook answers its body, a masking outlet fails
closed, and the answer is serialised inside the guard."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from echo.capabilities import base
from echo.capabilities.masking import filter as masking_filter
from echo.config.valves import ContextValves
from echo.domain import bodies
from echo.entrypoints.http import runner

GOOGLE_KEY = "AIza" + "SyD" + "x7" * 16
BODY = {
    "chat_id": "c",
    "messages": [
        {"role": "user", "content": f"mine: {GOOGLE_KEY}"},
        {"role": "assistant", "content": "Rien de secret ici."},
        {"role": "assistant", "content": f"la clé : {GOOGLE_KEY}"},
    ],
}


class _Masker:
    """A masking outlet that misbehaves as told: sleeps past its deadline, raises, or answers NaN."""

    id = "echo_context"
    name = "test"
    priority = 0
    description = "test"

    def __init__(self, misbehaviour: str) -> None:
        self.misbehaviour = misbehaviour
        self.seen_deadline: float | None = None

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return await self.outlet(body, ctx)

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        self.seen_deadline = ctx.deadline
        if self.misbehaviour == "slow":
            await asyncio.sleep(5)
        if self.misbehaviour == "raise":
            raise RuntimeError("masking broke")
        return {**body, "score": float("nan")}

    def fail_closed(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return masking_filter.withhold_suspect(body, lambda counts: None)


class _Plain(_Masker):
    fail_closed = None  # type: ignore[assignment]


def context(phase: base.Phase) -> base.HookContext:
    return base.HookContext(
        filter_id="echo_context",
        phase=phase,
        user={},
        ids=bodies.turn_ids(BODY),
        valves=ContextValves(INLET_DEADLINE_MS=100, OUTLET_DEADLINE_MS=100),
    )


async def test_a_failed_masking_outlet_withholds_what_may_hold_a_secret() -> None:
    for misbehaviour in ("slow", "raise", "nan"):
        flt = _Masker(misbehaviour)
        started = time.monotonic()
        answer = json.loads(await runner.run_hook(flt, BODY, context("outlet")))
        assert time.monotonic() - started < 3.0  # the slow one sleeps 5 s: its deadline (0.1 s) cut it
        assert [m["content"] for m in answer["messages"]] == [
            f"mine: {GOOGLE_KEY}",  # user messages are not rewritten
            "Rien de secret ici.",
            masking_filter.WITHHELD,
        ]
        assert flt.seen_deadline is not None
        assert 0 < flt.seen_deadline - started <= 0.1 + 0.05


async def test_other_failures_answer_the_body_unchanged() -> None:
    assert isinstance(_Masker("nan"), base.FailsClosed)
    assert not isinstance(_Plain("nan"), base.FailsClosed)
    for flt, phase in ((_Masker("raise"), "inlet"), (_Plain("slow"), "outlet"), (_Plain("nan"), "outlet")):
        answer = await runner.run_hook(flt, BODY, context(phase))  # type: ignore[arg-type]
        assert json.loads(answer) == BODY


class _Waiting(_Plain):
    """A filter that needs `extension` seconds more than its 0.1 s deadline valve for this call."""

    def __init__(self, extension: Any) -> None:
        super().__init__("ok")
        self.extension = extension

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        self.seen_deadline = ctx.deadline
        await asyncio.sleep(0.4)
        return {**body, "waited": True}

    def deadline_extension(self, body: Any, ctx: base.HookContext) -> float:
        if isinstance(self.extension, Exception):
            raise self.extension
        return float(self.extension)


async def test_a_filter_may_extend_its_deadline_for_one_call() -> None:
    assert isinstance(_Waiting(1.0), base.ExtendsDeadline)
    started = time.monotonic()
    answer = json.loads(await runner.run_hook(_Waiting(2.0), BODY, context("inlet")))
    assert answer["waited"] is True  # 0.4 s of work passed a 0.1 s valve: the extension held
    assert time.monotonic() - started < 2.0


async def test_a_failing_or_negative_extension_keeps_the_valve_deadline() -> None:
    for extension in (RuntimeError("broken"), -5.0):
        answer = json.loads(await runner.run_hook(_Waiting(extension), BODY, context("inlet")))
        assert "waited" not in answer  # cut at 0.1 s: the body comes back unchanged


async def test_the_deadline_counts_from_the_request_arrival() -> None:
    """A request that spent 80 ms of its 100 ms before the hook ran (a big body, a busy loop) has what is
    left, less the margin kept for writing the answer."""
    flt = _Plain("slow")
    started = time.monotonic()
    answer = json.loads(await runner.run_hook(flt, BODY, context("inlet"), received_at=started - 0.08))
    assert answer == BODY  # cut: the body unchanged
    assert flt.seen_deadline is not None
    assert flt.seen_deadline - started <= 0.1 - 0.08 - runner.ANSWER_MARGIN_S + 0.01
    assert time.monotonic() - started < 0.1
