"""One contract for every ``VectorStore`` adapter: the in-memory fake and Qdrant local mode.

``open_store(tenant=…, dimension=…)`` opens another store on the same backend (one Qdrant client,
or one shared dict), so tenancy and dimension checks are observed across stores.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from echo.adapters.vectors import (
    DimensionMismatch,
    InMemoryVectorStore,
    Kind,
    Point,
    QdrantVectorStore,
    VectorStore,
    VectorStoreError,
    collection_name,
)
from echo.adapters.vectors.qdrant_local import LocalQdrantClient

DIM = 4
OpenStore = Callable[..., VectorStore]


@pytest.fixture(params=["memory", "qdrant-local"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenStore]:
    if request.param == "memory":
        space: dict = {}
        yield lambda tenant="acme", dimension=DIM: InMemoryVectorStore(
            dimension=dimension, tenant=tenant, space=space
        )
        return
    client = LocalQdrantClient(tmp_path / "qdrant")
    yield lambda tenant="acme", dimension=DIM: QdrantVectorStore(client, dimension=dimension, tenant=tenant)
    await client.close()


@pytest.fixture
def store(open_store: OpenStore) -> VectorStore:
    return open_store()


def unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def point(pid: str, vector: list[float], user: str = "alice", **kw: object) -> Point:
    return Point(id=pid, vector=vector, user_id=user, **kw)  # type: ignore[arg-type]


async def test_satisfies_the_port(store: VectorStore) -> None:
    assert isinstance(store, VectorStore)
    assert (store.tenant, store.dimension) == ("acme", DIM)
    await store.check()


async def test_search_returns_nearest_first_with_payload(store: VectorStore) -> None:
    await store.upsert(
        Kind.MEMORY,
        [
            point("m1", unit(1, 0, 0, 0), payload={"text": "likes tea", "n": 1}),
            point("m2", unit(1, 1, 0, 0), chat_id="c1", payload={"text": "likes green tea"}),
            point("m3", unit(0, 0, 1, 0), source_id="f1"),
        ],
    )
    hits = await store.search(Kind.MEMORY, unit(1, 0.1, 0, 0), user_id="alice", limit=2)
    assert [h.id for h in hits] == ["m1", "m2"]
    assert hits[0].score > hits[1].score
    assert hits[0].score == pytest.approx(unit(1, 0.1, 0, 0)[0], abs=1e-5)
    assert hits[0].payload == {"text": "likes tea", "n": 1}
    assert (hits[1].user_id, hits[1].chat_id, hits[1].source_id) == ("alice", "c1", None)
    assert hits[0].vector is None


async def test_every_read_is_scoped_to_the_user(store: VectorStore) -> None:
    await store.upsert(Kind.MEMORY, [point("a", unit(1, 0, 0, 0)), point("b", unit(1, 0, 0, 0), user="bob")])
    assert [h.id for h in await store.search(Kind.MEMORY, unit(1, 0, 0, 0), user_id="bob")] == ["b"]
    assert [r.id for r in (await store.scroll(Kind.MEMORY, user_id="alice"))[0]] == ["a"]
    assert [r.id for r in await store.retrieve(Kind.MEMORY, ["a", "b"], user_id="alice")] == ["a"]
    assert await store.count(Kind.MEMORY, user_id="carol") == 0
    assert await store.search(Kind.MEMORY, unit(1, 0, 0, 0), user_id="carol") == []
    with pytest.raises(ValueError, match="user_id"):
        await store.search(Kind.MEMORY, unit(1, 0, 0, 0), user_id="")


async def test_chat_and_source_filters(store: VectorStore) -> None:
    await store.upsert(
        Kind.EPHEMERAL,
        [
            point("x1", unit(1, 0, 0, 0), chat_id="c1", source_id="f1"),
            point("x2", unit(1, 0, 0, 1), chat_id="c1", source_id="f2"),
            point("x3", unit(1, 0, 1, 0), chat_id="c2", source_id="f1"),
        ],
    )
    query = unit(1, 0, 0, 0)
    assert {h.id for h in await store.search(Kind.EPHEMERAL, query, user_id="alice", chat_id="c1")} == {
        "x1",
        "x2",
    }
    assert {h.id for h in await store.search(Kind.EPHEMERAL, query, user_id="alice", source_id="f1")} == {
        "x1",
        "x3",
    }
    hits = await store.search(Kind.EPHEMERAL, query, user_id="alice", chat_id="c1", source_id="f2")
    assert [h.id for h in hits] == ["x2"]
    assert await store.count(Kind.EPHEMERAL, user_id="alice", source_id="f1") == 2
    assert await store.count(Kind.MEMORY, user_id="alice") == 0  # kinds are separate collections


async def test_min_score_drops_far_points(store: VectorStore) -> None:
    await store.upsert(Kind.MEMORY, [point("near", unit(1, 0, 0, 0)), point("far", unit(0, 1, 0, 0))])
    hits = await store.search(Kind.MEMORY, unit(1, 0, 0, 0), user_id="alice", min_score=0.5)
    assert [h.id for h in hits] == ["near"]


async def test_upsert_replaces_by_id_and_ids_round_trip(store: VectorStore) -> None:
    uid = "2c1f8e0a-3b7d-4e55-9a2b-1d3c4e5f6a7b"
    await store.upsert(Kind.MEMORY, [point("sha256:abc/1", unit(1, 0, 0, 0)), point(uid, unit(0, 1, 0, 0))])
    await store.upsert(Kind.MEMORY, [point("sha256:abc/1", unit(0, 0, 1, 0), payload={"v": 2})])
    records = await store.retrieve(
        Kind.MEMORY, ["sha256:abc/1", uid, "missing"], user_id="alice", with_vectors=True
    )
    by_id = {r.id: r for r in records}
    assert set(by_id) == {"sha256:abc/1", uid}
    assert by_id["sha256:abc/1"].payload == {"v": 2}
    assert by_id["sha256:abc/1"].vector == pytest.approx((0, 0, 1, 0), abs=1e-6)
    assert await store.count(Kind.MEMORY, user_id="alice") == 2


async def test_scroll_pages_through_everything_once(store: VectorStore) -> None:
    await store.upsert(Kind.MEMORY, [point(f"p{i}", unit(1, i, 0, 0)) for i in range(7)])
    await store.upsert(Kind.MEMORY, [point("other", unit(1, 0, 0, 0), user="bob")])
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        page, cursor = await store.scroll(
            Kind.MEMORY, user_id="alice", limit=3, cursor=cursor, with_vectors=True
        )
        assert len(page) <= 3
        assert all(r.vector is not None and len(r.vector) == DIM for r in page)
        seen += [r.id for r in page]
        if cursor is None:
            break
    assert sorted(seen) == sorted(f"p{i}" for i in range(7))


async def test_delete_by_id_is_scoped_to_the_user(store: VectorStore) -> None:
    await store.upsert(Kind.MEMORY, [point("shared-id", unit(1, 0, 0, 0)), point("keep", unit(0, 1, 0, 0))])
    await store.upsert(Kind.EPHEMERAL, [point("bobs", unit(1, 0, 0, 0), user="bob")])
    await store.delete(Kind.MEMORY, ["shared-id"], user_id="bob")  # not bob's: nothing happens
    assert await store.count(Kind.MEMORY, user_id="alice") == 2
    await store.delete(Kind.MEMORY, ["shared-id", "never-stored"], user_id="alice")
    assert [r.id for r in (await store.scroll(Kind.MEMORY, user_id="alice"))[0]] == ["keep"]
    assert await store.count(Kind.EPHEMERAL, user_id="bob") == 1


async def test_delete_where_chat_or_source(store: VectorStore) -> None:
    await store.upsert(
        Kind.EPHEMERAL,
        [
            point("c1f1", unit(1, 0, 0, 0), chat_id="c1", source_id="f1"),
            point("c1f2", unit(1, 1, 0, 0), chat_id="c1", source_id="f2"),
            point("c2f1", unit(1, 0, 1, 0), chat_id="c2", source_id="f1"),
            point("bob-c1", unit(1, 0, 0, 1), user="bob", chat_id="c1"),
        ],
    )
    await store.delete_where(Kind.EPHEMERAL, user_id="alice", source_id="f1")
    assert [r.id for r in (await store.scroll(Kind.EPHEMERAL, user_id="alice"))[0]] == ["c1f2"]
    await store.delete_where(Kind.EPHEMERAL, user_id="alice", chat_id="c1")
    assert await store.count(Kind.EPHEMERAL, user_id="alice") == 0
    assert await store.count(Kind.EPHEMERAL, user_id="bob", chat_id="c1") == 1


async def test_delete_user_forgets_every_collection(store: VectorStore) -> None:
    await store.upsert(Kind.MEMORY, [point("m", unit(1, 0, 0, 0)), point("bm", unit(1, 0, 0, 0), user="bob")])
    await store.upsert(Kind.EPHEMERAL, [point("e", unit(0, 1, 0, 0), chat_id="c")])
    await store.delete_user("alice")
    for kind in Kind:
        assert await store.count(kind, user_id="alice") == 0
    assert await store.count(Kind.MEMORY, user_id="bob") == 1


async def test_deletes_on_missing_collections_are_noops(open_store: OpenStore) -> None:
    fresh = open_store(tenant="empty")
    await fresh.delete_user("alice")
    await fresh.delete(Kind.MEMORY, ["x"], user_id="alice")
    await fresh.delete_where(Kind.EPHEMERAL, user_id="alice", chat_id="c")


async def test_tenants_never_share_a_collection(open_store: OpenStore) -> None:
    acme, globex = open_store(tenant="acme"), open_store(tenant="globex")
    await acme.upsert(Kind.MEMORY, [point("m", unit(1, 0, 0, 0))])
    assert await globex.count(Kind.MEMORY, user_id="alice") == 0
    assert await globex.search(Kind.MEMORY, unit(1, 0, 0, 0), user_id="alice") == []
    await globex.delete_user("alice")
    assert await acme.count(Kind.MEMORY, user_id="alice") == 1
    assert collection_name("acme", Kind.MEMORY) != collection_name("globex", Kind.MEMORY)
    with pytest.raises(ValueError, match="tenant"):
        open_store(tenant="Bad/Tenant")


async def test_dimension_mismatch_names_both_sizes_and_the_collection(open_store: OpenStore) -> None:
    await open_store(dimension=DIM).upsert(Kind.MEMORY, [point("m", unit(1, 0, 0, 0))])
    wider = open_store(dimension=8)
    with pytest.raises(DimensionMismatch) as caught:
        await wider.search(Kind.MEMORY, [1.0] + [0.0] * 7, user_id="alice")
    message = str(caught.value)
    for part in ("acme__echo_memory", "4-d", "8-d"):
        assert part in message
    assert (caught.value.expected, caught.value.actual, caught.value.retryable) == (8, 4, False)
    await wider.delete_user("alice")  # forgetting a user never depends on the dimension
    assert await open_store(dimension=DIM).count(Kind.MEMORY, user_id="alice") == 0


async def test_a_vector_of_the_wrong_size_is_refused(store: VectorStore) -> None:
    with pytest.raises(DimensionMismatch, match=r"point 'bad' has 3 dimensions"):
        await store.upsert(Kind.MEMORY, [point("bad", [1.0, 0.0, 0.0])])
    with pytest.raises(DimensionMismatch, match="query vector has 5 dimensions"):
        await store.search(Kind.MEMORY, [1.0] * 5, user_id="alice")
    assert isinstance(DimensionMismatch("c", expected=1, actual=2), VectorStoreError)


def test_points_validate_their_scope() -> None:
    with pytest.raises(ValueError, match="user_id"):
        Point(id="p", vector=[1.0], user_id="")
    with pytest.raises(ValueError, match="reserved"):
        Point(id="p", vector=[1.0], user_id="u", payload={"user_id": "other"})


def test_the_public_api_is_pinned() -> None:
    import echo.adapters.vectors

    assert set(echo.adapters.vectors.__all__) == {
        "DimensionMismatch",
        "Hit",
        "InMemoryVectorStore",
        "Kind",
        "Point",
        "QdrantVectorStore",
        "Record",
        "VectorStore",
        "VectorStoreError",
        "collection_name",
        "point_uuid",
        "vector_store_from_settings",
    }
    assert all(hasattr(echo.adapters.vectors, name) for name in echo.adapters.vectors.__all__)
