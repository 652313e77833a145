"""Manual compaction end to end: `POST /chats/{chat_id}/compact` on the real app over HTTP and
`echoctl compact` against a real PostgreSQL, the real worker making the summary (offline LLM), and
the next inlet injecting it.

A chat far below its threshold is recorded by the outlet (no job) → compaction enqueues the summary
the outlet would plan (202, idempotent) → the worker makes it → the next inlet uses it, and a second
compaction answers "already summarised". Then who may ask: the admin key (not the hooks' key), the
user (body or `x-openwebui-user-id` header, never two different ones), chats ECHO never saw for that
user (404), bodies of the wrong shape (422), a store that is down (503), and the command line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fakes import hooks_service
from fakes.hooks_service import run_jobs
from fakes.live_server import LiveServer
from fakes.metric_samples import sample
from fakes.shared_data import ADMIN_KEY, API_KEY

from echo.adapters.store import pool, testing
from echo.adapters.store.pool import Store
from echo.capabilities import base, handlers
from echo.capabilities.backends import on_store
from echo.capabilities.compression import filter as compression
from echo.config import tenancy
from echo.config.settings import Settings
from echo.config.valves import CompressionValves
from echo.domain import bodies
from echo.entrypoints import cli
from echo.entrypoints.http import create_app
from echo.ports import backends as backends_port

USER = {"id": "u1", "name": "Ada", "email": "ada@example.org", "role": "user"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}  # compaction is the memory-management API's (ECHO_ADMIN_KEY)
VALVES = {
    "compression_threshold_tokens": 100_000,  # never reached here: only a compaction summarises
    "max_context_tokens": 200_000,
    "keep_first": 1,
    "keep_last": 4,
    "max_summary_tokens": 150,
    "summary_model_max_context": 4000,
}


@pytest.fixture
def offline(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "echo", api_key=API_KEY, admin_key=ADMIN_KEY, llm_provider="offline")


def serving(settings: Settings, dsn: str, schema: str, *, broken: bool = False) -> Any:
    return hooks_service.serving(settings, dsn, schema, compression_valves=VALVES, broken=broken)


@pytest.fixture
async def http(offline: Settings, dsn: str, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(offline, dsn, store.schema) as client:
        yield client


def conversation(turns: int, *, detailed: bool = False) -> list[dict[str, Any]]:
    """A chat as an outlet sends it (flat, with ids); ``detailed`` answers are long enough that a
    summary of them costs less than they do (``max_summary_share`` of their tokens)."""
    items: list[dict[str, Any]] = [{"id": "s0", "role": "system", "content": "You are helpful."}]
    for i in range(turns):
        answer = f"Answer {i}: step {i} costs {i * 10} euros."
        if detailed:
            answer += (
                f" It is paid by card on delivery, the receipt goes in folder {i} of the archive,"
                f" and the supplier for step {i} is contacted by email two days before it starts."
            )
        items.append({"id": f"u{i}", "role": "user", "content": f"Question {i}: what about step {i}?"})
        items.append({"id": f"a{i}", "role": "assistant", "content": answer})
    return items


def outlet_body(messages: list[dict[str, Any]], chat_id: str = "c1") -> dict[str, Any]:
    return {"model": "gpt-x", "messages": messages, "chat_id": chat_id, "session_id": "s1", "id": "last"}


def inlet_body(messages: list[dict[str, Any]], question: str, chat_id: str = "c1") -> dict[str, Any]:
    sent = [{"role": m["role"], "content": m["content"]} for m in messages]
    sent.append({"role": "user", "content": question})
    return {"model": "gpt-x", "messages": sent, "metadata": {"chat_id": chat_id, "user_id": "u1"}}


async def hook(http: httpx.AsyncClient, phase: str, body: dict[str, Any], user: dict[str, Any] = USER) -> Any:
    answer = await http.post(f"/echo_compression/filter/{phase}", json={"body": body, "user": user})
    assert answer.status_code == 200, answer.text
    return answer.json()


async def compact(http: httpx.AsyncClient, path: str, **request: Any) -> httpx.Response:
    """`POST path` (a compaction) with the admin key; `http` holds the hooks' key."""
    return await http.post(path, **{**request, "headers": {**ADMIN, **request.get("headers", {})}})


async def jobs_of(store: Store) -> list[Any]:
    return await store.fetch("SELECT id, kind, state, payload, idempotency_key FROM jobs ORDER BY id")


