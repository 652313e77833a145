"""`echo.entrypoints.http.stepwise_json`: the same values, bytes and errors as the C functions, in bounded
steps
that let another thread (the event loop) run meanwhile."""

from __future__ import annotations

import asyncio
import json
import random
import threading
from typing import Any

import pytest

from echo.entrypoints.http import release, stepwise_json, wire


@pytest.fixture
def small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps of a few characters, so that every path (windows, runs, opened containers) is taken."""
    monkeypatch.setattr(stepwise_json, "STEP_CHARS", 24)
    monkeypatch.setattr(stepwise_json, "STEP_NODES", 3)


def documents() -> list[Any]:
    rng = random.Random(7)

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 3 or roll < 0.35:
            return rng.choice(
                [0, -12, 2.5, 1e300, 10**40, "", "x", "é€", "\ud83d", '"\\\n,]}', None, True, False, "a" * 90]
            )
        if roll < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 6))]
        return {
            rng.choice(["a", "b", "k,}", "é"]) + str(n): value(depth + 1) for n in range(rng.randint(0, 5))
        }

    return [value(0) for _ in range(150)] + [[], {}, [[[]]], {"a": {"b": {}}}, "top", 7, None]


def c_render(value: Any) -> bytes:
    return wire.render_json(value)


@pytest.mark.usefixtures("small_steps")
def test_loads_reads_what_json_reads() -> None:
    for document in documents():
        for text in (
            json.dumps(document),
            json.dumps(document, separators=(",", ":")),
            json.dumps(document, indent=1),
        ):
            assert json.dumps(stepwise_json.loads(text)) == json.dumps(json.loads(text)), text


@pytest.mark.usefixtures("small_steps")
def test_malformed_text_gets_the_error_json_gives_at_the_same_position() -> None:
    rng = random.Random(11)
    for document in documents():
        text = json.dumps(document, indent=1)
        for _ in range(4):
            at = rng.randrange(len(text) + 1)
            bad = rng.choice(
                [text[:at], text[:at] + rng.choice(',]}:[{"x ') + text[at:], text[:at] + text[at + 1 :]]
            )
            try:
                expected: tuple[Any, ...] = ("value", json.dumps(json.loads(bad)))
            except json.JSONDecodeError as error:
                expected = ("error", error.msg, error.pos)
            try:
                got: tuple[Any, ...] = ("value", json.dumps(stepwise_json.loads(bad)))
            except json.JSONDecodeError as error:
                got = ("error", error.msg, error.pos)
            assert got == expected, bad


@pytest.mark.usefixtures("small_steps")
def test_the_decoder_hooks_are_honoured() -> None:
    seen: list[str] = []

    def constant(literal: str) -> float:
        seen.append(literal)
        return 0.0

    decoder = json.JSONDecoder(parse_constant=constant, parse_int=str)
    text = json.dumps({"a": [1, 2, {"b": [3, 4, 5, 6]}], "c": "nothing"}) + ""
    assert stepwise_json.loads(text.replace('"nothing"', "NaN"), decoder) == {
        "a": ["1", "2", {"b": ["3", "4", "5", "6"]}],
        "c": 0.0,
    }
    assert seen == ["NaN"]
    with pytest.raises(ValueError, match="object hooks"):
        stepwise_json.loads("{}", json.JSONDecoder(object_hook=dict))


def test_too_deep_raises_recursion_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stepwise_json, "STEP_CHARS", 8)
    monkeypatch.setattr(stepwise_json, "STEP_NODES", 3)
    monkeypatch.setattr(stepwise_json, "MAX_DEPTH", 50)
    with pytest.raises(RecursionError):
        stepwise_json.loads("[" * 200 + "]" * 200)
    with pytest.raises(RecursionError):
        stepwise_json.render(json.loads("[" * 200 + "[1,2,3,4,5,6,7,8]" + "]" * 200))
    assert stepwise_json.loads("[" * 40 + "]" * 40) == json.loads("[" * 40 + "]" * 40)


@pytest.mark.usefixtures("small_steps")
def test_render_gives_the_bytes_render_json_gives() -> None:
    for document in [*documents(), {1: "a", 2.5: ["b", "c", "d", "e"], None: {}, False: [[1, 2, 3, 4]]}]:
        assert stepwise_json.render(document) == c_render(document)
    assert stepwise_json.render(["\ud83d", "é"] * 5) == c_render(["\ud83d", "é"] * 5)  # ASCII with escapes


@pytest.mark.usefixtures("small_steps")
def test_render_refuses_what_render_json_refuses() -> None:
    looped: list[Any] = [1, 2, 3, 4]
    looped.append(looped)
    for bad, error in (
        ([1, 2, 3, float("nan")], ValueError),
        ([1, 2, 3, {1, 2}], TypeError),
        ({"a": 1, "b": 2, "c": 3, (1, 2): 4}, TypeError),
        (looped, ValueError),
    ):
        with pytest.raises(error):
            c_render(bad)
        with pytest.raises(error):
            stepwise_json.render(bad)


def tiny_messages(count: int) -> str:
    return json.dumps(
        {"body": {"messages": [{"role": "user", "content": "x"}] * count}}, separators=(",", ":")
    )


async def _ticks_while(work: Any, *args: Any) -> tuple[int, Any]:
    """How many times the loop ran while `work(*args)` ran on a worker thread, and its result."""
    task = asyncio.ensure_future(asyncio.to_thread(work, *args))
    ticks = 0
    while not task.done():
        ticks += 1
        await asyncio.sleep(0)
    return ticks, await task


async def test_the_loop_runs_while_a_large_body_is_read_and_written_on_a_thread() -> None:
    """The C parser holds the GIL for the whole text: the loop would run once or twice meanwhile."""
    text = tiny_messages(200_000)
    ticks, value = await _ticks_while(stepwise_json.loads, text)
    assert value == json.loads(text)
    assert ticks >= 10
    ticks, rendered = await _ticks_while(stepwise_json.render, value)
    assert rendered == c_render(value)
    assert ticks >= 10


class _Canary:
    """Says on which thread it was freed."""

    def __init__(self, freed: dict[str, str], done: threading.Event) -> None:
        self.freed, self.done = freed, done

    def __del__(self) -> None:
        self.freed["thread"] = threading.current_thread().name
        self.done.set()


def test_a_large_body_is_freed_on_the_release_thread_once_unused() -> None:
    freed: dict[str, str] = {}
    done = threading.Event()
    body = {"body": {"messages": [{"role": "user", "content": "x"}] * 10_000 + [[_Canary(freed, done)]]}}
    still_used = body["body"]
    release.when_unused(body)
    del body
    assert not done.wait(0.2)  # the messages are still referenced here: nothing is freed
    del still_used
    assert done.wait(30)
    assert freed["thread"] == "echo-release"
