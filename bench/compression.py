"""Context compression on LoCoMo beside plain truncation, then the hooks' latency on a long chat.

Part 1, tokens and answer retention. The three LoCoMo conversations (`../shared/data/locomo/`) are
replayed as chats through the filters by `echo.entrypoints.replay` (what `echoctl replay` runs: inlet, the
recorded reply, outlet, the summary jobs on an in-process worker with the offline provider) with a
small budget, once per `compression_style`. Then one question follows the whole conversation, and
that final inlet's messages (the fenced summary included) are the context "sent at the end". A QA
pair (categories 1–4) is retained when the text of every evidence dialog turn is still in that
context ("evidence"), or its answer text is ("answer"); "either" counts both; "words" is the
issue-20 measure (at least half of the answer's content words are in the context). "share" is what
the final context's summary costs against the turns it stands for (mean over conversations), and
"+max" the most a turn's request with ECHO cost over the same turn without it (the AEC block's size
is the allowance). The figures of the previous run (2026-12-01, before summaries had a share and
the offline summariser read the style) stand beside the new ones. A second table takes the first
30 turns of each conversation (short chats, under the threshold): tokens per turn with and without
ECHO. Beside it: the whole
history (what Open WebUI sends without ECHO), and plain truncation (system messages and the newest
messages that fit) to ECHO's own token count at every turn, and to max_context_tokens.

Part 2, latency. A 500-message chat (LoCoMo text, a system prompt) is replayed so the store holds
its summary; then echo_compression's inlet is called directly in-process, and over HTTP on
`echoctl serve` (same store, same valves) beside a bare FastAPI floor, requests alternating as in
bench/hooks_latency.py. Targets: inlet p50 <= 2 ms in-process and <= 5 ms over HTTP, outlet p50
<= 2 ms over the floor.

    .venv/bin/python bench/compression.py [--max-turns N] [--requests 300]

Uses ECHO_DATABASE_URL when set (a throwaway tenant, dropped after), else an embedded PostgreSQL
in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import typing
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import servers

from echo.adapters.store import embedded, migrations, pool, testing
from echo.capabilities import base
from echo.config import tenancy
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import bodies, transcripts
from echo.domain.compression import messages as msgs
from echo.entrypoints.replay import driver

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
LOCOMO = SHARED / "data" / "locomo"
STYLES = typing.get_args(valves_module.CompressionValves.model_fields["compression_style"].annotation)
CATEGORIES = (1, 2, 3, 4)
PROBE = "Thinking back over everything we talked about: what do you remember?"
TARGET_INLET_MS = 2.0  # inlet p50 in-process
TARGET_HTTP_MS = 5.0  # inlet p50 over HTTP
TARGET_OUTLET_MS = 2.0  # outlet p50 over the floor, over HTTP
LATENCY_MESSAGES = 500
TENANT = f"bench-{os.getpid()}"


KEY = "bench-key"


# -- part 1: tokens and retention --------------------------------------------------------------


@dataclass
class Method:
    """One row of the retention table, summed over the conversations."""

    name: str
    full: list[int] = field(default_factory=list)  # tokens Open WebUI sends, per turn
    sent: list[int] = field(default_factory=list)  # tokens this method sends, per turn
    finals: list[int] = field(default_factory=list)  # final context tokens, per conversation
    kept: dict[str, list[bool]] = field(  # evidence / answer / either, per QA pair
        default_factory=lambda: {"evidence": [], "answer": [], "either": []}
    )
    summaries: int = 0  # summaries the replays injected (distinct ones)
    words: list[bool] = field(default_factory=list)  # half of the answer's content words, per QA pair
    shares: list[float] = field(default_factory=list)  # final summary / the turns it covers, per chat
    added: list[int] = field(default_factory=list)  # tokens with ECHO minus without, per turn


PREVIOUS = {  # bench/README.md, 2026-12-01: (mean tok/turn, either)
    "full history (Open WebUI)": (9151, 1.00),
    "ECHO, aggressive": (2693, 0.26),
    "ECHO, balanced": (2693, 0.26),
    "ECHO, faithful": (2693, 0.26),
    "truncation, ECHO's tokens/turn": (2677, 0.25),
    "truncation, max_context (6,000)": (4913, 0.36),
}
SHORT_TURNS = 30
_ANSWER_STOPWORDS_TEXT = """
    the a an and or of to in on at for with by from is was were are be been it its this that her his
    their they she he we you i my your our as not no yes
