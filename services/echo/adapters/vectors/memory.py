"""``InMemoryVectorStore``: the fake of the ``VectorStore`` port for domain tests (pure, no I/O).

It keeps Qdrant's observable behaviour: one collection per tenant and kind in a shared ``space``
(pass the same dict to several stores to play one server), created on first use, a dimension
mismatch on an existing collection, vectors normalised on write, cosine scores, cursor pagination,
and hybrid search as ``QdrantVectorStore`` runs it: a point's ``text`` as its sparse terms, IDF over
the searched scope's points that have terms, the same candidate depth and fusion
(``echo.domain.lexical``). A collection made with ``lexical=False`` plays one created before the
sparse vector existed: texts are not kept and hybrid searches are dense only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from echo.domain import lexical
from echo.ports import vectors as base

__all__ = ["InMemoryCollection", "InMemoryVectorStore"]


@dataclass
class InMemoryCollection:
    """One collection: its size, its points by Qdrant id (vector, stored payload), the sparse terms
    of those that have a text, and whether it has the lexical vector at all."""

    dimension: int
    points: dict[str, tuple[tuple[float, ...], dict[str, Any]]] = field(default_factory=dict)
    terms: dict[str, lexical.SparseTerms] = field(default_factory=dict)
    lexical: bool = True


def _normalised(vector: Sequence[float]) -> tuple[float, ...]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return tuple(x / norm for x in vector) if norm else tuple(float(x) for x in vector)


class InMemoryVectorStore:
    """A ``VectorStore`` in a dict. Set ``failure`` to make every operation raise it."""

    def __init__(
        self, *, dimension: int, tenant: str = "default", space: dict[str, InMemoryCollection] | None = None
    ) -> None:
        base.collection_name(tenant, base.Kind.MEMORY)  # validates the tenant slug
        self._dimension = dimension
        self._tenant = tenant
        self.space: dict[str, InMemoryCollection] = {} if space is None else space
        self.failure: base.VectorStoreError | None = None

    @property
    def tenant(self) -> str:
        return self._tenant

    @property
    def dimension(self) -> int:
        return self._dimension

    def _collection(self, kind: base.Kind, *, create: bool = True) -> tuple[str, InMemoryCollection | None]:
        if self.failure is not None:
            raise self.failure
        name = base.collection_name(self._tenant, kind)
        collection = self.space.get(name)
        if collection is None and create:
            collection = self.space[name] = InMemoryCollection(self._dimension)
        if create and collection is not None and collection.dimension != self._dimension:
            raise base.DimensionMismatch(name, expected=self._dimension, actual=collection.dimension)
        return name, collection

    def _check(self, name: str, vector: Sequence[float], what: str) -> None:
        if len(vector) != self._dimension:
            raise base.DimensionMismatch(name, expected=self._dimension, actual=len(vector), what=what)

    async def upsert(self, kind: base.Kind, points: Sequence[base.Point]) -> None:
        name, collection = self._collection(kind)
        assert collection is not None
        for point in points:
            self._check(name, point.vector, f"the vector of point {point.id!r}")
        for point in points:
            qid = base.point_uuid(point.id)
            collection.points[qid] = (_normalised(point.vector), point.stored_payload())
            terms = lexical.document_terms(point.text) if point.text and collection.lexical else None
            if terms:
                collection.terms[qid] = terms
            else:
                collection.terms.pop(qid, None)

    def _matching(
        self, collection: InMemoryCollection | None, scope: dict[str, str]
    ) -> list[tuple[str, tuple[float, ...], dict[str, Any]]]:
        if collection is None:
            return []
        return [
            (qid, vector, payload)
            for qid, (vector, payload) in sorted(collection.points.items())
            if all(payload.get(key) == value for key, value in scope.items())
        ]

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
        name, collection = self._collection(kind)
        assert collection is not None
        self._check(name, vector, "the query vector")
        query = _normalised(vector)
        matching = self._matching(collection, scope)
        cosine = {qid: math.fsum(a * b for a, b in zip(query, v, strict=True)) for qid, v, _ in matching}
        payloads = {qid: payload for qid, _, payload in matching}
        dense = sorted(
            (qid for qid in cosine if min_score is None or cosine[qid] >= min_score),
            key=lambda qid: (-cosine[qid], qid),
        )
        terms = lexical.query_terms(query_text) if query_text else None
        if not terms or not collection.lexical or limit <= 0:
            return [base.Hit.from_stored(payloads[qid], score=cosine[qid]) for qid in dense[:limit]]
        depth = lexical.candidate_depth(limit)
        ranked = self._lexical(collection, terms, list(payloads))[:depth]
        chosen = lexical.select(
            [(qid, cosine[qid]) for qid in dense[:depth]], ranked, cosine, limit=limit, min_score=min_score
        )
        return [
            base.Hit.from_stored(payloads[c.id], score=cosine[c.id], lexical=c.lexical, fused=c.fused)
            for c in chosen
        ]

    @staticmethod
    def _lexical(
        collection: InMemoryCollection, query: lexical.SparseTerms, scope: list[str]
    ) -> list[tuple[str, float]]:
        """Lexical matches among ``scope``, best first, IDF over those of its points that have terms."""
        corpus = [collection.terms[qid] for qid in scope if qid in collection.terms]
        frequency = {i: sum(i in doc.indices for doc in corpus) for i in query.indices}
        weights = {i: lexical.idf(n, len(corpus)) for i, n in frequency.items()}
        scored = [
            (qid, found)
            for qid in scope
            if qid in collection.terms
            and (found := lexical.score(query, collection.terms[qid], weights)) is not None
        ]
        return sorted(scored, key=lambda pair: (-pair[1], pair[0]))

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
        _, collection = self._collection(kind)
        rows = [row for row in self._matching(collection, scope) if cursor is None or row[0] >= cursor]
        page, rest = rows[:limit], rows[limit:]
        records = [base.Record.from_stored(p, v if with_vectors else None) for _, v, p in page]
        return records, (rest[0][0] if rest else None)

    async def retrieve(
        self, kind: base.Kind, ids: Sequence[str], *, user_id: str, with_vectors: bool = False
    ) -> list[base.Record]:
        base.require_user(user_id)
        _, collection = self._collection(kind)
        assert collection is not None
        found = [collection.points.get(base.point_uuid(point_id)) for point_id in ids]
        return [
            base.Record.from_stored(payload, vector if with_vectors else None)
            for vector, payload in filter(None, found)
            if payload["user_id"] == user_id
        ]

    async def count(
        self, kind: base.Kind, *, user_id: str, chat_id: str | None = None, source_id: str | None = None
    ) -> int:
        scope = base.scope_of(user_id, chat_id, source_id)
        _, collection = self._collection(kind)
        return len(self._matching(collection, scope))

    async def delete(self, kind: base.Kind, ids: Sequence[str], *, user_id: str) -> None:
        scope = base.scope_of(user_id, None, None)
        _, collection = self._collection(kind, create=False)
        wanted = {base.point_uuid(point_id) for point_id in ids}
        for qid, _, _ in self._matching(collection, scope):
            if qid in wanted and collection is not None:
                del collection.points[qid]
                collection.terms.pop(qid, None)

    async def delete_where(
        self, kind: base.Kind, *, user_id: str, chat_id: str | None = None, source_id: str | None = None
    ) -> None:
        scope = base.scope_of(user_id, chat_id, source_id)
        _, collection = self._collection(kind, create=False)
        for qid, _, _ in self._matching(collection, scope):
            assert collection is not None
            del collection.points[qid]
            collection.terms.pop(qid, None)

    async def delete_user(self, user_id: str) -> None:
        for kind in base.Kind:
            await self.delete_where(kind, user_id=user_id)

    async def check(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def aclose(self) -> None:
        return None
