"""``QdrantVectorStore``: the ``VectorStore`` port on a Qdrant server or on local mode.

A server is reached through ``AsyncQdrantClient``; local mode (a path, or ``:memory:``) through
``qdrant_local.LocalQdrantClient``, which runs the synchronous local engine on a thread of its own.

Collections are created on first use (cosine distance, the embedder's dimension) and checked when
they exist: another size raises ``DimensionMismatch`` naming both sizes and the collection. On a
server, keyword payload indexes on ``user_id``, ``chat_id`` and ``source_id`` are created with the
collection (local mode ignores indexes, so it is not asked). Driver errors become
``VectorStoreError`` (``qdrant_errors``): retryable for transport errors, timeouts, 429 and 5xx.

Payloads and filter values are made storable (``echo.domain.text``): a lone surrogate cannot be sent as
JSON at all, and NUL becomes U+FFFD as in PostgreSQL, so both stores keep the same text and a filter
on a chat id that held one matches what was stored.

Hybrid search: a collection is created with a sparse vector ``lexical`` (``Modifier.IDF``) beside the
unnamed dense one; a point's ``text`` is stored there as ``echo.domain.lexical.document_terms``. A
search with ``query_text`` sends the dense and the lexical query in one ``query_batch_points`` (IDF
over the searched scope, ``IdfCorpusParams``: the user's points, so one user's texts never weigh on
another's ranking, and server and local mode agree — the server's global IDF also counts deleted
points until its index is rebuilt), fuses the two lists with ``lexical.select`` and asks the cosine of
the lexical-only candidates with one more dense query restricted to their ids. Qdrant's own
``FusionQuery`` is not used: it returns RRF scores only, while a hit's ``score`` stays its cosine and
``min_score`` needs both ranks. A collection created before the sparse vector existed stays dense
only (logged once per collection and process); recreate it to have hybrid search.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from echo.adapters.vectors import qdrant_errors, qdrant_local
from echo.domain import lexical, text
from echo.ports import vectors as base

__all__ = ["INDEXED_KEYS", "LEXICAL", "QdrantVectorStore", "payload_index"]

INDEXED_KEYS = ("user_id", "chat_id", "source_id")
LEXICAL = "lexical"  # the sparse vector's name; the dense vector stays the unnamed one
log = structlog.get_logger("echo.vectors")


def payload_index(key: str) -> models.KeywordIndexParams:
    """The payload index of ``key``: ``user_id`` is a tenant index (``is_tenant``), so Qdrant groups each
    user's points and one collection serves millions of users without a collection per user."""
    return models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=key == "user_id")


def _filter(scope: dict[str, str], ids: Sequence[str] | None = None) -> models.Filter:
    must: list[Any] = [
        models.FieldCondition(key=k, match=models.MatchValue(value=text.storable(v)))
        for k, v in scope.items()
    ]
    if ids is not None:
        must.append(models.HasIdCondition(has_id=list(ids)))
    return models.Filter(must=must)


def _vector(raw: Any) -> list[float] | None:
    if isinstance(raw, dict):  # a point with a sparse vector comes back with its vectors by name
        raw = raw.get("")
    return raw if isinstance(raw, list) else None


def _sparse(terms: lexical.SparseTerms) -> models.SparseVector:
    return models.SparseVector(indices=list(terms.indices), values=list(terms.values))


