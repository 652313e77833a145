"""`DELETE /users/{id}`'s parts (`echo.capabilities.memory.forgetting`) on a real PostgreSQL: after
forgetting, no
table of the tenant schema that has a `user_id` column holds a row of that user (so a store added
later is checked too), no job names them, no vector point of theirs is left in either collection,
and another user's rows are all still there."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import jsonschema
from fakes.shared_data import ADMIN_KEY, API_KEY

from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.llm.offline import OfflineLLM
from echo.adapters.store import conversations, memories, pool, registries
from echo.adapters.store import shadow as shadow_store
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities.backends import on_store
from echo.capabilities.memory import backends as memory_backends
from echo.capabilities.memory import distill, forgetting, payloads
from echo.capabilities.memory import filter as memory_filter
from echo.config.settings import Settings
from echo.domain import chain, kinds, shadow
from echo.entrypoints.http import create_app
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base
from echo.queue import queue

FACTS = [
    {
        "role": "user",
        "content": "I adopted a border collie called Pixel; she is three and loves agility courses.",
    },
    {"role": "assistant", "content": "Pixel sounds great: border collies excel at agility training courses."},
]


class Backends:
    def __init__(self, vectors: InMemoryVectorStore) -> None:
        self._vectors, self._embedder = vectors, FakeEmbedder(dimension=16)

    def embedder(self) -> Any:
        return self._embedder

    async def vectors(self) -> Any:
        return self._vectors


async def populate(store: pool.Store, vectors: InMemoryVectorStore, user: str) -> None:
    """Every kind of row ECHO keeps about a user, made by the code that makes them."""
    talk = conversations.Conversations(store)
    jobs = queue.JobQueue(store)
    links = chain.build_chain(FACTS)
    await talk.remember(
        user, {k.invariant: conversations.stored_message(m) for k, m in zip(links, FACTS, strict=True)}
    )
    await talk.record_head(user, "chat-1", [link.invariant for link in links])
    await talk.save_summary(
        conversations.NewSummary(
            user_id=user, covered_hash=links[-1].cumulative, covered_count=2, head_count=0, text="summary",
            locale="en-US", model="m", provider="offline", refs=[link.invariant for link in links],
        )
    )  # fmt: skip
    await store.execute(
        "INSERT INTO summary_failures (user_id, chat_id, reason, detail)"
        " VALUES ($1, 'chat-1', 'llm', 'down')",
        user,
    )
    job = payloads.DistillPayload(
        user_id=user, chat_id="chat-1", key=links[-1].cumulative, start=0, parent=None,
        invariants=tuple(link.invariant for link in links),
    )  # fmt: skip
    await jobs.enqueue(
        kinds.DISTILL, job.to_payload(), idempotency_key=memory_filter.distill_job_key(user, job.key)
    )
    claimed = await jobs.claim("w", [kinds.DISTILL], 30)
    assert claimed is not None
    payload = payloads.DistillPayload.decode(claimed.job.payload)  # as the worker hands it over
    run = distill.DistillHandler(
        conversations.Conversations(store), memories.Memories(store), store, OfflineLLM, Backends(vectors)
    )
    await run(claimed.job, payload)
    await jobs.enqueue(kinds.SUMMARY, {"user_id": user, "chat_id": "chat-1"}, idempotency_key=f"s:{user}")
    book = registries.Registries(store)
    await book.save_plan(user, "chat-1", goal="Refactor the auth module", status="in_progress")
    await book.commit_code(
        user, "chat-1", "main.py", lang="python", content="print(1)\n", message="feat: start"
    )
    await shadow_store.ShadowStore(store).record(
        user,
        shadow.model_record(
            shadow.conversation_points(FACTS)[-1],
            contents=[{"role": "model", "parts": [
                {"function_call": {"name": "f", "args": {"x": 1}}, "thought_signature": b"sig"},
                {"inline_data": {"mime_type": "image/png", "data": b"png"}},
            ]}],
            journal=[shadow.JournalEntry(0, "call_1", "f", {"x": 1}, "openwebui")],
            calls={(0, 0): 0}, results={}, answer_text="", openwebui_calls=[], chat_id="chat-1", model="m",
        ),
    )  # fmt: skip
    await vectors.upsert(
        vectors_base.Kind.EPHEMERAL,
        [
            vectors_base.Point(
                id=f"{user}-chunk", vector=[1.0] + [0.0] * 15, user_id=user, source_id="U_x_C_y_T_1"
            )
        ],
    )


async def rows_of(store: pool.Store, user: str) -> dict[str, int]:
    tables = await store.fetch(
        "SELECT table_name FROM information_schema.columns"
        " WHERE table_schema = $1 AND column_name = 'user_id'",
        store.schema,
    )
    counts = {
        t["table_name"]: await store.fetchval(
            f'SELECT count(*) FROM "{t["table_name"]}" WHERE user_id = $1', user
        )
        for t in tables
    }
    counts["jobs"] = await store.fetchval("SELECT count(*) FROM jobs WHERE payload->>'user_id' = $1", user)
    return counts


async def test_forgetting_a_user_leaves_no_row_job_or_vector_of_theirs_and_all_of_the_others(
    store: pool.Store,
) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    for user in ("quinn", "rosa"):
        await populate(store, vectors, user)
    before = await rows_of(store, "quinn")
    expected = {
        "messages",
        "summaries",
        "chat_heads",
        "summary_failures",
        "memories",
        "memory_windows",
        "plans",
        "codex_entries",
        "suture_index",
        "rich_payloads",
        "cognitive_signatures",
        "tool_journal",
        "jobs",
    }
    assert expected <= {table for table, count in before.items() if count}, before

    done = await forgetting.builtin_forgetting(on_store(store), lambda: vectors).forget("quinn")
    assert done.failed == {}
    assert done.deleted["vectors"] == {"echo_memory": 1, "echo_ephemeral": 1}
    assert await rows_of(store, "quinn") == dict.fromkeys(before, 0)
    for kind in vectors_base.Kind:
        assert await vectors.count(kind, user_id="quinn") == 0
        assert await vectors.count(kind, user_id="rosa") == 1
    assert await rows_of(store, "rosa") == before  # the other user keeps everything


async def test_a_part_that_fails_is_named_and_the_others_still_run(store: pool.Store) -> None:
    vectors = InMemoryVectorStore(dimension=16)
    await populate(store, vectors, "sam")
    not_ready = forgetting.builtin_forgetting(on_store(store), lambda: None)  # no vector store yet
    done = await not_ready.forget("sam")
    assert list(done.failed) == ["vectors"]
    assert "not ready" in done.failed["vectors"]
    assert (await rows_of(store, "sam"))["memories"] == 0
    again = await forgetting.builtin_forgetting(on_store(store), lambda: vectors).forget(
        "sam"
    )  # a second call finishes
    assert again.failed == {}
    assert await vectors.count(vectors_base.Kind.MEMORY, user_id="sam") == 0


def _documented(spec: dict[str, Any], status: str) -> jsonschema.Draft202012Validator:
    answer = spec["paths"]["/users/{user_id}"]["delete"]["responses"][status]
    schema = answer["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": spec["components"]})


async def test_the_answer_of_delete_users_is_the_documented_one(store: pool.Store, tmp_path: Path) -> None:
    # Issue 18, point 11: `failed` was an object where an array was documented, `deleted` held
    # objects where integers were.
    vectors = InMemoryVectorStore(dimension=16)
    await populate(store, vectors, "tess")
    settings = Settings(data_dir=tmp_path / "echo", api_key=API_KEY, admin_key=ADMIN_KEY)
    app = create_app(settings)
    runtime = SimpleNamespace(embedder=FakeEmbedder(dimension=16), vectors=None)  # not ready yet
    app.state.backends = backends_port.Backends(
        store=on_store(store), index=memory_backends.RuntimeBackends(runtime)
    )
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://echo") as http:
        spec = (await http.get("/openapi.json")).json()
        partly = await http.delete("/users/tess", headers=admin)  # the vector store is not ready
        runtime.vectors = vectors
        done = await http.delete("/users/tess", headers=admin)
    assert partly.status_code == 503, partly.text
    assert list(partly.json()["failed"]) == ["vectors"]
    assert "not ready" in partly.json()["failed"]["vectors"]
    _documented(spec, "503").validate(partly.json())
    assert done.status_code == 200, done.text
    _documented(spec, "200").validate(done.json())
    assert done.json()["failed"] == {}
    assert done.json()["deleted"]["vectors"] == {"echo_memory": 1, "echo_ephemeral": 1}
    assert partly.json()["deleted"]["jobs_and_memories"]["memories"] == 1
    forgotten = spec["components"]["schemas"]["Forgotten"]["properties"]
    assert forgotten["failed"]["additionalProperties"] == {"type": "string"}
    assert forgotten["deleted"]["additionalProperties"]["additionalProperties"] == {"type": "integer"}