async def test_a_chat_below_its_threshold_is_summarised_on_request_and_the_next_inlet_uses_it(
    http: httpx.AsyncClient, store: Store, offline: Settings
) -> None:
    messages = conversation(6, detailed=True)  # 12 turns, a few hundred tokens: far below 100 000
    await hook(http, "outlet", outlet_body(messages))
    assert await jobs_of(store) == []  # the outlet recorded the branch, enqueued nothing

    answer = await compact(http, "/chats/c1/compact", json={"user_id": "u1"})
    assert answer.status_code == 202, answer.text
    queued = answer.json()
    [job] = await jobs_of(store)
    assert queued == {
        "status": "queued",
        "chat_id": "c1",
        "user_id": "u1",
        "detail": "summarise turns 2-8 of 12",
        "turns": 12,
        "job_id": job["id"],
        "state": "pending",
        "start": 1,
        "stop": 8,
        "covered_hash": job["payload"]["covered_hash"],
        "covered_count": 8,
    }
    assert job["idempotency_key"] == f"summary:u1:{queued['covered_hash']}"
    assert (job["kind"], job["payload"]["chat_id"], len(job["payload"]["invariants"])) == ("summary", "c1", 7)
    assert "Question" not in json.dumps(job["payload"])  # references, not a transcript

    existing = sample("echo_jobs_enqueued_total", kind="summary", result="existing")
    again = await compact(http, "/v1/chats/c1/compact", json={"user_id": "u1"})  # and under /v1
    assert again.status_code == 202
    assert again.json()["job_id"] == job["id"]
    # The outlet past its threshold plans the same branch point: the same job, not a second one.
    await http.post("/echo_compression/valves/update", json={**VALVES, "compression_threshold_tokens": 10})
    await hook(http, "outlet", outlet_body(messages))
    assert len(await jobs_of(store)) == 1
    assert sample("echo_jobs_enqueued_total", kind="summary", result="existing") == existing + 2
    await http.post("/echo_compression/valves/update", json=VALVES)

    await run_jobs(store, handlers.builtin_registry(offline, on_store(store)))
    [job] = await jobs_of(store)
    assert job["state"] == "done"
    row = await store.fetchrow("SELECT covered_count, head_count, provider FROM summaries")
    assert row is not None
    assert dict(row) == {"covered_count": 8, "head_count": 1, "provider": "offline"}

    done = await compact(http, "/chats/c1/compact", json={"user_id": "u1"})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "already_summarised"
    assert (done.json()["covered_count"], done.json()["covered_hash"]) == (8, queued["covered_hash"])

    sent = inlet_body(messages, "And step 7?")
    kept = (await hook(http, "inlet", sent))["messages"]
    assert kept[:2] == sent["messages"][:2]  # the system prompt and keep_first
    assert kept[2]["content"].startswith("<echo_summary")
    assert 'covers="8"' in kept[2]["content"]
    assert kept[3:] == sent["messages"][9:]  # the last 4 turns and the new question


