"""One contract for every ``VectorStore`` adapter: the in-memory fake, Qdrant local mode as ECHO runs
it (``LocalQdrantClient``), and ``AsyncQdrantClient`` — the server's client — on qdrant-client's local
engine, so the calls a server receives are the ones checked here (no Qdrant server on this machine).

``open_store(tenant=…, dimension=…)`` opens another store on the same backend (one Qdrant client,
or one shared dict), so tenancy and dimension checks are observed across stores;
``open_store.dense_only(tenant, kind)`` makes a collection as ECHO made them before hybrid search (no
sparse vector) on that backend.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient, models

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
from echo.adapters.vectors.memory import InMemoryCollection
from echo.adapters.vectors.qdrant_local import LocalQdrantClient
from echo.domain import lexical

DIM = 4


class OpenStore:
    """Opens stores on one backend; ``dense_only`` makes a pre-hybrid collection there."""

    def __init__(
        self, open_one: Callable[[str, int], VectorStore], dense_only: Callable[[str], Awaitable[None]]
    ) -> None:
        self._open, self._dense_only = open_one, dense_only

    def __call__(self, tenant: str = "acme", dimension: int = DIM) -> VectorStore:
        return self._open(tenant, dimension)

    async def dense_only(self, tenant: str, kind: Kind) -> None:
        await self._dense_only(collection_name(tenant, kind))


@pytest.fixture(params=["memory", "qdrant-local", "qdrant-async"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenStore]:
    if request.param == "memory":
        space: dict[str, InMemoryCollection] = {}

        async def legacy_dict(name: str) -> None:
            space[name] = InMemoryCollection(DIM, lexical=False)

        yield OpenStore(lambda t, d: InMemoryVectorStore(dimension=d, tenant=t, space=space), legacy_dict)
        return
    client: LocalQdrantClient | AsyncQdrantClient
    if request.param == "qdrant-local":
        client = LocalQdrantClient(tmp_path / "qdrant")
    else:
        client = AsyncQdrantClient(location=":memory:")

    async def legacy_qdrant(name: str) -> None:
        params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        await client.create_collection(name, vectors_config=params)

    yield OpenStore(lambda t, d: QdrantVectorStore(client, dimension=d, tenant=t), legacy_qdrant)
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


# -- hybrid search ------------------------------------------------------------------------------

FILLER = [
    "we talked about the weather and the garden",
    "she likes painting landscapes on weekends",
    "the new job at the bakery starts soon",
    "a long walk by the river with the kids",
    "pottery class was fun, made a bowl",
    "camping trip planned for the summer",
]


def near(i: int) -> list[float]:
    """Points close to the query direction (1, 0, 0, 0), a little further each."""
    return unit(1, 0.05 * (i + 1), 0.02 * i, 0)


async def test_an_exact_name_and_number_that_dense_misses_is_found(store: VectorStore) -> None:
    await store.upsert(
        Kind.MEMORY,
        [point(f"f{i}", near(i), text=text) for i, text in enumerate(FILLER)]
        + [point("trip", unit(0, 0, 0, 1), text="Melanie flew to Zanzibar on 2023-05-08 for 12 days")],
    )
    query = unit(1, 0, 0, 0)
    dense = await store.search(Kind.MEMORY, query, user_id="alice", limit=3)
    assert "trip" not in [h.id for h in dense]
    assert all(h.lexical is None and h.fused is None for h in dense)
    for question in ("When did Melanie go to Zanzibar?", "what happened on 2023-05-08", "12 days"):
        hits = await store.search(Kind.MEMORY, query, user_id="alice", limit=3, query_text=question)
        assert "trip" in [h.id for h in hits], question
        trip = next(h for h in hits if h.id == "trip")
        assert trip.score == pytest.approx(0.0, abs=1e-6)  # the dense cosine, not a fused score
        assert trip.lexical is not None
        assert trip.lexical > 0
        # first on the lexical side, seventh (last) on the dense side
        assert trip.fused == pytest.approx(1 / (lexical.RRF_K + 1) + 1 / (lexical.RRF_K + 7))


async def test_hits_are_ordered_by_reciprocal_rank_fusion(store: VectorStore) -> None:
    # dense order: a, b, c, d; lexical order: c (two rare terms), b (one), nothing else shares a term
    await store.upsert(
        Kind.MEMORY,
        [
            point("a", unit(1, 0, 0, 0), text="the weather was mild"),
            point("b", unit(1, 0.2, 0, 0), text="Zanzibar trip with friends"),
            point("c", unit(1, 0.4, 0, 0), text="Zanzibar 1987 reunion photos"),
            point("d", unit(1, 0.6, 0, 0), text="baking bread at home"),
        ],
    )
    hits = await store.search(
        Kind.MEMORY, unit(1, 0, 0, 0), user_id="alice", limit=4, query_text="Zanzibar 1987"
    )
    expected = lexical.fuse([["a", "b", "c", "d"], ["c", "b"]])
    assert [h.id for h in hits] == [item for item, _ in expected] == ["c", "b", "a", "d"]
    assert [h.fused for h in hits] == pytest.approx([score for _, score in expected])
    assert hits[0].lexical is not None
    assert hits[1].lexical is not None
    assert hits[0].lexical > hits[1].lexical
    assert (hits[2].lexical, hits[3].lexical) == (None, None)
    cosines = [1.0, unit(1, 0.2, 0, 0)[0], unit(1, 0.4, 0, 0)[0], unit(1, 0.6, 0, 0)[0]]
    assert [h.score for h in hits] == pytest.approx(
        [cosines[2], cosines[1], cosines[0], cosines[3]], abs=1e-5
    )


async def test_hybrid_search_is_scoped_to_the_user_and_idf_to_their_points(store: VectorStore) -> None:
    await store.upsert(
        Kind.MEMORY,
        [point(f"f{i}", near(i), text=text) for i, text in enumerate(FILLER)]
        + [point("mine", unit(0, 0, 1, 0), text="Zanzibar notes")],
    )
    query, question = unit(1, 0, 0, 0), "Zanzibar"
    before = await store.search(Kind.MEMORY, query, user_id="alice", limit=3, query_text=question)
    await store.upsert(
        Kind.MEMORY,
        [point(f"bob{i}", unit(0, 0, 1, 0), user="bob", text="Zanzibar Zanzibar") for i in range(5)],
    )
    after = await store.search(Kind.MEMORY, query, user_id="alice", limit=3, query_text=question)
    assert [(h.id, h.lexical) for h in after] == [(h.id, h.lexical) for h in before]
    assert "mine" in [h.id for h in after]
    assert not any(h.id.startswith("bob") for h in after)
    bobs = await store.search(Kind.MEMORY, query, user_id="bob", limit=10, query_text=question)
    assert {h.id for h in bobs} == {f"bob{i}" for i in range(5)}
    in_chat = await store.search(
        Kind.MEMORY, query, user_id="alice", chat_id="elsewhere", limit=3, query_text=question
    )
    assert in_chat == []


async def test_min_score_bounds_the_dense_score_but_keeps_the_best_lexical_match(store: VectorStore) -> None:
    await store.upsert(
        Kind.EPHEMERAL,
        [
            point("close", unit(1, 0, 0, 0), chat_id="c", text="notes about the garden"),
            point("far-best", unit(0, 1, 0, 0), chat_id="c", text="invoice 4471 from Zanzibar Ltd"),
            point("far-second", unit(0, 0, 1, 0), chat_id="c", text="Zanzibar"),
        ],
    )
    hits = await store.search(
        Kind.EPHEMERAL,
        unit(1, 0, 0, 0),
        user_id="alice",
        chat_id="c",
        min_score=0.5,
        query_text="Zanzibar invoice 4471",
    )
    assert {h.id for h in hits} == {"close", "far-best"}
    assert next(h for h in hits if h.id == "far-best").score == pytest.approx(0.0, abs=1e-6)


async def test_texts_follow_upserts_and_deletes(store: VectorStore) -> None:
    query, question = unit(1, 0, 0, 0), "Zanzibar"
    await store.upsert(Kind.MEMORY, [point("p", unit(0, 1, 0, 0), text="Zanzibar"), point("q", near(0))])
    hits = await store.search(Kind.MEMORY, query, user_id="alice", limit=2, query_text=question)
    assert [(h.id, h.lexical is not None) for h in hits] == [("p", True), ("q", False)]
    await store.upsert(Kind.MEMORY, [point("p", unit(0, 1, 0, 0), text="nothing of the sort")])
    hits = await store.search(Kind.MEMORY, query, user_id="alice", limit=2, query_text=question)
    assert all(h.lexical is None for h in hits)
    await store.upsert(Kind.MEMORY, [point("r", unit(0, 0, 1, 0), text="Zanzibar")])
    await store.delete(Kind.MEMORY, ["r"], user_id="alice")
    hits = await store.search(Kind.MEMORY, query, user_id="alice", limit=3, query_text=question)
    assert [h.id for h in hits] == ["q", "p"]
    assert all(h.lexical is None for h in hits)


async def test_a_query_without_terms_is_a_dense_search(store: VectorStore) -> None:
    await store.upsert(Kind.MEMORY, [point("a", unit(1, 0, 0, 0), text="Zanzibar"), point("b", near(2))])
    for text in ("", "?!", "a"):
        hits = await store.search(Kind.MEMORY, unit(1, 0, 0, 0), user_id="alice", query_text=text)
        assert [(h.id, h.fused) for h in hits] == [("a", None), ("b", None)]


async def test_a_collection_without_a_lexical_vector_searches_dense_only(open_store: OpenStore) -> None:
    await open_store.dense_only("acme", Kind.MEMORY)
    store = open_store()
    await store.upsert(
        Kind.MEMORY,
        [point("near", unit(1, 0, 0, 0), text="garden"), point("far", unit(0, 1, 0, 0), text="Zanzibar")],
    )
    hits = await store.search(Kind.MEMORY, unit(1, 0, 0, 0), user_id="alice", limit=1, query_text="Zanzibar")
    assert [(h.id, h.lexical, h.fused) for h in hits] == [("near", None, None)]
    records = await store.retrieve(Kind.MEMORY, ["far"], user_id="alice", with_vectors=True)
    assert records[0].vector == pytest.approx((0, 1, 0, 0), abs=1e-6)
    fresh = open_store()  # the other kind is created with the lexical vector
    await fresh.upsert(Kind.EPHEMERAL, [point("e", unit(0, 1, 0, 0), chat_id="c", text="Zanzibar")])
    [hit] = await fresh.search(Kind.EPHEMERAL, unit(1, 0, 0, 0), user_id="alice", query_text="Zanzibar")
    assert hit.lexical is not None


async def test_vectors_of_points_with_text_read_back_dense(store: VectorStore) -> None:
    await store.upsert(Kind.MEMORY, [point("t", unit(0, 0, 1, 0), text="Zanzibar 1987")])
    [record] = await store.retrieve(Kind.MEMORY, ["t"], user_id="alice", with_vectors=True)
    assert record.vector == pytest.approx((0, 0, 1, 0), abs=1e-6)
    page, _ = await store.scroll(Kind.MEMORY, user_id="alice", with_vectors=True)
    assert page[0].vector == pytest.approx((0, 0, 1, 0), abs=1e-6)


async def test_the_fake_and_qdrant_rank_a_hybrid_search_alike(tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "Zanzibar",
        "Melanie",
        "1987",
        "2023-05-08",
        "bakery",
        "river",
        "kids",
        "garden",
    ]
    points = [
        point(
            f"p{i}",
            unit(*(rng.uniform(-1, 1) for _ in range(DIM))),
            user=rng.choice(["alice", "bob"]),
            chat_id=rng.choice(["c1", "c2"]),
            text=" ".join(rng.choices(words, k=rng.randint(0, 6))),
        )
        for i in range(50)
    ]
    client = LocalQdrantClient(tmp_path / "parity")
    stores: list[VectorStore] = [InMemoryVectorStore(dimension=DIM), QdrantVectorStore(client, dimension=DIM)]
    for each in stores:
        await each.upsert(Kind.EPHEMERAL, points)
    for _ in range(20):
        query = unit(*(rng.uniform(-1, 1) for _ in range(DIM)))
        question = " ".join(rng.choices(words, k=3))
        chat = rng.choice([None, "c1"])
        min_score = rng.choice([None, 0.2])
        results = [
            await each.search(
                Kind.EPHEMERAL,
                query,
                user_id="alice",
                chat_id=chat,
                limit=8,
                min_score=min_score,
                query_text=question,
            )
            for each in stores
        ]
        fake, qdrant = ([(h.id, h.score, h.lexical, h.fused) for h in hits] for hits in results)
        assert [row[0] for row in fake] == [row[0] for row in qdrant], question
        for a, b in zip(fake, qdrant, strict=True):
            assert a[1] == pytest.approx(b[1], abs=1e-5)
            assert (a[2] is None) == (b[2] is None)
            if a[2] is not None:
                assert a[2] == pytest.approx(b[2], rel=1e-4)
            assert a[3] == pytest.approx(b[3])
    await client.close()
