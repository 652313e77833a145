"""Outlet masking under a deadline (echo.filters.masking): off the loop, in chunks, failing closed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from echo import masking
from echo.filters import masking as masking_filter

GOOGLE_KEY = "AIza" + "SyD" + "x7" * 16
GOOGLE_LABEL = "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]"
WITHHELD = masking_filter.WITHHELD
PROSE = "Une réponse ordinaire, sans rien de secret. " * 2400  # ~100 KB: four chunks
CRAFTED = "sk-" * 1_400_000  # ~4 MB of match starts: several seconds to mask


def outlet(*answers: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i, answer in enumerate(answers):
        messages += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": answer}]
    return {"chat_id": "c", "messages": messages}


def contents(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "assistant"]


def stop_after(checks: int) -> Callable[[], bool]:
    calls = 0

    def should_stop() -> bool:
        nonlocal calls
        calls += 1
        return calls > checks

    return should_stop


def test_masks_content_and_output_like_mask_secrets() -> None:
    body = outlet(f"key {GOOGLE_KEY}", PROSE + GOOGLE_KEY)
    body["messages"][1]["output"] = [
        {"type": "message", "content": [{"type": "output_text", "text": GOOGLE_KEY}]}
    ]
    masked, counts = masking_filter.mask_outlet_body(body)
    assert contents(masked) == [f"key {GOOGLE_LABEL}", PROSE + GOOGLE_LABEL]
    assert masked["messages"][1]["output"][0]["content"][0]["text"] == GOOGLE_LABEL
    assert counts == {"google_api_key": 3}
    assert masked["messages"][0] is body["messages"][0]  # untouched messages are shared, not copied


def test_out_of_time_keeps_the_verified_start_and_withholds_the_rest() -> None:
    body = outlet(PROSE + GOOGLE_KEY, f"short {GOOGLE_KEY}", CRAFTED + GOOGLE_KEY)
    # Shortest first: the short text, then PROSE, stopped at its second chunk; CRAFTED never starts.
    masked, counts = masking_filter.mask_outlet_body(body, stop_after(3))
    prose, short, crafted = contents(masked)
    assert short == f"short {GOOGLE_LABEL}"
    assert prose.endswith(WITHHELD)
    verified = prose.removesuffix(WITHHELD)
    assert 30_000 < len(verified) <= masking_filter.CHUNK_CHARS
    assert verified == PROSE[: len(verified)]
    assert crafted == WITHHELD
    assert GOOGLE_KEY not in str(masked)
    assert counts == {"google_api_key": 1, "unverified_text": 2}


def test_withheld_label_is_inert() -> None:
    assert masking.mask_secrets(WITHHELD) == masking.MaskResult(WITHHELD, {})
    assert not masking.may_hold_secret(WITHHELD)


def test_may_hold_secret_looks_across_its_windows() -> None:
    for at in (0, 64 * 1024 - 5, 64 * 1024, 200_000):
        text = "x" * at + "sk-" + "y" * 10
        assert masking.may_hold_secret(text)
    assert not masking.may_hold_secret("plain " * 50_000)
    assert not masking.may_hold_secret("")


async def test_answers_before_its_deadline_without_holding_the_loop() -> None:
    seen: list[dict[str, int]] = []
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    started = time.perf_counter()
    deadline = time.monotonic() + 1.0
    masked = await masking_filter.mask_and_report(
        outlet(f"early {GOOGLE_KEY}", CRAFTED + GOOGLE_KEY),
        lambda counts: seen.append(dict(counts)),
        deadline=deadline,
    )
    elapsed = time.perf_counter() - started
    done.set()
    await ticking
    early, crafted = contents(masked)
    assert early == f"early {GOOGLE_LABEL}"
    assert crafted.endswith(WITHHELD)
    assert GOOGLE_KEY not in crafted
    assert elapsed < 1.0
    assert max(gaps) < 0.3  # the loop went on while the thread masked
    assert seen == [{"google_api_key": 1, "unverified_text": 1}]


async def test_without_a_deadline_it_finishes_off_the_loop() -> None:
    text = (PROSE + GOOGLE_KEY + " ") * 3
    masked = await masking_filter.mask_and_report(outlet(text), lambda counts: None)
    assert contents(masked) == [masking.mask_secrets(text).text]
    result = await masking_filter.mask_text(text)
    assert result == masking.mask_secrets(text)


def test_withhold_suspect_keeps_what_cannot_hold_a_secret() -> None:
    seen: list[dict[str, int]] = []
    body = outlet("Bonjour, rien à signaler.", f"the key is {GOOGLE_KEY}", "a task-runner")
    safe = masking_filter.withhold_suspect(body, lambda counts: seen.append(dict(counts)))
    assert contents(safe) == ["Bonjour, rien à signaler.", WITHHELD, WITHHELD]  # "task-" holds "sk-"
    assert seen == [{"unverified_text": 2}]
