"""``QdrantVectorStore`` specifics: local storage on disk, a server's errors, payload indexes, settings.

The behaviour shared with the fake is in tests/contract/test_vectors.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import threading
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fakes.live_server import LiveServer
from qdrant_client.local.qdrant_local import QdrantLocal
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from echo.adapters.vectors import (
    DimensionMismatch,
    Kind,
    Point,
    QdrantVectorStore,
    VectorStoreError,
    vector_store_from_settings,
)
from echo.config.settings import Settings

T = TypeVar("T")


async def test_local_storage_persists_and_checks_the_dimension_on_reopen(tmp_path: Path) -> None:
    store = QdrantVectorStore.connect(dimension=3, tenant="acme", path=tmp_path / "q")
    await store.upsert(Kind.MEMORY, [Point(id="m", vector=[1.0, 0.0, 0.0], user_id="u")])
    second = QdrantVectorStore.connect(dimension=3, path=tmp_path / "q")  # opens on first use
    with pytest.raises(VectorStoreError, match="already accessed") as caught:
        await second.check()  # one path, one client
    assert caught.value.reason == "locked"
    await second.aclose()
    await store.aclose()

    reopened = QdrantVectorStore.connect(dimension=3, tenant="acme", path=tmp_path / "q")
    assert await reopened.count(Kind.MEMORY, user_id="u") == 1
    await reopened.aclose()
    wider = QdrantVectorStore.connect(dimension=384, tenant="acme", path=tmp_path / "q")
    with pytest.raises(
        DimensionMismatch, match=r"'acme__echo_memory' holds 3-d vectors but the embedder gives 384-d"
    ):
        await wider.count(Kind.MEMORY, user_id="u")
    await wider.aclose()


async def test_a_storage_path_that_cannot_be_a_directory_is_a_permanent_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = QdrantVectorStore.connect(dimension=3, path=tmp_path / "file" / "q")
    with pytest.raises(
        VectorStoreError, match=r"cannot open Qdrant storage .*file/q: NotADirectoryError"
    ) as caught:
        await store.check()
    assert (caught.value.reason, caught.value.retryable) == ("storage", False)
    await store.aclose()


async def ticks_while(operation: Awaitable[T]) -> tuple[T, int, float]:
    """Await ``operation`` beside a 5 ms ticker: its result, the ticks meanwhile, its duration (s)."""
    ticks = 0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.005)
            ticks += 1

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    started = time.perf_counter()
    try:
        result = await operation
    finally:
        elapsed = time.perf_counter() - started
        seen = ticks
        done.set()
        await asyncio.wait_for(ticker, timeout=5)
    return result, seen, elapsed


async def test_a_large_local_search_leaves_the_event_loop_free() -> None:
    """Local mode searches by brute force in Python and numpy: seconds on a big collection."""
    store = QdrantVectorStore.connect(dimension=64, tenant="acme", path=":memory:")
    rng = random.Random(7)
    points = [Point(id=f"p{i}", vector=[rng.random() for _ in range(64)], user_id="u") for i in range(5000)]
    await store.upsert(Kind.MEMORY, points)
    query = store.search(Kind.MEMORY, points[42].vector, user_id="u", limit=3)
    hits, ticks, elapsed = await ticks_while(query)
    assert hits[0].id == "p42"
    assert elapsed > 0.05, "the search is too small to tell"
    assert ticks >= 3, f"the loop ticked {ticks} times during a {elapsed:.2f} s search"  # 0 when blocked
    await store.aclose()


async def test_opening_local_storage_leaves_the_event_loop_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a path loads every stored point; on a big storage that takes seconds."""
    loaded_on: list[int] = []
    load = QdrantLocal._load

    def slow_load(self: QdrantLocal) -> None:
        loaded_on.append(threading.get_ident())
        time.sleep(0.3)
        load(self)

    monkeypatch.setattr(QdrantLocal, "_load", slow_load)
    started = time.perf_counter()
    store = QdrantVectorStore.connect(dimension=3, tenant="acme", path=tmp_path / "q")
    assert time.perf_counter() - started < 0.2
    _, ticks, elapsed = await ticks_while(store.check())
    assert loaded_on, "local storage was not opened through qdrant-client's local mode"
    assert loaded_on[0] != threading.get_ident()
    assert ticks >= 3, f"the loop ticked {ticks} times while the storage opened in {elapsed:.2f} s"
    await store.upsert(Kind.MEMORY, [Point(id="m", vector=[1.0, 0.0, 0.0], user_id="u")])
    await store.aclose()
    assert loaded_on == [loaded_on[0]]  # opened once