class QdrantVectorStore:
    """A ``VectorStore`` of one tenant on a Qdrant client (closed by ``aclose`` only when owned)."""

    def __init__(
        self,
        client: AsyncQdrantClient | qdrant_local.LocalQdrantClient,
        *,
        dimension: int,
        tenant: str = "default",
        owns_client: bool = False,
    ) -> None:
        base.collection_name(tenant, base.Kind.MEMORY)  # validates the tenant slug
        self._client = client
        self._dimension = dimension
        self._tenant = tenant
        self._owns_client = owns_client
        if isinstance(client, qdrant_local.LocalQdrantClient):
            self._local = True
        else:  # an AsyncQdrantClient in local mode works too, but blocks the event loop
            options = client.init_options
            self._local = options.get("path") is not None or options.get("location") == ":memory:"
        self._ready: set[str] = set()
        self._dense_only: set[str] = set()  # collections made before the lexical vector existed
        self._lock = asyncio.Lock()

    @classmethod
    def connect(
        cls,
        *,
        dimension: int,
        tenant: str = "default",
        url: str | None = None,
        path: Path | str | None = None,
        api_key: str | None = None,
        timeout_s: int = 10,
    ) -> QdrantVectorStore:
        """A store on a new client: ``url`` (a server), else ``path`` (local mode; ``:memory:`` too).

        Local storage opens on the store's first operation, off the event loop; a directory that
        another client holds is a ``VectorStoreError`` with ``reason="locked"`` then.
        """
        client: AsyncQdrantClient | qdrant_local.LocalQdrantClient
        if url:
            client = AsyncQdrantClient(url=url, api_key=api_key, timeout=timeout_s, check_compatibility=False)
        else:
            client = qdrant_local.LocalQdrantClient(qdrant_local.MEMORY if path is None else path)
        return cls(client, dimension=dimension, tenant=tenant, owns_client=True)

    @property
    def tenant(self) -> str:
        return self._tenant

    @property
    def dimension(self) -> int:
        return self._dimension

    async def _collection(self, kind: base.Kind) -> str:
        """The collection's name, created or checked on its first use by this store."""
        name = base.collection_name(self._tenant, kind)
        if name not in self._ready:
            async with self._lock:
                if name not in self._ready:
                    await self._ensure(name)
                    self._ready.add(name)
        return name

    async def _ensure(self, name: str) -> None:
        client = self._client
        if not await client.collection_exists(name):
            params = models.VectorParams(size=self._dimension, distance=models.Distance.COSINE)
            sparse = {LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)}
            try:
                await client.create_collection(name, vectors_config=params, sparse_vectors_config=sparse)
            except (UnexpectedResponse, ValueError):
                if not await client.collection_exists(name):  # not a concurrent creation: a real error
                    raise
        info = await client.get_collection(name)
        vectors = info.config.params.vectors
        if not isinstance(vectors, models.VectorParams):
            raise base.VectorStoreError(
                f"collection {name!r} uses named vectors; ECHO writes one unnamed vector"
            )
        if vectors.size != self._dimension:
            raise base.DimensionMismatch(name, expected=self._dimension, actual=vectors.size)
        if vectors.distance != models.Distance.COSINE:
            raise base.VectorStoreError(
                f"collection {name!r} uses {vectors.distance} distance, ECHO needs Cosine"
            )
        if LEXICAL not in (info.config.params.sparse_vectors or {}):
            self._dense_only.add(name)
            log.warning(
                "vectors_dense_only",
                collection=name,
                effect="no lexical vector: texts are not stored and hybrid searches are dense only",
                fix="recreate the collection (re-embed its points) to have hybrid search",
            )
        if not self._local:
            for key in INDEXED_KEYS:
                if key not in (info.payload_schema or {}):
                    await client.create_payload_index(name, key, payload_index(key), wait=True)

    async def _existing(self, kind: base.Kind) -> str | None:
        """The collection's name if it exists (deletes never create one, nor check its size)."""
        name = base.collection_name(self._tenant, kind)
        return name if name in self._ready or await self._client.collection_exists(name) else None

    def _check(self, name: str, vector: Sequence[float], what: str) -> None:
        if len(vector) != self._dimension:
            raise base.DimensionMismatch(name, expected=self._dimension, actual=len(vector), what=what)

    async def upsert(self, kind: base.Kind, points: Sequence[base.Point]) -> None:
        async with qdrant_errors.translated("upsert"):
            name = await self._collection(kind)
            structs = []
            for point in points:
                self._check(name, point.vector, f"the vector of point {point.id!r}")
                structs.append(
                    models.PointStruct(
                        id=base.point_uuid(point.id),
                        vector=self._vectors_of(name, point),
                        payload=text.storable_value(point.stored_payload()),
                    )
                )
            if structs:
                await self._client.upsert(name, points=structs, wait=True)

    def _vectors_of(self, name: str, point: base.Point) -> models.VectorStruct:
        terms = lexical.document_terms(point.text) if point.text else None
        if not terms or name in self._dense_only:
            return list(point.vector)
        return {"": list(point.vector), LEXICAL: _sparse(terms)}

    async def search(
        self,
        kind: base.Kind,
        vector: Sequence[float],
        *,
        user_id: str,
        limit: int = 10,
        chat_id: str | None = None,
        source_id: str | None = None,
        min_score: float | None = None,
        query_text: str | None = None,
    ) -> list[base.Hit]:
        scope = base.scope_of(user_id, chat_id, source_id)
        async with qdrant_errors.translated("search"):
            name = await self._collection(kind)
            self._check(name, vector, "the query vector")
            terms = lexical.query_terms(query_text) if query_text else None
            if terms and name not in self._dense_only and limit > 0:
                return await self._hybrid(name, list(vector), terms, scope, limit, min_score)
            response = await self._client.query_points(
                name,
                query=list(vector),
                query_filter=_filter(scope),
                limit=limit,
                score_threshold=min_score,
                with_payload=True,
            )
        return [base.Hit.from_stored(p.payload or {}, score=p.score) for p in response.points]

    async def _hybrid(
        self,
        name: str,
        vector: list[float],
        terms: lexical.SparseTerms,
        scope: dict[str, str],
        limit: int,
        min_score: float | None,
    ) -> list[base.Hit]:
        depth = lexical.candidate_depth(limit)
        where = _filter(scope)
        dense, sparse = await self._client.query_batch_points(
            name,
            requests=[
                models.QueryRequest(
                    query=vector, filter=where, limit=depth, score_threshold=min_score, with_payload=True
                ),
                models.QueryRequest(
                    query=_sparse(terms),
                    using=LEXICAL,
                    filter=where,
                    limit=depth,
                    with_payload=True,
                    params=models.SearchParams(idf=models.IdfCorpusParams(corpus=where)),
                ),
            ],
        )
        found = {str(p.id): p for p in [*sparse.points, *dense.points]}
        cosine = {str(p.id): p.score for p in dense.points}
        missing = [qid for qid in (str(p.id) for p in sparse.points) if qid not in cosine]
        if missing:  # lexical-only candidates: their cosine, from a dense query on their ids
            rescored = await self._client.query_points(
                name, query=vector, query_filter=_filter(scope, missing), limit=len(missing)
            )
            cosine.update({str(p.id): p.score for p in rescored.points})
        chosen = lexical.select(
            [(str(p.id), p.score) for p in dense.points],
            [(str(p.id), p.score) for p in sparse.points],
            cosine,
            limit=limit,
            min_score=min_score,
        )
        return [
            base.Hit.from_stored(
                found[c.id].payload or {}, score=cosine[c.id], lexical=c.lexical, fused=c.fused
            )
            for c in chosen
        ]

    async def scroll(
        self,
        kind: base.Kind,
        *,
        user_id: str,
        chat_id: str | None = None,
        source_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[base.Record], str | None]:
        scope = base.scope_of(user_id, chat_id, source_id)
        async with qdrant_errors.translated("scroll"):
            name = await self._collection(kind)
            points, next_offset = await self._client.scroll(
                name,
                scroll_filter=_filter(scope),
                limit=limit,
                offset=cursor,
                with_payload=True,
                with_vectors=with_vectors,
            )
        records = [base.Record.from_stored(p.payload or {}, _vector(p.vector)) for p in points]
        return records, (str(next_offset) if next_offset is not None else None)

    async def retrieve(
        self, kind: base.Kind, ids: Sequence[str], *, user_id: str, with_vectors: bool = False
    ) -> list[base.Record]:
        base.require_user(user_id)
        async with qdrant_errors.translated("retrieve"):
            name = await self._collection(kind)
            points = await self._client.retrieve(
                name, ids=[base.point_uuid(i) for i in ids], with_payload=True, with_vectors=with_vectors
            )
        owner = text.storable(user_id)  # as stored
        owned = [p for p in points if (p.payload or {}).get("user_id") == owner]
        return [base.Record.from_stored(p.payload or {}, _vector(p.vector)) for p in owned]

    async def count(
        self, kind: base.Kind, *, user_id: str, chat_id: str | None = None, source_id: str | None = None
    ) -> int:
        scope = base.scope_of(user_id, chat_id, source_id)
        async with qdrant_errors.translated("count"):
            name = await self._collection(kind)
            result = await self._client.count(name, count_filter=_filter(scope), exact=True)
        return result.count

    async def _delete(self, kind: base.Kind, selector: models.Filter) -> None:
        async with qdrant_errors.translated("delete"):
            name = await self._existing(kind)
            if name is not None:
                await self._client.delete(
                    name, points_selector=models.FilterSelector(filter=selector), wait=True
                )

    async def delete(self, kind: base.Kind, ids: Sequence[str], *, user_id: str) -> None:
        scope = base.scope_of(user_id, None, None)
        if ids:
            await self._delete(kind, _filter(scope, [base.point_uuid(i) for i in ids]))

    async def delete_where(
        self, kind: base.Kind, *, user_id: str, chat_id: str | None = None, source_id: str | None = None
    ) -> None:
        await self._delete(kind, _filter(base.scope_of(user_id, chat_id, source_id)))

    async def delete_user(self, user_id: str) -> None:
        for kind in base.Kind:
            await self.delete_where(kind, user_id=user_id)

    async def check(self) -> None:
        async with qdrant_errors.translated("check"):
            await self._client.get_collections()

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()
