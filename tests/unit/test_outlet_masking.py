"""Outlet masking under a deadline (echo.capabilities.masking.filter): off the loop, in chunks, failing
closed, and
every text the web UI shows of an answer (tool-call arguments and results, reasoning, sources)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echo.capabilities import base
from echo.capabilities.context.filter import ContextFilter
from echo.capabilities.events import StatusEvent
from echo.capabilities.masking import filter as masking_filter
from echo.capabilities.shadow.filter import PipeFilter
from echo.config.valves import ContextValves
from echo.domain import bodies, masking
from echo.entrypoints.http import runner

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


# --- every text the web UI shows (issue 18): tool calls and results, reasoning, sources -------------

ZW_KEY = GOOGLE_KEY[:4] + "\u200b" + GOOGLE_KEY[4:]  # a zero-width space inside: still a key


def shown_everywhere() -> dict[str, Any]:
    arguments = json.dumps({"query": "deploy", "api_key": ZW_KEY})
    assistant = {
        "id": "a1",
        "role": "assistant",
        "content": f"Done with {GOOGLE_KEY}.",
        "reasoning_content": f"The user's key is {GOOGLE_KEY}",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "deploy", "arguments": arguments}}
        ],
        "output": [
            {
                "type": "reasoning",
                "id": "r1",
                "summary": [{"type": "summary_text", "text": f"key {GOOGLE_KEY}"}],
            },
            {"type": "function_call", "id": "c1", "call_id": "c1", "name": "deploy", "arguments": arguments},
            {
                "type": "function_call_output",
                "id": "o1",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": f"deployed with {GOOGLE_KEY}"}],
                "status": "completed",
            },
            {
                "type": "message",
                "id": "m1",
                "content": [{"type": "output_text", "text": f"Done with {GOOGLE_KEY}."}],
            },
        ],
        "sources": [
            {
                "source": {"id": "f1", "name": "notes.txt", "type": "file"},
                "document": [f"the key is {GOOGLE_KEY}"],
                "metadata": [{"source": "notes.txt", "name": f"notes {GOOGLE_KEY}"}],
            }
        ],
        "error": {"content": f"upstream refused {GOOGLE_KEY}"},
    }
    return {
        "chat_id": "c",
        "id": "a1",
        "messages": [
            {"id": "u1", "role": "user", "content": f"my key is {GOOGLE_KEY}"},
            assistant,
            {"role": "tool", "tool_call_id": "c1", "content": f"result {GOOGLE_KEY}"},
        ],
    }


def test_masks_every_text_the_web_ui_shows() -> None:
    body = shown_everywhere()
    masked, counts = masking_filter.mask_outlet_body(body)
    user, assistant, tool = masked["messages"]
    assert user is body["messages"][0]  # what the user wrote is theirs: not an answer to mask
    shown = json.dumps([assistant, tool], ensure_ascii=False)
    assert GOOGLE_KEY not in shown
    assert GOOGLE_KEY[6:20] not in shown
    assert shown.count(GOOGLE_LABEL) == 11
    assert counts == {"google_api_key": 9}  # counted per distinct text (content and its output item agree)
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {
        "query": "deploy",
        "api_key": GOOGLE_LABEL,
    }
    assert json.loads(assistant["output"][1]["arguments"])["api_key"] == GOOGLE_LABEL
    assert [item["type"] for item in assistant["output"]] == [
        i["type"] for i in body["messages"][1]["output"]
    ]
    assert assistant["output"][2]["call_id"] == "c1"
    assert assistant["sources"][0]["source"] == {"id": "f1", "name": "notes.txt", "type": "file"}


def test_withhold_suspect_covers_every_shown_text() -> None:
    safe = masking_filter.withhold_suspect(shown_everywhere(), lambda counts: None)
    shown = json.dumps(safe["messages"][1:], ensure_ascii=False)
    assert GOOGLE_KEY not in shown
    assert safe["messages"][1]["output"][0]["type"] == "reasoning"


def test_bodies_nested_deep_are_masked_without_recursion() -> None:
    deep: Any = GOOGLE_KEY
    for _ in range(5000):
        deep = {"document": [deep]}
    body = {"messages": [{"role": "assistant", "content": "ok", "sources": [deep]}]}
    masked, counts = masking_filter.mask_outlet_body(body)
    assert counts == {"google_api_key": 1}
    node = masked["messages"][0]["sources"][0]
    for _ in range(5000):
        node = node["document"][0]
    assert node == GOOGLE_LABEL


def test_mask_value_masks_json_arguments_and_shares_the_rest() -> None:
    args = {
        "to": "ops@example.com",
        "body": [f"key {ZW_KEY}", {"nested": GOOGLE_KEY}],
        "n": 3,
        "flags": ["a"],
    }
    masked, counts = masking_filter.mask_value(args)
    assert masked == {
        "to": "ops@example.com",
        "body": [f"key {GOOGLE_LABEL}", {"nested": GOOGLE_LABEL}],
        "n": 3,
        "flags": ["a"],
    }
    assert counts == {"google_api_key": 2}
    assert masked["flags"] is args["flags"]
    assert masking_filter.mask_value({"x": "nothing"}) == ({"x": "nothing"}, {})


async def test_running_out_of_time_says_so_in_a_status_line() -> None:
    events: list[StatusEvent] = []
    seen: list[dict[str, int]] = []
    body = outlet(f"early {GOOGLE_KEY}", CRAFTED + GOOGLE_KEY)
    body["messages"][3]["output"] = [
        {"type": "message", "id": "m9", "content": [{"type": "output_text", "text": CRAFTED}]}
    ]
    masked = await masking_filter.mask_and_report(
        body,
        lambda counts: seen.append(dict(counts)),
        deadline=time.monotonic() + 0.5,
        events=events,
        name="ECHO context",
    )
    early, crafted = contents(masked)
    assert early == f"early {GOOGLE_LABEL}"
    assert crafted.endswith(WITHHELD)
    item = masked["messages"][3]["output"][0]
    assert (item["type"], item["id"]) == ("message", "m9")  # short texts no secret can start in are kept
    assert len(events) == 1
    assert events[0].level == "warning"
    assert events[0].description.startswith("ECHO context: the secret check ran out of time after ")
    assert events[0].description.endswith("that may hold a secret withheld")
    assert seen[-1]["unverified_text"] >= 1


async def test_a_check_that_finishes_adds_no_status_line() -> None:
    events: list[StatusEvent] = []
    masked = await masking_filter.mask_and_report(
        outlet(f"key {GOOGLE_KEY}"), lambda counts: None, deadline=time.monotonic() + 5, events=events
    )
    assert contents(masked) == [f"key {GOOGLE_LABEL}"]
    assert events == []


@pytest.mark.parametrize(
    "make",
    [lambda: ContextFilter(lambda counts: None), lambda: PipeFilter("gemini-2.5-flash", lambda counts: None)],
)
async def test_a_masking_outlet_out_of_time_emits_its_status_line(make: Callable[[], Any]) -> None:
    flt = make()
    body = outlet(f"early {GOOGLE_KEY}", CRAFTED + GOOGLE_KEY)
    ctx = base.HookContext(
        filter_id=flt.id,
        phase="outlet",
        user={"id": "u"},
        ids=bodies.turn_ids(body),
        valves=ContextValves(OUTLET_DEADLINE_MS=1000),
    )
    answer = json.loads(await runner.run_hook(flt, body, ctx))
    assert contents(answer)[1].endswith(WITHHELD)
    assert GOOGLE_KEY not in json.dumps(answer)
    assert [event.description.split(" after ")[0] for event in ctx.events] == [
        f"{flt.name}: the secret check ran out of time"
    ]
    assert ctx.events[0].level == "warning"


_JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_KEYS = st.sampled_from(["content", "id", "type", "text", "output", "role", "arguments", "x"])
_VALUES = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)
_MESSAGES = st.lists(
    st.builds(
        lambda role, rest: {**rest, "role": role},
        st.sampled_from(["assistant", "tool", "user", "system"]),
        st.dictionaries(_KEYS, _VALUES, max_size=4),
    ),
    max_size=5,
)


@given(_MESSAGES)
@settings(max_examples=200, deadline=None)
def test_assistant_texts_are_the_texts_map_assistant_text_rewrites(messages: list[Any]) -> None:
    seen: set[str] = set()

    def collect(text: str) -> str:
        seen.add(text)
        return text

    bodies.map_assistant_text({"messages": messages}, collect)
    assert bodies.assistant_texts({"messages": messages}) == seen