"""
_ANSWER_STOPWORDS = frozenset(_ANSWER_STOPWORDS_TEXT.split())


def content_words(text: str) -> set[str]:
    """Lower-cased words of two letters or more (digits always), minus a few function words."""
    words = re.findall(r"[^\W_]+", text.casefold())
    return {w for w in words if (len(w) > 1 or w.isdigit()) and w not in _ANSWER_STOPWORDS}


def answer_words_kept(answer: str, context_words: set[str]) -> bool:
    """At least half of the answer's content words are in the context (issue 20's answer recall)."""
    wanted = content_words(answer)
    return bool(wanted) and 2 * len(wanted & context_words) >= len(wanted)


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).casefold()


def judged(transcript: transcripts.Transcript, turns: int) -> list[transcripts.Question]:
    """The QA pairs of categories 1–4 whose evidence turns were all replayed (all, without subsampling)."""
    played = {key for exchange in transcript.exchanges[:turns] for m in exchange.sent + exchange.replies
              for key in m.sources}  # fmt: skip
    return [
        question
        for question in transcript.questions
        if question.category in CATEGORIES
        and question.evidence
        and all(key in played for key in question.evidence)
    ]


def retention(
    transcript: transcripts.Transcript,
    questions: Sequence[transcripts.Question],
    context: Sequence[Mapping[str, Any]],
) -> dict[str, list[bool]]:
    """Per QA pair: are its evidence turns, its answer text, either, in ``context``?"""
    text = "\n".join(msgs.content_text(message.get("content")) for message in context)
    folded = _normal(text)
    words = content_words(text)
    kept: dict[str, list[bool]] = {"evidence": [], "answer": [], "either": [], "words": []}
    for question in questions:
        evidence = all(transcript.sources[key] in text for key in question.evidence)
        answer = bool(question.answer.strip()) and _normal(question.answer.strip()) in folded
        kept["evidence"].append(evidence)
        kept["answer"].append(answer)
        kept["either"].append(evidence or answer)
        kept["words"].append(answer_words_kept(question.answer, words))
    return kept


def summary_share(
    raw: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]], head: int
) -> float | None:
    """What the summary in ``context`` costs against the turns of ``raw`` it stands for (None: none)."""
    covers = driver.summary_covers(context)
    if not covers:
        return None
    summary = next(
        m for m in context if msgs.content_text(m.get("content")).lstrip().startswith("<echo_summary")
    )
    turns = [m for m in raw if msgs.role_of(m) not in msgs.SYSTEM_ROLES]
    covered = driver.tokens_of(turns[head:covers])
    return msgs.message_tokens(summary) / covered if covered else None


def truncated(messages: Sequence[Mapping[str, Any]], budget: int) -> list[Mapping[str, Any]]:
    """Plain truncation: system messages and the last message always, then the newest that fit."""
    costs = [msgs.message_tokens(message) for message in messages]
    keep = {i for i, message in enumerate(messages) if msgs.role_of(message) in msgs.SYSTEM_ROLES}
    keep.add(len(messages) - 1)
    used = sum(costs[i] for i in keep)
    for index in range(len(messages) - 2, -1, -1):
        if index in keep:
            continue
        if used + costs[index] > budget:
            break
        keep.add(index)
        used += costs[index]
    return [messages[i] for i in sorted(keep)]


def _histories(transcript: transcripts.Transcript, turns: int) -> Iterable[list[transcripts.Message]]:
    history: list[transcripts.Message] = []
    for exchange in transcript.exchanges[:turns]:
        history.extend(exchange.sent)
        yield list(history)
        history.extend(exchange.replies)


def _probe_history(transcript: transcripts.Transcript, turns: int) -> list[transcripts.Message]:
    played = [m for exchange in transcript.exchanges[:turns] for m in (*exchange.sent, *exchange.replies)]
    return [*played, transcripts.Message(id=f"{transcript.id}-probe", role="user", content=PROBE)]


def _cut(transcript: transcripts.Transcript, turns: int) -> transcripts.Transcript:
    """The first ``turns`` exchanges (the QA pairs stay: retention is judged on what was played)."""
    return transcripts.Transcript(
        id=transcript.id,
        title=transcript.title,
        kind=transcript.kind,
        model=transcript.model,
        system=transcript.system,
        exchanges=transcript.exchanges[:turns],
        questions=transcript.questions,
        sources=transcript.sources,
    )


async def part_one(
    store: pool.Store, settings: Settings, chats: Sequence[transcripts.Transcript], args: argparse.Namespace
) -> None:
    rows: dict[str, Method] = {}
    by_chat: dict[tuple[str, str], float] = {}
    base_valves = driver.compression_valves(
        valves_module.CompressionValves(), threshold=args.threshold, max_context=args.max_context
    )
    played = {chat.id: min(len(chat.exchanges), args.max_turns or len(chat.exchanges)) for chat in chats}
    questions = {chat.id: judged(chat, played[chat.id]) for chat in chats}
    echo_budgets: dict[str, tuple[list[int], int]] = {}
    short: dict[str, list[tuple[int, int]]] = {}
    for style in STYLES:
        valves = {"echo_compression": base_valves.model_copy(update={"compression_style": style})}
        method = rows.setdefault(f"ECHO, {style}", Method(f"ECHO, {style}"))
        for chat in chats:
            started = time.perf_counter()
            cut = _cut(chat, played[chat.id])
            async with driver.session(store, settings, valves.get) as replayer:
                replayed = await replayer.replay(cut)
                final = await replayer.probe(cut, PROBE)
            method.full += [turn.tokens_before for turn in replayed.turns]
            method.sent += [turn.tokens_after for turn in replayed.turns]
            method.finals.append(driver.tokens_of(final))
            method.summaries += len({turn.summary_covers for turn in replayed.turns if turn.summary_covers})
            kept = retention(chat, questions[chat.id], final)
            method.words += kept.pop("words")
            for key, values in kept.items():
                method.kept[key] += values
            by_chat[(method.name, chat.id)] = _share(method.words[-len(questions[chat.id]) :])
            raw_probe = driver.inlet_messages(chat, _probe_history(chat, played[chat.id]))
            share = summary_share(raw_probe, final, base_valves.keep_first)
            if share is not None:
                method.shares.append(share)
            method.added += [turn.tokens_after - turn.tokens_before for turn in replayed.turns]
            if style == valves_module.CompressionValves().compression_style:
                short[chat.id] = [(t.tokens_before, t.tokens_after) for t in replayed.turns[:SHORT_TURNS]]
            if style == valves_module.CompressionValves().compression_style:
                echo_budgets[chat.id] = ([t.tokens_after for t in replayed.turns], driver.tokens_of(final))
            print(
                f"  replayed {chat.id} ({style}): {len(replayed.turns)} turns in "
                f"{time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
    full = Method("full history (Open WebUI)")
    same = Method("truncation, ECHO's tokens/turn")
    ceiling = Method(f"truncation, max_context ({args.max_context:,})")
    for chat in chats:
        budgets, final_budget = echo_budgets[chat.id]
        for history, budget in zip(_histories(chat, played[chat.id]), budgets, strict=True):
            sent = driver.inlet_messages(chat, history)
            cost = driver.tokens_of(sent)
            for method, limit in ((full, None), (same, budget), (ceiling, args.max_context)):
                method.full.append(cost)
                method.sent.append(cost if limit is None else driver.tokens_of(truncated(sent, limit)))
        probe = driver.inlet_messages(chat, _probe_history(chat, played[chat.id]))
        for method, limit in ((full, None), (same, final_budget), (ceiling, args.max_context)):
            context = probe if limit is None else truncated(probe, limit)
            method.finals.append(driver.tokens_of(context))
            kept = retention(chat, questions[chat.id], context)
            method.words += kept.pop("words")
            for key, values in kept.items():
                method.kept[key] += values
            by_chat[(method.name, chat.id)] = _share(method.words[-len(questions[chat.id]) :])
    table = [full, *rows.values(), same, ceiling]
    _print_part_one(table, by_chat, chats, played, questions, base_valves)
    _print_short(short, chats)


def _share(values: Sequence[bool]) -> float:
    return sum(values) / len(values) if values else 0.0


def _print_part_one(
    table: Sequence[Method],
    by_chat: Mapping[tuple[str, str], float],
    chats: Sequence[transcripts.Transcript],
    played: Mapping[str, int],
    questions: Mapping[str, Sequence[transcripts.Question]],
    valves: valves_module.CompressionValves,
) -> None:
    judged_count = sum(len(found) for found in questions.values())
    turns = ", ".join(
        f"{chat.id}: {played[chat.id]}"
        + ("" if played[chat.id] == len(chat.exchanges) else f" of {len(chat.exchanges)} (subsampled)")
        for chat in chats
    )
    print(
        "LoCoMo replayed as chats, offline provider; valves: compression_threshold_tokens "
        f"{valves.compression_threshold_tokens:,}, max_context_tokens {valves.max_context_tokens:,}, "
        f"keep_first {valves.keep_first}, keep_last {valves.keep_last}, "
        f"max_summary_tokens {valves.max_summary_tokens:,}"
    )
    print(
        f"turns replayed per conversation: {turns}; QA pairs of categories 1-4 "
        f"(evidence replayed): {judged_count}"
    )
    print(
        "retention: the final inlet (the whole conversation + one question) still holds the QA pair's "
        "evidence turns / answer text"
    )
    header = (
        f"{'method':<32} {'tok/turn':>8} {'before':>6} {'final':>6} {'ratio':>6} {'summ':>4} {'share':>5} "
        f"{'+max':>5} {'evid':>5} {'answer':>6} {'either':>6} {'before':>6} {'words':>6}"
    )
    print(header)
    print("-" * len(header))
    for method in table:
        full, sent = statistics.fmean(method.full), statistics.fmean(method.sent)
        echo = method.name.startswith("ECHO")
        summaries = str(method.summaries) if echo else "-"
        share = f"{statistics.fmean(method.shares):5.0%}" if method.shares else f"{'-':>5}"
        added = f"{max(method.added):5d}" if method.added else f"{'-':>5}"
        before_sent, before_either = PREVIOUS.get(method.name, (0, 0.0))
        print(
            f"{method.name:<32} {sent:8,.0f} {before_sent:6,d} {statistics.fmean(method.finals):6,.0f} "
            f"{full / sent:5.2f}x {summaries:>4} {share} {added} {_share(method.kept['evidence']):5.0%} "
            f"{_share(method.kept['answer']):6.0%} {_share(method.kept['either']):6.0%} {before_either:6.0%} "
            f"{_share(method.words):6.0%}"
        )
    by_name = {method.name: method for method in table}
    baseline = _share(by_name["truncation, ECHO's tokens/turn"].words)
    for name in (m.name for m in table if m.name.startswith("ECHO")):
        mine = _share(by_name[name].words)
        ratio = f"{mine / baseline:.2f}x" if baseline else "n/a"
        print(f"retention ('words') of {name} against truncation at the same tokens: {ratio} (goal 1.5x)")
    print()
    header = f"{'words, per conversation':<32} " + " ".join(f"{chat.id:>7}" for chat in chats)
    print(header)
    print("-" * len(header))
    for method in table:
        print(f"{method.name:<32} " + " ".join(f"{by_chat[(method.name, chat.id)]:7.0%}" for chat in chats))
    styles = [m for m in table if m.name.startswith("ECHO")]
    if len({(tuple(m.sent), tuple(m.words)) for m in styles}) == 1:
        print("note: the three styles give the same numbers here")
    print()


def _print_short(
    short: Mapping[str, Sequence[tuple[int, int]]], chats: Sequence[transcripts.Transcript]
) -> None:
    """Short chats: the first turns of each conversation, tokens per turn without and with ECHO."""
    print(
        f"short chats: the first {SHORT_TURNS} turns of each conversation (balanced), tokens per turn "
        "without ECHO (what Open WebUI sends) and with it"
    )
    header = f"{'conversation':<14} {'without':>8} {'with':>8} {'+mean':>6} {'+min':>5} {'+max':>5}"
    print(header)
    print("-" * len(header))
    for chat in chats:
        pairs = short.get(chat.id, [])
        if not pairs:
            continue
        added = [after - before for before, after in pairs]
        print(
            f"{chat.id:<14} {statistics.fmean(b for b, _ in pairs):8,.0f} "
            f"{statistics.fmean(a for _, a in pairs):8,.0f} {statistics.fmean(added):6,.0f} "
            f"{min(added):5d} {max(added):5d}"
        )
    print("(+: with minus without; the AEC block is the only addition allowed, its size is +min)")
    print()


# -- part 2: latency ---------------------------------------------------------------------------


def long_chat(size: int) -> transcripts.Transcript:
    texts = []
    for path in sorted(LOCOMO.glob("*.json")):
        chat = transcripts.parse(json.loads(path.read_text()), path.stem)[0]
        texts += [str(m.content) for m in chat.messages]
    messages = [
        transcripts.Message(
            id=f"lat-{i:04d}", role="user" if i % 2 == 0 else "assistant", content=texts[i % len(texts)]
        )
        for i in range(size)
    ]
    return transcripts.Transcript(
        id="latency-500",
        title=f"{size}-message chat",
        kind="locomo",
        model=None,
        system="You are a helpful assistant. Answer briefly.",
        exchanges=transcripts.exchanges_of(messages),
    )


def _new_turn(body: dict[str, Any], index: int) -> dict[str, Any]:
    """``body`` as the next turn would send it: the same history, its last message new (a new
    question on the inlet, a new reply on the outlet), so no whole-request cache can answer it."""
    messages = [dict(message) for message in body["messages"]]
    messages[-1]["content"] = f"{messages[-1]['content']} (turn {index})"
    return {**body, "messages": messages}


async def _in_process(
    replayer: driver.Replayer,
    body: dict[str, Any],
    phase: base.Phase,
    valves: valves_module.Valves,
    count: int,
    *,
    new_turns: bool = False,
) -> list[float]:
    [flt] = [f for f in replayer.filters if f.id == "echo_compression"]
    hook = flt.inlet if phase == "inlet" else flt.outlet
    samples = []
    for index in range(count + count // 10):
        sent = _new_turn(body, index) if new_turns else dict(body)
        ctx = base.HookContext(
            "echo_compression", phase, replayer.user, bodies.turn_ids(sent, replayer.user), valves
        )
        started = time.perf_counter()
        await hook(sent, ctx)
        if index >= count // 10:
            samples.append((time.perf_counter() - started) * 1000)
    return samples


@contextlib.contextmanager
def _servers(store: pool.Store, valves: valves_module.CompressionValves, workdir: Path) -> Any:
    floor_port, echo_port = servers.free_port(), servers.free_port()
    valves_file = workdir / "valves.json"
    valves_file.write_text(json.dumps({"echo_compression": valves.model_dump(mode="json")}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    floor = servers.start(
        [sys.executable, "-c", servers.FLOOR_APP.replace("{port}", str(floor_port))], floor_port, env
    )
    try:
        echo = servers.start(
            [
                sys.executable,
                "-m",
                "echo.entrypoints.cli",
                "serve",
                "--port",
                str(echo_port),
                "--data-dir",
                str(workdir / "echo"),
            ],
            echo_port,
            {
                **env,
                "ECHO_API_KEY": KEY,
                "ECHO_LOG_LEVEL": "WARNING",
                "ECHO_DATABASE_URL": store.dsn,
                "ECHO_TENANT": TENANT,
                "ECHO_VALVES_FILE": str(valves_file),
                "ECHO_LLM_PROVIDER": "offline",
            },
        )
    except BaseException:
        floor.terminate()
        raise
    try:
        yield floor_port, echo_port
    finally:
        for process in (floor, echo):
            process.terminate()
            process.wait(timeout=10)


def _over_http(ports: tuple[int, int], phase: str, payload: bytes, count: int) -> dict[str, list[float]]:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    samples: dict[str, list[float]] = {"floor": [], "echo": []}
    with httpx.Client(headers=headers, timeout=10) as http:
        for index in range(count + count // 10):
            for name, port in zip(("floor", "echo"), ports, strict=True):
                started = time.perf_counter()
                answer = http.post(
                    f"http://127.0.0.1:{port}/echo_compression/filter/{phase}", content=payload
                )
                elapsed = (time.perf_counter() - started) * 1000
                answer.raise_for_status()
                if index >= count // 10:
                    samples[name].append(elapsed)
    return samples


async def part_two(store: pool.Store, settings: Settings, args: argparse.Namespace, workdir: Path) -> None:
    chat = long_chat(LATENCY_MESSAGES)
    valves = driver.compression_valves(
        valves_module.CompressionValves(), threshold=args.threshold, max_context=args.max_context
    )
    async with driver.session(store, settings, {"echo_compression": valves}.get) as replayer:
        replayed = await replayer.replay(chat)
        history = [*chat.messages, transcripts.Message(id="lat-question", role="user", content=PROBE)]
        inlet = driver.inlet_body(chat, history, user_id=replayer.user["id"], reply_id="lat-reply")
        outlet = driver.outlet_body(chat, list(chat.messages))
        [flt] = [f for f in replayer.filters if f.id == "echo_compression"]
        ctx = base.HookContext(
            "echo_compression", "inlet", replayer.user, bodies.turn_ids(inlet, replayer.user), valves
        )
        sent = (await flt.inlet(dict(inlet), ctx))["messages"]
        covers = driver.summary_covers(sent)
        local = {
            "inlet": await _in_process(replayer, inlet, "inlet", valves, args.requests),
            "outlet": await _in_process(replayer, outlet, "outlet", valves, args.requests),
            "inlet, new turn": await _in_process(
                replayer, inlet, "inlet", valves, args.requests, new_turns=True
            ),
            "outlet, new turn": await _in_process(
                replayer, outlet, "outlet", valves, args.requests, new_turns=True
            ),
        }
        user = {"id": replayer.user["id"], "name": "bench", "role": "user"}
        payloads = {
            "inlet": json.dumps({"body": inlet, "user": user}).encode(),
            "outlet": json.dumps({"body": outlet, "user": user}).encode(),
        }
        with _servers(store, valves, workdir) as ports:
            remote = {
                phase: _over_http(ports, phase, payloads[phase], args.requests)
                for phase in ("inlet", "outlet")
            }
    size, full_tokens = len(inlet["messages"]), driver.tokens_of(inlet["messages"])
    print(
        f"echo_compression latency: a {size}-message chat ({full_tokens:,} tokens, inlet request "
        f"{len(payloads['inlet']) / 1024:.0f} KiB) whose stored summary covers {covers} messages; the inlet "
        f"sends on {len(sent)} messages ({driver.tokens_of(sent):,} tokens)"
    )
    print(
        f"(built by replaying it: {len(replayed.turns)} turns, first summary at turn "
        f"{replayed.first_summary}); {args.requests} requests per cell, ms; in-process = the filter called; "
        "the same request each time, except 'new turn': its last message differs every call (a new "
        "question, a new reply stored), as consecutive turns of a chat do"
    )
    header = (
        f"{'phase':<7} {'where':<20} {'floor p50':>9} {'p50':>7} {'p99':>7} {'over floor':>10} "
        f"{'target':>22} {'verdict':>8}"
    )
    print(header)
    print("-" * len(header))
    rows: list[tuple[str, str, list[float] | None, list[float], str, float | None, bool]] = [
        ("inlet", "in-process", None, local["inlet"], f"p50 <= {TARGET_INLET_MS:g} ms", TARGET_INLET_MS,
         False),
        ("inlet", "in-process, new turn", None, local["inlet, new turn"], f"p50 <= {TARGET_INLET_MS:g} ms",
         TARGET_INLET_MS, False),
        ("inlet", "HTTP", remote["inlet"]["floor"], remote["inlet"]["echo"], f"p50 <= {TARGET_HTTP_MS:g} ms",
         TARGET_HTTP_MS, False),
        ("outlet", "in-process", None, local["outlet"], "-", None, False),
        ("outlet", "in-process, new turn", None, local["outlet, new turn"], "-", None, False),
        ("outlet", "HTTP", remote["outlet"]["floor"], remote["outlet"]["echo"],
         f"over floor <= {TARGET_OUTLET_MS:g} ms", TARGET_OUTLET_MS, True),
    ]  # fmt: skip
    for phase, where, floor, samples, target, limit, over in rows:
        p50, p99 = statistics.median(samples), servers.percentile(samples, 0.99)
        floor_p50 = statistics.median(floor) if floor else None
        measured = p50 - floor_p50 if over and floor_p50 is not None else p50
        verdict = "-" if limit is None else ("met" if measured <= limit else "NOT MET")
        floor_cell = f"{floor_p50:9.2f}" if floor_p50 is not None else f"{'-':>9}"
        over_cell = f"{p50 - floor_p50:10.2f}" if floor_p50 is not None else f"{'-':>10}"
        print(
            f"{phase:<7} {where:<20} {floor_cell} {p50:7.2f} {p99:7.2f} {over_cell} {target:>22} {verdict:>8}"
        )
    print()


# -- main --------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def bench_store(workdir: Path) -> AsyncIterator[pool.Store]:
    """A throwaway tenant on ECHO_DATABASE_URL, else on an embedded PostgreSQL under ``workdir``."""
    server = None
    dsn = os.environ.get("ECHO_DATABASE_URL")
    if not dsn:
        server = embedded.EmbeddedPostgres(workdir / "postgres")
        dsn = await server.start()
    schema = tenancy.schema_for(TENANT)
    store = await pool.Store.open(dsn, schema=schema, max_size=8, application_name="bench-compression")
    try:
        await migrations.migrate(store)
        yield store
    finally:
        await store.close()
        await testing.drop_schema(dsn, schema)
        if server is not None:
            await server.stop()


async def run(args: argparse.Namespace) -> None:
    chats = [transcripts.parse(json.loads(p.read_text()), p.stem)[0] for p in sorted(LOCOMO.glob("*.json"))]
    workdir = Path(tempfile.mkdtemp(prefix="echo-bench-compression-"))
    settings = Settings(data_dir=workdir / "echo", llm_provider="offline", log_level="WARNING")
    started = time.perf_counter()
    try:
        async with bench_store(workdir) as store:
            if not args.skip_retention:
                await part_one(store, settings, chats, args)
            if not args.skip_latency:
                await part_two(store, settings, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n(bench ran {time.perf_counter() - started:.0f} s on {os.cpu_count()} CPUs)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threshold", type=int, default=4000, help="compression_threshold_tokens")
    parser.add_argument("--max-context", type=int, default=6000, help="max_context_tokens")
    parser.add_argument("--max-turns", type=int, default=0, help="replay only the first N exchanges (0: all)")
    parser.add_argument("--requests", type=int, default=300, help="measured requests per latency cell")
    parser.add_argument("--skip-retention", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    if not LOCOMO.is_dir():
        print(f"skipped: the LoCoMo conversations are not at {LOCOMO}; nothing to measure.")
        return 0
    from echo.support import logs

    logs.configure_logging("ERROR", "console")  # the offline provider says so once per session
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
