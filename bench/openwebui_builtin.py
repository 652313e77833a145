"""Open WebUI 0.12.4's own context compaction and memory review beside ECHO's, on one LoCoMo chat.

Two passes, one after the other, each with its own real Open WebUI 0.12.4 (`.venv-openwebui`, `make
openwebui-venv`; fresh data directory, 127.0.0.1 only) and the same stand-in model, served by this
process on 127.0.0.1 as Open WebUI's one OpenAI connection (model `standin`):

- **Open WebUI built-in**: `ENABLE_CONTEXT_COMPACTION=true` with `CONTEXT_COMPACTION_TOKEN_THRESHOLD`
  (`--threshold`), the default retention (40 % of the messages kept) and the chat's own model as
  compaction model (`CONTEXT_COMPACTION_MODEL` empty); `ENABLE_MEMORY_BACKGROUND_REVIEW=true` with
  the default `MEMORIES_REVIEW_INTERVAL_TURNS=10`, the turns sent with `features.memory` (which also
  makes Open WebUI inject the memories into the system prompt). No ECHO.
- **ECHO**: `echoctl serve` (PostgreSQL at ECHO_DATABASE_URL, else the test DSN, in a tenant of its
  own dropped at the end; its in-process worker; MiniLM; Qdrant local) connected by `echoctl
  openwebui connect` (the Function, global); Open WebUI's compaction and memory review off.
  Background work goes to the same stand-in through ECHO's OpenAI-compatible provider
  (`ECHO_LLM_PROVIDER=openai`; `--echo-llm offline` uses ECHO's offline provider instead);
  `compression_threshold_tokens` is the same `--threshold`, the other valves their defaults
  (`keep_first` 1, `keep_last` 6, `WINDOW_SIZE` 5 + `WINDOW_OVERLAP` 2) but `max_context_tokens`
  (4 × the threshold), `max_summary_tokens` (1,000, what Open WebUI asks of its compaction model),
  `summary_model_max_context` (8,000) and `DISTILLATION_MODEL` (`standin`).

Both passes play the same turns of one LoCoMo conversation (`--conversation`, `--turns`) as the web
UI plays a saved chat (`e2e/openwebui_chat.py`), with a system prompt and `--think` seconds between
turns (a reader of the answer); LoCoMo's `speaker_a` is the user and the stand-in answers each turn
with `speaker_b`'s recorded reply, so both chats hold the same messages. Then two edits, each a new
branch answered once: the user message two turns back (a *late* edit: a summary made before it stays
valid) and the third user message (an *early* edit: every summary of the chat covers the text it
replaces).

The stand-in answers a chat turn after 50 ms; a summary (Open WebUI's compaction prompt, ECHO's
working-memory prompt), a memory review (Open WebUI's reviewer prompt) and a distillation or merge
(ECHO's prompts) after `--summary-seconds` (2 s). Both sides get the same answers from the same
rules: a summary is `SUMMARY-<n>` and then the previous summary's lines and the first 12 words of
each message it is given, cut (oldest lines first) to the request's `max_tokens` and to a quarter of
its input; a memory is the first 25 words of each user message it is shown, one per message, at most
10 per call (Open WebUI's reviewer: none whose text is already an existing memory's, as its prompt
asks; ECHO: its own merge policy, the stand-in's merge keeping the longer text). So what differs is
what each system sends, when, and what it keeps, not the model. Usage in its answers is the
request's tokens (Open WebUI's threshold reads it).

Measured at the stand-in (every request recorded with its arrival time) and through Open WebUI's
and ECHO's APIs: turn latency (sending the turn to Open WebUI's answer, and to the chat request
reaching the model) on ordinary turns and on the turns where a summary is made; tokens per chat
request (`echo.domain.compression.messages.message_tokens`, the same counter for both, against the
whole branch's raw history); the system prompt in every request; which summary (`SUMMARY-<n>`) each
request carries, and after each edit whether it is one that covered the replaced text (wrong) or
not; memories made, duplicates (content-word Jaccard >= 0.8 with an earlier memory of the same
side), and answer recall of all the memories together over LoCoMo's QA pairs whose evidence lies in
the played turns (`bench/locomo.py`: at least half of the answer's content words).

    .venv/bin/python bench/openwebui_builtin.py [--turns 40] [--threshold 1000] [--think 2.5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import locomo
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from echo.adapters.store import testing
from echo.config import tenancy
from echo.domain.compression import messages as msgs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "e2e"))
sys.path.insert(0, str(ROOT / "tests"))

import openwebui_chat  # noqa: E402
import openwebui_live  # noqa: E402
from fakes.live_server import LiveServer  # noqa: E402

MODEL = "standin"
SYSTEM = "You are Gina, a friendly dance-studio owner. Answer as Gina, in one or two sentences."
ECHO_ADMIN_KEY = "bench-admin-key"
CHAT_SECONDS = 0.05
WARM_UP = "Hi Gina, just saying hello before we talk."
SUMMARY_WORDS = 12
FACT_WORDS = 25
MAX_FACTS = 10
SIDES = ("owui", "echo")
SUMMARY_KINDS = ("owui_compaction", "echo_summary")
TITLES = {"owui": "Open WebUI built-in", "echo": "ECHO"}
_SUMMARY_ID = re.compile(r"SUMMARY-(\d+)")
_AEC = re.compile(r"<environnement_contexte\b.*?</environnement_contexte>", re.S)
_MEMORY_BLOCKS = re.compile(r"<memory_context>.*?</memory_context>|<echo_memories\b.*?</echo_memories>", re.S)


# -- the stand-in model ------------------------------------------------------------------------------


@dataclass
class Call:
    """One request the stand-in answered: its kind, when it came and ended (this process's clock)."""

    kind: str  # chat, owui_compaction, owui_memory_review, echo_summary, echo_distill, echo_merge
    started: float
    ended: float
    body: dict[str, Any]
    prompt: str  # every message's text, joined
    answer: str
    summary_id: int | None = None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def kind_of(messages: list[dict[str, Any]]) -> str:
    prompt = "\n".join(_text(m.get("content")) for m in messages)
    if "Summarize the conversation history that will be compacted" in prompt:
        return "owui_compaction"
    if "You are Open WebUI's private memory reviewer" in prompt:
        return "owui_memory_review"
    if "You compress a conversation into a working memory" in prompt:
        return "echo_summary"
    if "<old_memory>" in prompt and "<new_memory>" in prompt:
        return "echo_merge"
    if "You maintain the long-term memory" in prompt and "<conversation>" in prompt:
        return "echo_distill"
    return "chat"


def _first_words(text: str, count: int) -> str:
    return " ".join(text.split()[:count])


def _tokens(text: str) -> int:
    return msgs.message_tokens({"role": "user", "content": text})


def summary_text(number: int, previous: str, entries: list[str], max_tokens: int) -> str:
    """``SUMMARY-<number>``, then the previous summary's lines and the first words of each entry, cut
    (oldest lines first) to ``max_tokens`` and to a quarter of the input's tokens."""
    lines = [line for line in previous.splitlines()[1:] if line.strip()] if previous else []
    lines += [_first_words(entry, SUMMARY_WORDS) for entry in entries if entry.strip()]
    budget = min(max_tokens, max(40, (_tokens(previous) + sum(_tokens(e) for e in entries)) // 4))
    header = f"SUMMARY-{number}: the conversation so far, one line per message."
    while lines and _tokens("\n".join([header, *lines])) > budget:
        lines.pop(0)
    return "\n".join([header, *lines])


_OWUI_ROLE = re.compile(r"^(?:USER|ASSISTANT|SYSTEM|TOOL): ", re.M)
_ECHO_ROLE = re.compile(r"^\[\d+\] (?:User|Assistant|Tool result[^:]*): ", re.M)


def _entries(block: str, role: re.Pattern[str]) -> list[str]:
    starts = [m.end() for m in role.finditer(block)]
    ends = [*[m.start() for m in role.finditer(block)][1:], len(block)]
    return [block[s:e].strip() for s, e in zip(starts, ends, strict=True)]


def _between(text: str, start: str, end: str) -> str:
    begin = text.find(start)
    if begin < 0:
        return ""
    begin += len(start)
    stop = text.find(end, begin) if end else -1
    return text[begin : stop if stop >= 0 else len(text)]


def _fact(text: str, number: int) -> dict[str, Any]:
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)]
    return {
        "fact": _first_words(text, FACT_WORDS),
        "memory_importance": 3,
        "memory_id": "_".join([*words[:3], str(number)]),
        "tags": [*words[:3], "memory", "chat", "user"][:3],
    }


class StandIn:
    """The stand-in model, an OpenAI-compatible server: `/models`, `/chat/completions`, `/embeddings`."""

    def __init__(self, summary_seconds: float) -> None:
        self.summary_seconds = summary_seconds
        self.calls: list[Call] = []
        self.replies: list[tuple[str, str]] = []  # (user text, the recorded reply), newest last
        self.in_flight = 0
        self.base_url = ""  # set once it is served
        self._lock = threading.Lock()
        self._summaries = 0
        routes = []
        for prefix in ("", "/v1"):
            routes += [
                Route(f"{prefix}/models", self._models, methods=["GET"]),
                Route(f"{prefix}/chat/completions", self._chat, methods=["POST"]),
                Route(f"{prefix}/embeddings", self._embeddings, methods=["POST"]),
            ]
        self.app = Starlette(routes=routes)

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}
        )

    async def _embeddings(self, request: Request) -> JSONResponse:
        body = await request.json()
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        return JSONResponse(
            {"object": "list", "model": body.get("model"), "data": [
                {"object": "embedding", "index": i, "embedding": _embedding(t)} for i, t in enumerate(texts)
            ]}
        )  # fmt: skip

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        kind = kind_of(messages)
        call = Call(
            kind, time.monotonic(), math.nan, body, "\n".join(_text(m.get("content")) for m in messages), ""
        )
        with self._lock:
            self.calls.append(call)  # recorded on arrival: a call still running is seen
        if kind == "chat":
            await asyncio.sleep(CHAT_SECONDS)
            answer = self._reply(messages)
        else:
            with self._lock:
                self.in_flight += 1
            try:
                await asyncio.sleep(self.summary_seconds)
                if kind in ("owui_compaction", "echo_summary"):
                    with self._lock:
                        self._summaries += 1
                        call.summary_id = self._summaries
                answer = self._background(
                    kind, call.prompt, int(body.get("max_tokens") or 1000), call.summary_id
                )
            finally:
                with self._lock:
                    self.in_flight -= 1
        call.answer, call.ended = answer, time.monotonic()
        sent = sum(msgs.message_tokens(m) for m in messages)
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or MODEL,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": sent, "completion_tokens": _tokens(answer), "total_tokens": sent},
            }
        )

    def _reply(self, messages: list[dict[str, Any]]) -> str:
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        last = users[-1] if users else ""
        for said, reply in reversed(self.replies):
            if said and said in last:
                return reply
        return "Gina: I see."

    def _background(self, kind: str, prompt: str, max_tokens: int, summary_id: int | None) -> str:
        if kind == "owui_compaction":
            previous = _between(
                prompt, "### Previous Summary:\n", "\n\n### Messages Being Compacted:"
            ).strip()
            block = _between(
                prompt, "### Messages Being Compacted:\n", "\n\n### Recent Messages Kept In Context:"
            )
            return summary_text(summary_id or 0, previous, _entries(block, _OWUI_ROLE), max_tokens)
        if kind == "echo_summary":
            previous = _between(prompt, "<previous_working_memory>\n", "\n</previous_working_memory>").strip()
            block = _between(prompt, "<conversation>\n", "\n</conversation>")
            return summary_text(summary_id or 0, previous, _entries(block, _ECHO_ROLE), max_tokens)
        if kind == "owui_memory_review":
            existing = set(re.findall(r"^- id=\S+ type=\S+ path=\S* content=(.*)$", prompt, re.M))
            transcript = _between(prompt, "\nConversation:\n", "")
            said = [e[len("user: ") :] for e in transcript.split("\n\n") if e.startswith("user: ")]
            operations: list[dict[str, str]] = []
            for text in said:
                fact = _first_words(text, FACT_WORDS)
                if fact and fact not in existing and len(operations) < MAX_FACTS:
                    existing.add(fact)
                    operations.append({"action": "add", "type": "user", "path": "", "content": fact})
            return json.dumps({"operations": operations})
        if kind == "echo_distill":
            conversation = _between(prompt, "<conversation>\n", "\n</conversation>")
            said = [
                re.sub(r"^User(?: \([^)]*\))?: ", "", p)
                for p in conversation.split("\n\n")
                if re.match(r"^User(?: \([^)]*\))?: ", p)
            ]
            facts = [_fact(text, i) for i, text in enumerate(said[:MAX_FACTS]) if text.strip()]
            return json.dumps({"worth_remembering": bool(facts), "memories": facts})
        old = _between(prompt, "<old_memory>\n", "\n</old_memory>")
        new = _between(prompt, "<new_memory>\n", "\n</new_memory>")
        return json.dumps({"summary": _first_words(max(old, new, key=len), 40)})

    def background_calls(self, since: float) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.kind != "chat" and c.started >= since]

    def chat_call(self, start: float, end: float) -> Call | None:
        with self._lock:
            found = [c for c in self.calls if c.kind == "chat" and start <= c.started <= end]
        return found[-1] if found else None

    def wait_idle(self, quiet: float, within: float) -> None:
        """Until no background call runs and none started for ``quiet`` seconds (or ``within`` passed)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with self._lock:
                last = max(
                    (c.ended for c in self.calls if c.kind != "chat" and c.ended == c.ended), default=0.0
                )
                busy = self.in_flight
            if not busy and time.monotonic() - last >= quiet:
                return
            time.sleep(0.5)


def _embedding(text: str, dim: int = 64) -> list[float]:
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        vector[int.from_bytes(digest[:2], "big") % dim] += 1.0 if digest[2] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


# -- the chat played -------------------------------------------------------------------------------------


def played_turns(name: str, turns: int) -> tuple[list[tuple[str, str]], Any]:
    """The first ``turns`` exchanges of a LoCoMo conversation as (user text, reply) pairs: what comes
    before the user's message in an exchange (the other speaker opening a session) leads its text."""
    transcript = locomo.load(locomo.data_dir(), [name])[0]
    pairs = []
    for exchange in transcript.exchanges:
        text = "\n".join(_text(m.content) for m in exchange.sent).strip()
        reply = "\n".join(_text(m.content) for m in exchange.replies).strip()
        if text and reply:
            pairs.append((text, reply))
        if len(pairs) == turns:
            break
    return pairs, transcript


