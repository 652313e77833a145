"""ECHO's additions inside the budget (issue 20), on a real LoCoMo chat through every filter.

The conversation of `tests/fixtures/locomo/30.json` is replayed through echo_context, echo_compression
and echo_memory (real PostgreSQL, the summary jobs on an in-process worker with the offline provider,
recall from an index holding the user's memories of this same chat), and every turn is checked:

- the request sent on never costs more than what Open WebUI sent plus the AEC block;
- on a chat under the compression threshold, ECHO adds the AEC block and nothing else;
- on a long chat, the summaries are used and the chat's memories still come in where a summary freed
  room.

What a chat recalls of itself stands in for turns it no longer carries; memories of other chats are
what the request would not hold at all, and keep to the recall budget (`RECALL_MAX_TOKENS`) alone:
the last test shows a short chat getting them.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.store import pool
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities import backends as capability_backends
from echo.capabilities import handlers as capability_handlers
from echo.capabilities import registry
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import transcripts
from echo.domain.compression import messages as msgs
from echo.domain.memory import recall
from echo.entrypoints.replay import driver
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base
from echo.queue import queue, worker

LOCOMO = Path(__file__).resolve().parents[1] / "fixtures" / "locomo" / "30.json"
AEC = re.compile(r"<environnement_contexte\b.*?</environnement_contexte>", re.DOTALL)
DIMENSION = 16


class _Index:
    def __init__(self, embedder: FakeEmbedder, vectors: InMemoryVectorStore) -> None:
        self._embedder, self._vectors = embedder, vectors

    def embedder(self) -> FakeEmbedder:
        return self._embedder

    async def vectors(self) -> InMemoryVectorStore:
        return self._vectors


def _chat(exchanges: int) -> transcripts.Transcript:
    whole = transcripts.parse(json.loads(LOCOMO.read_text()), "30")[0]
    return transcripts.Transcript(
        id=f"locomo-30-{secrets.token_hex(3)}",
        title=whole.title,
        kind=whole.kind,
        model=whole.model,
        system=whole.system,
        exchanges=whole.exchanges[:exchanges],
        questions=whole.questions,
        sources=whole.sources,
    )


async def _remember(
    vectors: InMemoryVectorStore, embedder: FakeEmbedder, user_id: str, count: int, chat_id: str
) -> None:
    """``count`` memories of the user, from chat ``chat_id``: facts of about forty words each."""
    texts = [
        f"Fact {i}: the user mentioned on 2023-0{1 + i % 9}-1{i % 10} that project {i} with Ana costs "
        f"{100 + i} euros, was decided in Paris, and needs a review every {i + 2} weeks by the team."
        for i in range(count)
    ]
    vectors_of = await embedder.embed(texts)
    await vectors.upsert(
        vectors_base.Kind.MEMORY,
        [
            vectors_base.Point(
                id=f"m{i}",
                vector=vector,
                user_id=user_id,
                chat_id=chat_id,
                payload={"summary": text, "memory_importance": 3, "timestamp": time.time(), "tags": []},
            )
            for i, (text, vector) in enumerate(zip(texts, vectors_of, strict=True))
        ],
    )


@asynccontextmanager
async def _replayer(
    store: pool.Store,
    tmp_path: Path,
    compression: valves_module.CompressionValves,
    memories_of: str,
) -> AsyncIterator[driver.Replayer]:
    """The replay driver's session, with an index holding the user's memories (its own has none)."""
    settings = Settings(data_dir=tmp_path / "echo", llm_provider="offline", log_level="WARNING")
    handlers = capability_handlers.builtin_registry(settings, capability_backends.on_store(store))
    runs = worker.Worker.from_settings(store, handlers, settings, concurrency=1)
    embedder, vectors = FakeEmbedder(dimension=DIMENSION), InMemoryVectorStore(dimension=DIMENSION)
    user = {"id": f"budget-{secrets.token_hex(4)}", "name": "budget", "role": "user"}
    await _remember(vectors, embedder, user["id"], 40, memories_of)
    backends = backends_port.Backends(
        store=capability_backends.on_store(store), index=_Index(embedder, vectors)
    )
    filters = registry.build_filters((), lambda counts: None, backends=lambda: backends)
    memory = valves_module.MemoryValves(RECALL_MIN_SIMILARITY=0.0, INLET_DEADLINE_MS=60000)
    context = valves_module.ContextValves()
    valves: dict[str, valves_module.Valves] = {
        "echo_compression": compression.model_copy(update={"inlet_deadline_ms": 60000}),
        "echo_memory": memory,
        "echo_context": context,
    }
    drain = driver.QueueDrain(queue.JobQueue(store), within=120.0)
    await runs.start()
    try:
        yield driver.Replayer(list(filters.filters.values()), valves.get, user=user, drain=drain)
    finally:
        await runs.stop()
        for spec in handlers:
            close = getattr(spec.handler, "aclose", None)
            if close is not None:
                await close()


class _Turns:
    """Every turn's messages as Open WebUI sent them and as ECHO sends them on."""

    def __init__(self) -> None:
        self.pairs: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []


async def _play(replayer: driver.Replayer, chat: transcripts.Transcript) -> _Turns:
    seen = _Turns()
    history: list[transcripts.Message] = []
    for exchange in chat.exchanges:
        history.extend(exchange.sent)
        reply_id = exchange.replies[0].id if exchange.replies else f"{exchange.sent[-1].id}-reply"
        sent, final, _ = await replayer.inlet(chat, history, reply_id=reply_id)
        seen.pairs.append((sent, final))
        if exchange.replies:
            history.extend(exchange.replies)
            await replayer.outlet(chat, history)
            assert replayer.drain is not None
            assert await replayer.drain()
    return seen


def _aec_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """What the AEC block adds: the message that holds it, against the same message without it."""
    for message in messages:
        text = msgs.content_text(message.get("content"))
        if AEC.search(text):
            bare = {**message, "content": AEC.sub("", text).lstrip("\n")}
            return msgs.message_tokens(message) - msgs.message_tokens(bare)
    raise AssertionError("the AEC block is missing")


def _without_aec(message: Mapping[str, Any]) -> str:
    return AEC.sub("", msgs.content_text(message.get("content"))).strip()


def _check_budget(turns: _Turns) -> None:
    for number, (sent, final) in enumerate(turns.pairs, start=1):
        allowed = driver.tokens_of(sent) + _aec_tokens(final)
        assert driver.tokens_of(final) <= allowed, f"turn {number}: {driver.tokens_of(final)} > {allowed}"


@pytest.mark.timeout(600)
async def test_a_short_chat_gets_the_aec_block_and_nothing_else(store: pool.Store, tmp_path: Path) -> None:
    compression = driver.compression_valves(
        valves_module.CompressionValves(), threshold=60000, max_context=120000
    )
    chat = _chat(30)
    async with _replayer(store, tmp_path, compression, chat.id) as replayer:
        turns = await _play(replayer, chat)
    _check_budget(turns)
    for number, (sent, final) in enumerate(turns.pairs, start=1):
        assert len(final) == len(sent), f"turn {number}"
        assert [_without_aec(m) for m in final] == [msgs.content_text(m.get("content")) for m in sent]
        assert not any(f"<{recall.MEMORIES_TAG}" in msgs.content_text(m.get("content")) for m in final)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("style", ["aggressive", "faithful"])
async def test_a_long_chat_never_costs_more_than_without_echo(
    store: pool.Store, tmp_path: Path, style: str
) -> None:
    compression = driver.compression_valves(
        valves_module.CompressionValves(), threshold=1500, max_context=4000, style=style
    )
    chat = _chat(50)
    async with _replayer(store, tmp_path, compression, chat.id) as replayer:
        turns = await _play(replayer, chat)
    _check_budget(turns)
    summarised = [final for _, final in turns.pairs if driver.summary_covers(final)]
    assert summarised, "no summary was used: the test checks nothing"
    recalled = [
        final
        for final in summarised
        if any(f"<{recall.MEMORIES_TAG}" in msgs.content_text(m.get("content")) for m in final)
    ]
    assert recalled, "no memory came in where summaries freed room"
    for sent, final in turns.pairs:
        if driver.summary_covers(final):
            assert driver.tokens_of(final) < driver.tokens_of(sent)  # the summary saved more than it cost


@pytest.mark.timeout(600)
async def test_a_short_chat_recalls_other_chats_within_the_recall_budget(
    store: pool.Store, tmp_path: Path
) -> None:
    compression = driver.compression_valves(
        valves_module.CompressionValves(), threshold=60000, max_context=120000
    )
    chat = _chat(4)
    async with _replayer(store, tmp_path, compression, "an-older-chat") as replayer:
        turns = await _play(replayer, chat)
    budget = valves_module.MemoryValves().RECALL_MAX_TOKENS
    for number, (sent, final) in enumerate(turns.pairs, start=1):
        blocks = [
            text
            for text in (msgs.content_text(m.get("content")) for m in final)
            if f"<{recall.MEMORIES_TAG}" in text
        ]
        assert len(blocks) == 1, f"turn {number}: no memories of the older chat"
        added = driver.tokens_of(final) - driver.tokens_of(sent) - _aec_tokens(final)
        assert 0 < added <= budget, f"turn {number}: {added} tokens added"
