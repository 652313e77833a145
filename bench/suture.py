"""Per-turn cost of the rich shadow in the pipe, beside converting the same history without it.

A 200-message chat (Open WebUI's shape: 20 tool calls with their results, 10 user messages whose
stored rich form carries an attachment of ~20 KB, every answer with a thought signature) is stored
in the shadow of the real PostgreSQL, as the pipe stores it turn after turn. Then each iteration is
a new turn of that chat (a new user message at the end): the floor converts the history to Gemini
contents as without the shadow (``to_gemini_contents``); the shadow does what ``PipeTurn`` adds —
hash the history, one lookup of the stored points, the payloads, the suture, the conversion with the
restored contents, the placeholder check, then the user's point written before the call and the
answer's point after it (two statements). Measured twice: warm (the process that served the chat's
previous turn: hashes and payloads cached) and cold (another replica: both caches empty).

    .venv/bin/python bench/suture.py [--turns 300] [--dsn postgresql://…]

Uses ECHO_TEST_DATABASE_URL (default the test PostgreSQL at 127.0.0.1:5432); a throwaway tenant.
Goal: p50 overhead over the floor <= 3 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from echo.adapters.store import shadow as shadow_store
from echo.adapters.store import testing
from echo.domain import openai_to_gemini, shadow
from echo.domain.shadow import points as points_module

USER = "bench-user"
CHAT = "bench-chat"
GOAL_MS = 3.0


def _text(i: int) -> str:
    return f"Message {i}: " + "the quick brown fox jumps over the lazy dog and keeps on running. " * 6


def _answer(last: shadow.Point, step: list[Any], answer: str, **tools: Any) -> shadow.PointRecord:
    journal, calls, openwebui_calls = (
        tools.get("journal", []),
        tools.get("calls", {}),
        tools.get("openwebui", []),
    )
    return shadow.model_record(
        last,
        contents=step,
        journal=journal,
        calls=calls,
        results={},
        answer_text=answer,
        openwebui_calls=openwebui_calls,
        chat_id=CHAT,
        model="m",
    )


def _question(point: shadow.Point, text: str, parts: list[Any], *, rewritten: bool) -> shadow.PointRecord:
    received = "0" * 64 if rewritten else point.invariant  # the pipe got more than later turns send
    return shadow.user_record(
        point, received_invariant=received, received_text=text, parts=parts, chat_id=CHAT, model="m"
    )


def build_chat() -> tuple[list[dict[str, Any]], list[shadow.PointRecord]]:
    """The 200 messages as Open WebUI replays them, and the shadow's records of them."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    records: list[shadow.PointRecord] = []
    attachments = tool_calls = turn = 0
    while len(messages) - 1 < 200:
        turn += 1
        text = _text(len(messages))
        messages.append({"role": "user", "content": text})
        point = shadow.conversation_points(messages)[-1]
        if attachments < 10 and turn % 5 == 0:
            blob = bytes((turn * 7 + k) % 256 for k in range(20_000))
            media = {"inline_data": {"mime_type": "application/pdf", "data": blob}}
            records.append(_question(point, text, [{"text": text}, media], rewritten=True))
            attachments += 1
        else:
            records.append(_question(point, text, [{"text": text}], rewritten=False))
        if tool_calls < 20 and turn % 3 == 1:
            call_id, args = f"call_{turn:04d}", {"city": f"City {turn}", "days": turn % 7}
            function = {"name": "get_weather", "arguments": json.dumps(args)}
            call = {"id": call_id, "type": "function", "function": function}
            signed = {
                "function_call": {"name": "get_weather", "args": args},
                "thought_signature": b"c%d" % turn * 40,
            }
            journal = [shadow.JournalEntry(0, call_id, "get_weather", args, "openwebui")]
            step = [{"role": "model", "parts": [signed]}]
            last = shadow.conversation_points(messages)[-1]
            records.append(_answer(last, step, "", journal=journal, calls={(0, 0): 0}, openwebui=[call]))
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": f"sunny, {turn} C"})
            tool_calls += 1
        answer = _text(len(messages))
        step = [{"role": "model", "parts": [{"text": answer, "thought_signature": b"a%d" % turn * 40}]}]
        records.append(_answer(shadow.conversation_points(messages)[-1], step, answer))
        messages.append({"role": "assistant", "content": answer})
    assert (attachments, tool_calls) == (10, 20)
    return messages, records