async def test_settings_choose_the_path_or_memory(tmp_path: Path) -> None:
    store = vector_store_from_settings(Settings(data_dir=tmp_path, tenant="t1"), dimension=2)
    await store.upsert(Kind.EPHEMERAL, [Point(id="e", vector=[0.0, 1.0], user_id="u", chat_id="c")])
    await store.aclose()
    assert "t1__echo_ephemeral" in os.listdir(tmp_path / "qdrant" / "collection")
    memory = vector_store_from_settings(Settings(qdrant_path=Path(":memory:")), dimension=2)
    await memory.check()
    await memory.aclose()
    assert ":memory:" not in os.listdir()


async def test_an_unreachable_server_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = vector_store_from_settings(
        Settings(qdrant_url=f"http://127.0.0.1:{port}", qdrant_timeout_seconds=2), dimension=4
    )
    with pytest.raises(VectorStoreError, match="unreachable") as caught:
        await store.search(Kind.MEMORY, [1.0, 0, 0, 0], user_id="u")
    assert caught.value.retryable
    await store.aclose()


class FakeQdrantServer:
    """Just enough of Qdrant's REST API to create a collection; records requests, or fails with ``fail``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.api_keys: set[str | None] = set()
        self.collections: dict[str, dict[str, Any]] = {}
        self.fail: int | None = None
        self.app = Starlette(
            routes=[Route("/{path:path}", self.handle, methods=["GET", "PUT", "POST", "DELETE"])]
        )

    async def handle(self, request: Request) -> Response:
        body = json.loads(await request.body() or b"null")
        self.requests.append((request.method, request.url.path, body))
        self.api_keys.add(request.headers.get("api-key"))
        if self.fail is not None:
            return JSONResponse({"status": {"error": "scripted"}}, status_code=self.fail)
        parts = request.url.path.strip("/").split("/")
        name = parts[1] if len(parts) > 1 else ""
        if parts[-1] == "exists":
            return self.ok({"exists": name in self.collections})
        if request.method == "PUT" and len(parts) == 2:
            self.collections[name] = {
                "vectors": body["vectors"],
                "sparse_vectors": body.get("sparse_vectors"),
                "schema": {},
            }
            return self.ok(True)
        if request.method == "PUT" and parts[-1] == "index":
            self.collections[name]["schema"][body["field_name"]] = {
                "data_type": body["field_schema"],
                "points": 0,
            }
            return self.ok({"operation_id": 1, "status": "completed"})
        if request.method == "GET" and len(parts) == 2:
            return self.ok(self.info(name))
        if parts[-1] == "count":
            return self.ok({"count": 0})
        if request.method == "PUT" and parts[-1] == "points":
            return self.ok({"operation_id": 2, "status": "completed"})
        if parts[-2:] == ["query", "batch"]:
            return self.ok([{"points": []} for _ in body["searches"]])
        return JSONResponse({"status": {"error": "not faked"}}, status_code=404)

    def info(self, name: str) -> dict[str, Any]:
        collection = self.collections[name]
        return {
            "status": "green",
            "optimizer_status": "ok",
            "segments_count": 1,
            "payload_schema": collection["schema"],
            "config": {
                "params": {
                    "vectors": collection["vectors"],
                    "sparse_vectors": collection["sparse_vectors"],
                    "shard_number": 1,
                    "replication_factor": 1,
                },
                "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000},
                "optimizer_config": {
                    "deleted_threshold": 0.2,
                    "vacuum_min_vector_number": 1000,
                    "default_segment_number": 0,
                    "flush_interval_sec": 5,
                },
                "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
            },
        }

    @staticmethod
    def ok(result: Any) -> JSONResponse:
        return JSONResponse({"result": result, "status": "ok", "time": 0.0})


@pytest.fixture
def qdrant_server() -> Iterator[tuple[FakeQdrantServer, str]]:
    server = FakeQdrantServer()
    with LiveServer(server.app, name="fake-qdrant") as live:
        yield server, live.url


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
async def test_a_server_gets_cosine_collections_with_keyword_indexes(
    qdrant_server: tuple[FakeQdrantServer, str],
) -> None:
    server, url = qdrant_server
    settings = Settings(qdrant_url=url, qdrant_api_key="qk", tenant="acme")
    store = vector_store_from_settings(settings, dimension=8)
    assert await store.count(Kind.MEMORY, user_id="u") == 0
    assert server.collections["acme__echo_memory"]["vectors"] == {"size": 8, "distance": "Cosine"}
    indexes = [(path, body) for method, path, body in server.requests if path.endswith("/index")]
    assert [body["field_name"] for _, body in indexes] == ["user_id", "chat_id", "source_id"]
    schemas = {body["field_name"]: body["field_schema"] for _, body in indexes}
    assert schemas["user_id"] == {"type": "keyword", "is_tenant": True}  # one collection, many users
    assert schemas["chat_id"] == schemas["source_id"] == {"type": "keyword", "is_tenant": False}
    counts = [body for _, path, body in server.requests if path.endswith("/count")]
    assert counts[0]["filter"]["must"] == [{"key": "user_id", "match": {"value": "u"}}]
    assert server.api_keys == {"qk"}
    await store.aclose()


async def test_a_server_gets_a_lexical_vector_with_idf_and_one_batch_per_hybrid_search(
    qdrant_server: tuple[FakeQdrantServer, str],
) -> None:
    server, url = qdrant_server
    store = QdrantVectorStore.connect(dimension=4, tenant="acme", url=url)
    await store.upsert(Kind.MEMORY, [Point(id="p", vector=[1.0, 0, 0, 0], user_id="u", text="Zanzibar 1987")])
    assert server.collections["acme__echo_memory"]["sparse_vectors"] == {"lexical": {"modifier": "idf"}}
    [upsert] = [
        body for method, path, body in server.requests if method == "PUT" and path.endswith("/points")
    ]
    vector = upsert["points"][0]["vector"]
    assert vector[""] == [1.0, 0, 0, 0]
    assert sorted(vector["lexical"]["indices"]) == vector["lexical"]["indices"]
    assert len(vector["lexical"]["indices"]) == 2
    assert (
        await store.search(Kind.MEMORY, [1.0, 0, 0, 0], user_id="u", chat_id="c", query_text="Zanzibar") == []
    )
    [batch] = [body for _, path, body in server.requests if path.endswith("/points/query/batch")]
    dense, sparse = batch["searches"]
    scope = [{"key": "user_id", "match": {"value": "u"}}, {"key": "chat_id", "match": {"value": "c"}}]
    assert (dense["query"], dense.get("using"), dense["filter"]["must"]) == (
        {"nearest": [1.0, 0, 0, 0]},
        None,
        scope,
    )
    assert sparse["using"] == "lexical"
    assert sparse["query"]["nearest"]["values"] == [1.0]
    assert sparse["params"]["idf"] == {"corpus": {"must": scope}}  # IDF over the user's points only
    assert dense["limit"] == sparse["limit"] == 30
    await store.aclose()


@pytest.mark.parametrize(("code", "retryable"), [(503, True), (429, True), (400, False), (403, False)])
async def test_server_errors_become_domain_errors(
    qdrant_server: tuple[FakeQdrantServer, str], code: int, retryable: bool
) -> None:
    server, url = qdrant_server
    server.fail = code
    store = QdrantVectorStore.connect(dimension=4, url=url)
    with pytest.raises(VectorStoreError, match=f"failed with {code}") as caught:
        await store.upsert(Kind.MEMORY, [Point(id="p", vector=[1.0, 0, 0, 0], user_id="u")])
    assert caught.value.retryable is retryable
    with pytest.raises(VectorStoreError):
        await store.check()
    await store.aclose()


@pytest.mark.parametrize("where", ["server", "local"])
async def test_text_qdrant_cannot_carry_is_stored_with_the_replacement_character(
    qdrant_server: tuple[FakeQdrantServer, str], where: str
) -> None:
    """A lone surrogate cannot be sent as JSON (UTF-8 cannot encode it); NUL is replaced too, as in
    PostgreSQL, so that both stores keep the same text and filters match what was stored."""
    server, url = qdrant_server
    store = QdrantVectorStore.connect(dimension=4, url=url if where == "server" else None)
    point = Point(
        id="m\ud800",
        vector=[1.0, 0, 0, 0],
        user_id="u\x00",
        chat_id="c\x00",
        payload={"text": "a\x00b \ud83d", "tags\udc00": ["\ud800x"]},
    )
    await store.upsert(Kind.MEMORY, [point])
    assert await store.count(Kind.MEMORY, user_id="u\x00", chat_id="c\x00") == (0 if where == "server" else 1)
    if where == "server":
        [upserted] = [body for method, path, body in server.requests if path.endswith("/points")]
        [sent] = upserted["points"]
        assert sent["payload"] == {
            "text": "a\ufffdb \ufffd",
            "tags\ufffd": ["\ufffdx"],
            "_id": "m\ufffd",
            "user_id": "u\ufffd",
            "chat_id": "c\ufffd",
        }
        counted = [body for _, path, body in server.requests if path.endswith("/count")]
        assert {"key": "chat_id", "match": {"value": "c\ufffd"}} in counted[-1]["filter"]["must"]
    else:
        [record], _ = await store.scroll(Kind.MEMORY, user_id="u\x00", chat_id="c\x00")
        assert record.payload == {"text": "a\ufffdb \ufffd", "tags\ufffd": ["\ufffdx"]}
        assert (record.user_id, record.chat_id) == ("u\ufffd", "c\ufffd")
        assert await store.retrieve(Kind.MEMORY, [point.id], user_id="u\x00") == [record]
        assert await store.search(Kind.MEMORY, [1.0, 0, 0, 0], user_id="u\x00", chat_id="c\x00")
        await store.delete(Kind.MEMORY, [point.id], user_id="u\x00")
        assert await store.count(Kind.MEMORY, user_id="u\x00") == 0
    await store.aclose()