async def test_a_short_chat_has_nothing_to_summarise(http: httpx.AsyncClient, store: Store) -> None:
    await hook(http, "outlet", outlet_body(conversation(2)))
    answer = await compact(http, "/chats/c1/compact", json={"user_id": "u1"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "nothing"
    assert "all 4 turns stay verbatim" in answer.json()["detail"]
    assert await jobs_of(store) == []


async def test_who_may_ask_and_for_which_chat(http: httpx.AsyncClient, store: Store) -> None:
    await hook(http, "outlet", outlet_body(conversation(6)))
    anonymous = http.build_request("POST", "/chats/c1/compact", json={"user_id": "u1"})
    del anonymous.headers["Authorization"]  # no key at all
    refused = await http.send(anonymous)
    assert refused.status_code == 401
    assert "bearer" in refused.json()["detail"]
    wrong = await http.post(
        "/chats/c1/compact", json={"user_id": "u1"}, headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 401
    hooks_key = await http.post("/chats/c1/compact", json={"user_id": "u1"})  # Open WebUI's key
    assert hooks_key.status_code == 403
    assert "ECHO_ADMIN_KEY" in hooks_key.json()["detail"]

    unknown = await compact(http, "/chats/c9/compact", json={"user_id": "u1"})
    assert unknown.status_code == 404
    assert unknown.json()["status"] == "unknown_chat"
    assert "'c9'" in unknown.json()["detail"]
    stranger = await compact(http, "/chats/c1/compact", json={"user_id": "u2"})  # another user's chat
    assert stranger.status_code == 404
    assert "'u2'" in stranger.json()["detail"]

    requests: list[dict[str, Any]] = [
        {"json": {}},
        {},  # no body at all
        {"json": {}, "headers": {"x-openwebui-user-id": ""}},
    ]
    for request in requests:
        missing = await compact(http, "/chats/c1/compact", **request)
        assert missing.status_code == 422, missing.text
        assert missing.json()["detail"]["message"].startswith("body.user_id: Field required"), missing.text
        assert "x-openwebui-user-id header" in missing.json()["detail"]["message"]
    for bad, field in (
        ({"user_id": 7}, "body.user_id"),
        ({"user_id": ""}, "body.user_id"),
        ({"user_id": "u1", "userid": "u1"}, "body.userid"),
        ({"user_id": "u1", "model": 3}, "body.model"),
        (["u1"], "body"),
    ):
        refused = await compact(http, "/chats/c1/compact", json=bad)
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"]["message"].startswith(field), refused.text
    not_json = await compact(http, "/chats/c1/compact", content=b"{not json", headers={"content-type": "x"})
    assert not_json.status_code == 415
    assert "'x'" in not_json.json()["detail"]
    malformed = await compact(
        http, "/chats/c1/compact", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 422
    assert "malformed JSON" in malformed.json()["detail"]["message"]
    two = await compact(
        http, "/chats/c1/compact", json={"user_id": "u1"}, headers={"x-openwebui-user-id": "u2"}
    )
    assert two.status_code == 422
    assert "x-openwebui-user-id" in two.json()["detail"]["message"]
    assert await jobs_of(store) == []

    # Open WebUI's user header alone, as its tool servers send it, with an empty body.
    by_header = await compact(http, "/chats/c1/compact", headers={"x-openwebui-user-id": "u1"})
    assert by_header.status_code == 202, by_header.text
    assert by_header.json()["user_id"] == "u1"


async def test_the_chat_model_names_the_summary_model_and_its_window(
    http: httpx.AsyncClient, store: Store
) -> None:
    await hook(http, "outlet", outlet_body(conversation(6)))
    answer = await compact(
        http, "/chats/c1/compact", json={"user_id": "u1", "model": "echo.gemini-2.5-flash"}
    )
    assert answer.status_code == 202, answer.text
    [job] = await jobs_of(store)
    assert job["payload"]["model"] == "gemini-2.5-flash"
    assert job["payload"]["window"]["input_tokens"] == 4000
    assert job["payload"]["locale"] == "en-US"


async def test_a_store_that_is_down_answers_503(offline: Settings, dsn: str, store: Store) -> None:
    async with serving(offline, dsn, store.schema) as http:
        await hook(http, "outlet", outlet_body(conversation(6)))
    async with serving(offline, dsn, store.schema, broken=True) as broken:
        answer = await compact(broken, "/chats/c1/compact", json={"user_id": "u1"})
    assert answer.status_code == 503
    assert "store is unavailable" in answer.json()["detail"]


async def test_without_backends_there_is_no_store_to_compact(offline: Settings) -> None:
    with LiveServer(create_app(offline), name="echo-hooks") as live:
        async with httpx.AsyncClient(
            base_url=live.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        ) as http:
            answer = await compact(http, "/chats/c1/compact", json={"user_id": "u1"})
    assert answer.status_code == 503
    assert "no store" in answer.json()["detail"]


# -- echoctl compact --------------------------------------------------------------------------------


async def _record(dsn: str, tenant: str, messages: list[dict[str, Any]]) -> None:
    """The real echo_compression outlet records the chat's branch in the tenant's schema."""
    store = await pool.Store.open(dsn, schema=tenancy.schema_for(tenant), max_size=2)
    try:
        from echo.adapters.store import migrations

        await migrations.migrate(store)
        body = outlet_body(messages)
        ctx = base.HookContext(
            filter_id="echo_compression",
            phase="outlet",
            user=USER,
            ids=bodies.turn_ids(body, USER),
            valves=CompressionValves(**VALVES),
        )
        backends = backends_port.Backends(store=on_store(store))
        await compression.CompressionFilter(lambda: backends).outlet(body, ctx)
    finally:
        await store.close()


async def _jobs(dsn: str, tenant: str) -> list[Any]:
    store = await pool.Store.open(dsn, schema=tenancy.schema_for(tenant), max_size=1)
    try:
        return await jobs_of(store)
    finally:
        await store.close()


def test_echoctl_compact_enqueues_the_same_job(tmp_path: Path) -> None:
    dsn = testing.test_dsn()
    reason = asyncio.run(testing.unreachable(dsn))
    if reason:
        pytest.skip(f"PostgreSQL is not reachable at {dsn}: {reason}")
    tenant = testing.unique_tenant()
    valves_file = tmp_path / "valves.yaml"
    valves_file.write_text(json.dumps({"echo_compression": VALVES}))
    env = {
        "ECHO_DATABASE_URL": dsn,
        "ECHO_TENANT": tenant,
        "ECHO_DATA_DIR": str(tmp_path / "echo"),
        "ECHO_VALVES_FILE": str(valves_file),
    }
    try:
        asyncio.run(_record(dsn, tenant, conversation(6)))
        runner = CliRunner()
        queued = runner.invoke(cli.main, ["compact", "c1", "--user", "u1"], env=env)
        assert queued.exit_code == 0, queued.output
        [job] = asyncio.run(_jobs(dsn, tenant))
        assert queued.stdout.startswith(f"summary job {job['id']} pending: summarise turns 2-8 of 12")
        assert job["payload"]["chat_id"] == "c1"
        again = runner.invoke(cli.main, ["compact", "c1", "-u", "u1", "--json"], env=env)
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout)["job_id"] == job["id"]
        assert len(asyncio.run(_jobs(dsn, tenant))) == 1

        unknown = runner.invoke(cli.main, ["compact", "c9", "--user", "u1"], env=env)
        assert unknown.exit_code == 1
        assert "chat 'c9' is unknown to ECHO for user 'u1'" in unknown.output
        no_user = runner.invoke(cli.main, ["compact", "c1"], env=env)
        assert no_user.exit_code == 2
        assert "--user" in no_user.output
        help_text = runner.invoke(cli.main, ["compact", "--help"])
        assert help_text.exit_code == 0
        assert "latest branch now" in help_text.output
    finally:
        asyncio.run(testing.drop_schema(dsn, tenancy.schema_for(tenant)))