def floor(messages: list[dict[str, Any]]) -> None:
    openai_to_gemini.to_gemini_contents(messages)


async def with_shadow(
    store: shadow_store.ShadowStore, memo: shadow.PointsMemo, messages: list[dict[str, Any]], answer: str
) -> dict[str, float]:
    started = time.perf_counter()
    points = memo.points((USER, CHAT), messages)
    current = points[-1]
    hashes = [p.cumulative for p in points if p.index != current.index]
    found = await store.stored_points(USER, hashes)
    payloads = await store.payloads(USER, [ref for point in found.values() for ref in point.refs])
    suture = shadow.plan_suture(messages, points, found, payloads, current_index=current.index)
    contents, _ = openai_to_gemini.to_gemini_contents(messages, restored=suture.restored)
    shadow.sign_current_turn(contents)
    user = messages[current.index]
    await store.record(
        USER, _question(current, user["content"], openai_to_gemini.message_parts(user), rewritten=False)
    )
    restored = time.perf_counter()
    step = [{"role": "model", "parts": [{"text": answer, "thought_signature": b"sig-new"}]}]
    await store.record(USER, _answer(current, step, answer))
    done = time.perf_counter()
    expected = sum(1 for m in messages if m["role"] == "assistant") + 10  # every answer and attachment
    assert len(suture.restored) == expected, (len(suture.restored), expected)
    restore, archive = (restored - started) * 1000, (done - restored) * 1000
    return {"restore": restore, "archive": archive, "total": restore + archive}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def run(args: argparse.Namespace) -> None:
    dsn = args.dsn or testing.test_dsn()
    messages, records = build_chat()
    async with testing.temporary_store(dsn, testing.unique_tenant("suture")) as store:
        warm = shadow_store.ShadowStore(store, shadow_store.PayloadCache(), shadow_store.PointCache())
        for record in records:
            await warm.record(USER, record)
        memo = shadow.PointsMemo()
        results: dict[str, dict[str, list[float]]] = {"warm": {}, "cold": {}}
        floors: list[float] = []
        for i in range(args.turns + 20):
            question = {"role": "user", "content": f"New question {i}: what about the weather tomorrow?"}
            history = [*messages, question]
            mode = "cold" if i % 2 else "warm"
            if mode == "cold":  # another replica: nothing of this chat in its caches
                points_module._invariant.cache_clear()
                rows = shadow_store.ShadowStore(store, shadow_store.PayloadCache(), shadow_store.PointCache())
                memo = shadow.PointsMemo()
            else:  # the replica that served the previous call, whose history ended one answer earlier
                rows = warm
                memo.points((USER, CHAT), messages[:-1])

            async def plain(history: list[dict[str, Any]] = history) -> None:
                floor(history)

            floor_ms = await timed(plain)
            measured = await with_shadow(rows, memo, history, f"Answer {i}.")
            if i < 20:  # warm-up: connections, statement caches
                continue
            floors.append(floor_ms)
            for key, value in measured.items():
                results[mode].setdefault(key, []).append(value)
        blob = sum(len(p.data) for r in records if r.form for p in r.form.payloads)
    floor_p50, floor_p99 = statistics.median(floors), percentile(floors, 0.99)
    kib = blob // 1024
    print(f"200 messages, 20 tool calls, 10 attachments ({kib} KiB, stored once), {args.turns} turns (ms)")
    columns = ("floor p50", "floor p99", "p50", "p99", "restore p50", "archive p50", "over floor", "goal")
    print(f"{'case':<30}" + "".join(f"{c:>12}" for c in columns))
    for mode, label in (("warm", "shadow, warm (same replica)"), ("cold", "shadow, cold (other replica)")):
        total = results[mode]["total"]
        p50 = statistics.median(total)
        over = p50 - floor_p50
        verdict = "met" if over <= GOAL_MS else "NOT MET"
        restore, archive = (
            statistics.median(results[mode]["restore"]),
            statistics.median(results[mode]["archive"]),
        )
        figures = (floor_p50, floor_p99, p50, percentile(total, 0.99), restore, archive, over)
        print(f"{label:<30}" + "".join(f"{f:>12.2f}" for f in figures) + f"{verdict:>12}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--dsn", default=None)
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