@dataclass
class TurnRow:
    label: str  # "turn 7", "late edit", "early edit"
    seconds: float
    to_model: float | None  # sending the turn -> the chat request at the stand-in
    tokens: int  # of the chat request
    raw_tokens: int  # the branch's whole history as messages
    system_kept: bool
    system_exact: bool  # the request's system message is the system prompt, byte for byte (cacheable)
    summaries: list[int]  # SUMMARY-<n> the request carries
    made_during: list[int]  # summaries whose call started during this turn (before the next one)
    made_in_turn: bool  # a summary call started before the chat request (Open WebUI's compaction)
    request: str = ""
    aec_tokens: int = 0  # ECHO's AEC block in the request
    memory_tokens: int = 0  # memories injected (Open WebUI's <memory_context>, ECHO's <echo_memories>)


@dataclass
class Side:
    name: str
    rows: list[TurnRow] = field(default_factory=list)
    summaries: dict[int, Call] = field(default_factory=dict)
    background: list[Call] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    edits: dict[str, tuple[str, str]] = field(default_factory=dict)  # label -> (replaced, new text)
    notes: list[str] = field(default_factory=list)


def _raw_tokens(branch: list[tuple[str, str]], current: str) -> int:
    history = [{"role": "system", "content": SYSTEM}]
    for said, reply in branch:
        history += [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    history.append({"role": "user", "content": current})
    return sum(msgs.message_tokens(m) for m in history)


def play(
    side: Side,
    chat: openwebui_chat.SavedChat,
    stand_in: StandIn,
    pairs: list[tuple[str, str]],
    think: float,
    dump: Path | None = None,
) -> None:
    """Every turn, then the two edits; a row per turn."""
    stand_in.replies = list(pairs)
    warm_up = openwebui_chat.SavedChat(chat.http, chat.model, chat.system, features=dict(chat.features))
    warm_up.create()
    warm_up.send(WARM_UP)  # not measured: the first turn loads what each side loads once (ECHO: MiniLM)
    stand_in.wait_idle(quiet=1, within=30)
    chat.create()
    since = time.monotonic()

    def measured(label: str, turn: openwebui_chat.Turn, branch: list[tuple[str, str]]) -> TurnRow:
        end = turn.started + turn.seconds
        call = stand_in.chat_call(turn.started, end)
        request = call.prompt if call else ""
        made = [
            c for c in stand_in.background_calls(turn.started) if c.kind in SUMMARY_KINDS and c.started <= end
        ]
        sent: list[dict[str, Any]] = call.body.get("messages", []) if call else []
        systems = [_text(m.get("content")) for m in sent if m.get("role") == "system"]
        return TurnRow(
            label=label,
            seconds=turn.seconds,
            to_model=(call.started - turn.started) if call else None,
            tokens=sum(msgs.message_tokens(m) for m in sent),
            raw_tokens=_raw_tokens(branch, turn.text),
            system_kept=any(SYSTEM in text for text in systems),
            system_exact=systems == [SYSTEM],
            summaries=sorted({int(n) for n in _SUMMARY_ID.findall(request)}),
            made_during=[c.summary_id or 0 for c in made],
            made_in_turn=call is not None and any(c.started <= call.started for c in made),
            request=request,
            aec_tokens=sum(_tokens(block) for block in _AEC.findall(request)),
            memory_tokens=sum(_tokens(block) for block in _MEMORY_BLOCKS.findall(request)),
        )

    for index, (said, _reply) in enumerate(pairs):
        turn = chat.send(said)
        side.rows.append(measured(f"turn {index + 1}", turn, pairs[:index]))
        print(
            f"  [{side.name}] turn {index + 1:3}: {turn.seconds:5.2f} s, {side.rows[-1].tokens:5} tokens"
            f" (raw {side.rows[-1].raw_tokens}), summaries {side.rows[-1].summaries}",
            flush=True,
        )
        time.sleep(think)
    stand_in.wait_idle(quiet=3, within=60)
    # The summaries a turn's outlet asked for start after it answered: give each turn the summary calls
    # that started before the next turn was sent.
    starts = [turn.started for turn in chat.turns] + [time.monotonic()]
    for i, row in enumerate(side.rows):
        row.made_during = [
            c.summary_id or 0
            for c in stand_in.background_calls(since)
            if c.kind in SUMMARY_KINDS and starts[i] <= c.started < starts[i + 1]
        ]
    for label, index in (("late edit", len(pairs) - 2), ("early edit", 2)):
        replaced = pairs[index][0]
        edited = f"Let me put that another way ({label}): my new studio will be called Moonlight Steps."
        stand_in.replies.append((edited, pairs[index][1]))
        side.edits[label] = (replaced, edited)
        turn = chat.edit(index, edited)
        row = measured(label, turn, pairs[:index])
        side.rows.append(row)
        print(f"  [{side.name}] {label}: summaries {row.summaries}", flush=True)
        time.sleep(think)
    stand_in.wait_idle(quiet=8, within=180)
    side.background = stand_in.background_calls(since)
    side.summaries = {c.summary_id: c for c in side.background if c.summary_id is not None}
    if dump is not None:
        with dump.open("w") as out:
            for c in stand_in.background_calls(since) + [
                c for c in stand_in.calls if c.kind == "chat" and c.started >= since
            ]:
                out.write(
                    json.dumps(
                        {
                            "kind": c.kind,
                            "at": c.started - since,
                            "seconds": c.ended - c.started,
                            "summary": c.summary_id,
                            "messages": c.body.get("messages"),
                            "answer": c.answer,
                        }
                    )
                    + "\n"
                )


def tainted(side: Side, summary_id: int, replaced: str, seen: frozenset[int] = frozenset()) -> bool:
    """Whether summary ``summary_id`` was made from the text ``replaced`` (directly, or by folding a
    summary that was)."""
    call = side.summaries.get(summary_id)
    if call is None or summary_id in seen:
        return False
    if _snippet(replaced) in _normal(call.prompt):
        return True
    folded = {int(n) for n in _SUMMARY_ID.findall(call.prompt)} - {summary_id}
    return any(tainted(side, n, replaced, seen | {summary_id}) for n in folded)


def _normal(text: str) -> str:
    return " ".join(text.split())


def _snippet(text: str) -> str:
    return _normal(text)[:80]


def edit_verdict(side: Side, label: str) -> str:
    replaced, edited = side.edits[label]
    row = next(r for r in side.rows if r.label == label)
    request = _normal(row.request)
    wrong = [n for n in row.summaries if tainted(side, n, replaced)]
    if wrong:
        return f"wrong: SUMMARY-{wrong[0]} covers the replaced text"
    if _normal(edited)[:80] not in request:
        return "wrong: the edited text is missing"
    if not row.summaries:
        return "right (no summary)"
    used = row.summaries[-1]
    if used in row.made_during:
        return f"right (SUMMARY-{used}, made in the turn for the new branch)"
    return f"right (SUMMARY-{used}, made before the edit, still valid)"


# -- the two passes ----------------------------------------------------------------------------------


@contextlib.contextmanager
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def owui_pass(args: argparse.Namespace, stand_in: StandIn, pairs: list[tuple[str, str]], work: Path) -> Side:
    side = Side("owui")
    port = openwebui_live.free_port()
    settings = {
        "ENABLE_CONTEXT_COMPACTION": "true",
        "CONTEXT_COMPACTION_TOKEN_THRESHOLD": str(args.threshold),
        "ENABLE_MEMORIES": "true",
        "ENABLE_MEMORY_BACKGROUND_REVIEW": "true",
        "RAG_OPENAI_API_BASE_URL": stand_in_url(stand_in),
        "RAG_OPENAI_API_KEY": "bench",
        "RAG_EMBEDDING_MODEL": "standin-embed",
    }
    env = openwebui_chat.openwebui_env(work / "webui", stand_in_url(stand_in), "bench", **settings)
    with processes() as started:
        started.append(openwebui_chat.start_openwebui(work, port, env))
        webui = f"http://127.0.0.1:{port}"
        token, _user, _key = openwebui_chat.sign_up(webui)
        http = httpx.Client(base_url=webui, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        chat_config = http.get("/api/v1/chats/config").json() if args.verbose else {}
        if chat_config:
            print(f"  Open WebUI chat config: {chat_config}", flush=True)
        chat = openwebui_chat.SavedChat(http, MODEL, SYSTEM, features={"memory": True})
        play(side, chat, stand_in, pairs, args.think, work / "calls.jsonl")
        listed = http.get("/api/v1/memories/").json()
        side.memories = [m["content"] for m in listed if isinstance(m, dict) and m.get("content")]
    return side


def echo_pass(args: argparse.Namespace, stand_in: StandIn, pairs: list[tuple[str, str]], work: Path) -> Side:
    side = Side("echo")
    echo_port, port = openwebui_live.free_port(), openwebui_live.free_port()
    echo, webui = f"http://127.0.0.1:{echo_port}", f"http://127.0.0.1:{port}"
    dsn = os.environ.get("ECHO_DATABASE_URL") or testing.test_dsn()
    tenant = f"owbi-{uuid.uuid4().hex[:8]}"
    env = openwebui_chat.openwebui_env(work / "webui", stand_in_url(stand_in), "bench")
    try:
        with processes() as started:
            started.append(openwebui_chat.start_openwebui(work, port, env))
            token, user_id, api_key = openwebui_chat.sign_up(webui)
            base = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
            llm = (
                {"ECHO_LLM_PROVIDER": "offline"}
                if args.echo_llm == "offline"
                else {
                    "ECHO_LLM_PROVIDER": "openai",
                    "ECHO_OPENAI_BASE_URL": stand_in_url(stand_in),
                    "ECHO_LLM_MODEL": MODEL,
                }
            )
            echo_env = {
                **base,
                **llm,
                "ECHO_API_KEY": openwebui_live.ECHO_KEY,
                "ECHO_ADMIN_KEY": ECHO_ADMIN_KEY,
                "ECHO_DATA_DIR": str(work / "echo"),
                "ECHO_DATABASE_URL": dsn,
                "ECHO_TENANT": tenant,
                "ECHO_INPROCESS_WORKER": "true",
                "ECHO_PORT": str(echo_port),
                "ECHO_OPENWEBUI_URL": webui,
                "ECHO_OPENWEBUI_API_KEY": api_key,
                "ECHO_LOG_LEVEL": "WARNING",
            }
            log = (work / "echo.log").open("wb")
            echoctl = ROOT / ".venv" / "bin" / "echoctl"
            started.append(
                subprocess.Popen([str(echoctl), "serve"], env=echo_env, stdout=log, stderr=subprocess.STDOUT)
            )
            openwebui_live.wait_for(f"{echo}/readyz", 240, '"ready"')
            code, _out = openwebui_live.echoctl_connect(
                webui, echo, api_key, "--admin-key", api_key, "--echo-key", openwebui_live.ECHO_KEY
            )
            if code != 0:
                raise SystemExit(f"echoctl openwebui connect exited {code}")
            echo_http = httpx.Client(
                base_url=echo, headers={"Authorization": f"Bearer {openwebui_live.ECHO_KEY}"}, timeout=30
            )
            compression = {
                "compression_threshold_tokens": args.threshold,
                "max_context_tokens": 4 * args.threshold,
                "max_summary_tokens": 1000,
                "summary_model_max_context": 8000,
            }
            echo_http.post("/echo_compression/valves/update", json=compression).raise_for_status()
            echo_http.post(
                "/echo_memory/valves/update", json={"DISTILLATION_MODEL": MODEL}
            ).raise_for_status()
            http = httpx.Client(base_url=webui, headers={"Authorization": f"Bearer {token}"}, timeout=120)
            chat = openwebui_chat.SavedChat(http, MODEL, SYSTEM)
            play(side, chat, stand_in, pairs, args.think, work / "calls.jsonl")
            side.memories = echo_memories(echo, user_id)
    finally:  # once ECHO has stopped
        with contextlib.suppress(Exception):
            asyncio.run(testing.drop_schema(dsn, tenancy.schema_for(tenant)))
    return side


def echo_memories(echo: str, user_id: str) -> list[str]:
    texts: list[str] = []
    offset = 0
    while True:
        page = httpx.get(
            f"{echo}/memories",
            params={"user_id": user_id, "limit": 100, "offset": offset},
            headers={"Authorization": f"Bearer {ECHO_ADMIN_KEY}"},
            timeout=30,
        ).json()
        items = (
            next((v for v in page.values() if isinstance(v, list)), []) if isinstance(page, dict) else page
        )
        for item in items:
            text = next(
                (item.get(k) for k in ("text", "content", "memory", "fact", "summary") if item.get(k)), ""
            )
            texts.append(str(text))
        if len(items) < 100:
            return texts
        offset += 100


def stand_in_url(stand_in: StandIn) -> str:
    return stand_in.base_url


# -- the table ---------------------------------------------------------------------------------------


def duplicates(texts: list[str]) -> int:
    seen: list[set[str]] = []
    count = 0
    for text in texts:
        words = locomo.words_of(text) - locomo.STOPWORDS
        if any(words and len(words & other) / len(words | other) >= 0.8 for other in seen):
            count += 1
        seen.append(words)
    return count


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" if values else "-"


def metrics(side: Side, judged: list[Any]) -> dict[str, str]:
    turns = [r for r in side.rows if r.label.startswith("turn ")]
    if side.name == "owui":
        compaction = [r for r in turns if r.made_in_turn]
    else:
        compaction = [r for r in turns if r.made_during]
    ordinary = [r for r in turns if r not in compaction]
    carried = [r for r in turns if r.summaries]
    summaries = [c for c in side.background if c.kind in SUMMARY_KINDS]
    memory_calls = [c for c in side.background if c.kind not in SUMMARY_KINDS]
    found = sum(locomo.answer_recalled(q.answer, "\n".join(side.memories)) for q in judged)
    late = turns[-1] if turns else None
    return {
        "summaries made (2 s each at the model)": f"{len(summaries)}",
        "turns on which a summary was made": ", ".join(r.label.removeprefix("turn ") for r in compaction)
        or "-",
        "latency, ordinary turns (median)": _median([r.seconds for r in ordinary]),
        "latency, turns where a summary is made (median / max)": (
            f"{_median([r.seconds for r in compaction])} / {max(r.seconds for r in compaction):.2f} s"
            if compaction
            else "-"
        ),
        "to the model, ordinary turns / turns with a summary made (median)": (
            f"{_median([r.to_model for r in ordinary if r.to_model is not None])} / "
            f"{_median([r.to_model for r in compaction if r.to_model is not None])}"
        ),
        "tokens per chat request, mean (raw history)": (
            f"{statistics.mean(r.tokens for r in turns):.0f}"
            f" ({statistics.mean(r.raw_tokens for r in turns):.0f})"
        ),
        "of which chat (messages, summary) / memories / AEC block": (
            f"{statistics.mean(r.tokens - r.memory_tokens - r.aec_tokens for r in turns):.0f}"
            f" / {statistics.mean(r.memory_tokens for r in turns):.0f}"
            f" / {statistics.mean(r.aec_tokens for r in turns):.0f}"
        ),
        "tokens of the last turn (raw history)": f"{late.tokens} ({late.raw_tokens})" if late else "-",
        "turns whose request carries a summary": f"{len(carried)} of {len(turns)}",
        "system prompt in every request": f"{sum(r.system_kept for r in side.rows)} of {len(side.rows)}",
        "system message = the system prompt, unchanged (a cacheable prefix)": (
            f"{sum(r.system_exact for r in side.rows)} of {len(side.rows)}"
        ),
        "summary after the late edit (last but one message)": edit_verdict(side, "late edit"),
        "summary after the early edit (3rd message)": edit_verdict(side, "early edit"),
        "memory calls (review / distill + merge)": f"{len(memory_calls)}",
        "memories made": f"{len(side.memories)}",
        "duplicate memories (Jaccard >= 0.8)": f"{duplicates(side.memories)}",
        "answer recall of all memories": f"{found} of {len(judged)} ({found / max(1, len(judged)):.0%})",
    }


def table(sides: list[Side], judged: list[Any]) -> str:
    columns = [metrics(side, judged) for side in sides]
    width = max(len(k) for k in columns[0])
    cells = [max(len(TITLES[s.name]), *(len(c[k]) for k in c)) for s, c in zip(sides, columns, strict=True)]
    header = f"{'metric':{width}}  " + "  ".join(
        f"{TITLES[s.name]:{w}}" for s, w in zip(sides, cells, strict=True)
    )
    lines = [header, "-" * len(header)]
    for key in columns[0]:
        lines.append(
            f"{key:{width}}  " + "  ".join(f"{c[key]:{w}}" for c, w in zip(columns, cells, strict=True))
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversation", default="30", help="LoCoMo conversation (bench/locomo.py's folder)")
    parser.add_argument("--turns", type=int, default=40, help="turns played before the edits")
    parser.add_argument("--threshold", type=int, default=1000, help="compaction threshold of both (tokens)")
    parser.add_argument("--think", type=float, default=2.5, help="seconds between two turns")
    parser.add_argument(
        "--summary-seconds", type=float, default=2.0, help="the stand-in's seconds per summary"
    )
    parser.add_argument("--echo-llm", choices=("openai", "offline"), default="openai")
    parser.add_argument("--sides", default="owui,echo", help="owui,echo or one of them")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still stops what it started
    if not openwebui_live.OPENWEBUI.exists():
        print(f"skipped: no Open WebUI at {openwebui_live.OPENWEBUI} (make it with `make openwebui-venv`)")
        return 0
    pairs, transcript = played_turns(args.conversation, args.turns)
    judged = locomo.judged(transcript, args.turns)
    chosen = [s for s in args.sides.split(",") if s in SIDES]
    work = Path(tempfile.mkdtemp(prefix="echo-owui-builtin-"))
    sides: list[Side] = []
    stand_in = StandIn(args.summary_seconds)
    server = LiveServer(stand_in.app, name="stand-in")
    load_before = os.getloadavg()
    started = time.monotonic()
    with server:
        stand_in.base_url = server.url
        for name in chosen:
            print(
                f"\n== {TITLES[name]}: {len(pairs)} turns of LoCoMo conversation {args.conversation}",
                flush=True,
            )
            folder = work / name
            folder.mkdir()
            sides.append((owui_pass if name == "owui" else echo_pass)(args, stand_in, pairs, folder))
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"\nOpen WebUI 0.12.4 built-in against ECHO ({args.echo_llm} provider for background work), {when}; "
        f"{len(pairs)} turns of LoCoMo {args.conversation} + 2 edits, threshold {args.threshold} tokens, "
        f"{args.think} s between turns, {args.summary_seconds} s per summary; {os.cpu_count()} cores "
        f"({platform.machine()}), load {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; "
        f"{time.monotonic() - started:.0f} s; answer recall over {len(judged)} QA pairs\n"
    )
    print(table(sides, judged))
    if args.keep:
        print(f"\nlogs in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
