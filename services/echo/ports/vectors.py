"""The ``VectorStore`` port: its values, its errors, tenant collection names (pure, no I/O)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, Self, runtime_checkable

from echo.domain import text
from echo.errors import EchoError

__all__ = [
    "RESERVED_KEYS",
    "DimensionMismatch",
    "Hit",
    "Kind",
    "Point",
    "Record",
    "VectorStore",
    "VectorStoreError",
    "collection_name",
    "point_uuid",
]

# Keys the store writes into every payload itself; a point's own payload may not use them.
RESERVED_KEYS = frozenset({"user_id", "chat_id", "source_id", "_id"})
_TENANT = re.compile(r"^[a-z0-9][a-z0-9._-]{0,199}$")
_NAMESPACE = uuid.UUID("5f0c6b0e-8f1e-4d5c-9a53-4543484f0001")  # uuid5 namespace of ECHO point ids


class Kind(StrEnum):
    """The two collections of a tenant: long-term memories and per-chat (file, session) chunks."""

    MEMORY = "echo_memory"
    EPHEMERAL = "echo_ephemeral"


def collection_name(tenant: str, kind: Kind) -> str:
    """``<tenant>__echo_memory``: one collection per tenant and kind, so tenants never share one."""
    if not _TENANT.match(tenant):
        raise ValueError(f"tenant {tenant!r} must match {_TENANT.pattern}")
    return f"{tenant}__{Kind(kind).value}"


def point_uuid(point_id: str) -> str:
    """The Qdrant id of an ECHO id: the id itself when it is a UUID, else a stable uuid5 of it (lone
    surrogates replaced first: such an id has no UTF-8 to hash; every other id hashes as it always did)."""
    try:
        return str(uuid.UUID(point_id))
    except ValueError:
        return str(uuid.uuid5(_NAMESPACE, text.encodable(point_id)))


class VectorStoreError(EchoError):
    """A vector-store operation failed; ``retryable`` (the root's attribute) when the same call may
    succeed later."""

    def __init__(self, message: str, *, retryable: bool = False, reason: str = "error") -> None:
        super().__init__(message, retryable=retryable)
        self.reason = reason


class DimensionMismatch(VectorStoreError):
    """A collection and the embedder (or a vector) disagree on the dimension. Permanent."""

    def __init__(self, collection: str, *, expected: int, actual: int, what: str | None = None) -> None:
        self.collection, self.expected, self.actual = collection, expected, actual
        if what is None:
            message = (
                f"collection {collection!r} holds {actual}-d vectors but the embedder gives {expected}-d"
                " vectors: the embedding model changed; re-embed into a new collection (another tenant"
                " slug) or drop this one"
            )
        else:
            message = (
                f"{what} has {actual} dimensions but collection {collection!r} holds {expected}-d vectors"
            )
        super().__init__(message, reason="dimension")


def require_user(user_id: str) -> str:
    """Every read and delete is scoped to one user; an empty user is a programming error."""
    if not isinstance(user_id, str) or not user_id:
        raise ValueError("user_id must be a non-empty string: every vector operation is scoped to a user")
    return user_id


@dataclass(frozen=True, kw_only=True)
class Point:
    """What to store: a vector, its owner, the chat/source it belongs to, and a JSON payload.

    ``text``, when given, is the point's lexical content: stored as its sparse vector of terms
    (``echo.domain.lexical``), searched by ``VectorStore.search(query_text=…)``, not kept as text.
    """

    id: str
    vector: Sequence[float]
    user_id: str
    chat_id: str | None = None
    source_id: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    text: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a point needs a non-empty id")
        require_user(self.user_id)
        clash = RESERVED_KEYS & set(self.payload)
        if clash:
            raise ValueError(f"payload keys {sorted(clash)} are reserved: pass them as Point fields")

    def stored_payload(self) -> dict[str, Any]:
        """The payload as stored: the point's own keys plus the reserved ones."""
        scope = {"user_id": self.user_id, "chat_id": self.chat_id, "source_id": self.source_id}
        return {**self.payload, "_id": self.id, **{k: v for k, v in scope.items() if v is not None}}


@dataclass(frozen=True, kw_only=True)
class Record:
    """A stored point as read back; ``vector`` only when asked for (normalised by cosine storage)."""

    id: str
    user_id: str
    chat_id: str | None = None
    source_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    vector: tuple[float, ...] | None = None

    @classmethod
    def from_stored(
        cls, stored: Mapping[str, Any], vector: Sequence[float] | None = None, **extra: Any
    ) -> Self:
        own = {k: v for k, v in stored.items() if k not in RESERVED_KEYS}
        return cls(
            id=str(stored["_id"]),
            user_id=str(stored["user_id"]),
            chat_id=stored.get("chat_id"),
            source_id=stored.get("source_id"),
            payload=own,
            vector=tuple(vector) if vector is not None else None,
            **extra,
        )


@dataclass(frozen=True, kw_only=True)
class Hit(Record):
    """A search result: a record and its cosine similarity to the query (higher is closer).

    ``score`` is the dense cosine similarity in every search, hybrid or not. A hybrid search
    (``query_text``) also says ``lexical``, the point's IDF-weighted term score when the lexical side
    ranked it (None when it shares no term with the query or ranked below the candidates), and
    ``fused``, its reciprocal-rank-fusion score, by which the hits are ordered.
    """

    score: float
    lexical: float | None = None
    fused: float | None = None


def scope_of(user_id: str, chat_id: str | None, source_id: str | None) -> dict[str, str]:
    """The payload equalities an operation is restricted to (always the user)."""
    scope = {"user_id": require_user(user_id)}
    if chat_id is not None:
        scope["chat_id"] = chat_id
    if source_id is not None:
        scope["source_id"] = source_id
    return scope


@runtime_checkable
class VectorStore(Protocol):
    """Vectors of one tenant, in two collections (``Kind``); every read filters on ``user_id``.

    Collections are created on first use with ``dimension`` and cosine distance, and a sparse vector
    for the points' ``text`` (IDF-weighted); a collection that exists with another size raises
    ``DimensionMismatch``; one created before the sparse vector existed keeps working dense only (its
    ``text`` is not stored, a hybrid search there is a dense search). Deletes never create a collection.
    """

    @property
    def tenant(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def upsert(self, kind: Kind, points: Sequence[Point]) -> None:
        """Insert or replace points by id."""
        ...

    async def search(
        self,
        kind: Kind,
        vector: Sequence[float],
        *,
        user_id: str,
        limit: int = 10,
        chat_id: str | None = None,
        source_id: str | None = None,
        min_score: float | None = None,
        query_text: str | None = None,
    ) -> list[Hit]:
        """The user's nearest points, best first.

        With ``query_text`` (and a collection that has a lexical vector), a hybrid search: the
        ``candidate_depth(limit)`` nearest points and the as many best lexical matches (IDF over the
        searched scope: the user's points of that chat/source) are fused by RRF
        (``echo.domain.lexical.fuse``). ``min_score`` bounds the dense ``score`` of every hit but one:
        the lexical side's best match is kept whatever its cosine, since an exact name or number is
        what dense similarity misses. Without terms in ``query_text`` the search is dense only.
        """
        ...

    async def scroll(
        self,
        kind: Kind,
        *,
        user_id: str,
        chat_id: str | None = None,
        source_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        with_vectors: bool = False,
    ) -> tuple[list[Record], str | None]:
        """One page of the user's points and the cursor of the next page (None at the end)."""
        ...

    async def retrieve(
        self, kind: Kind, ids: Sequence[str], *, user_id: str, with_vectors: bool = False
    ) -> list[Record]:
        """The user's points among ``ids`` (other users' points are not returned)."""
        ...

    async def count(
        self, kind: Kind, *, user_id: str, chat_id: str | None = None, source_id: str | None = None
    ) -> int:
        """How many points of the user (in that chat/source) the collection holds."""
        ...

    async def delete(self, kind: Kind, ids: Sequence[str], *, user_id: str) -> None:
        """Delete the user's points among ``ids``; another user's point with such an id stays."""
        ...

    async def delete_where(
        self, kind: Kind, *, user_id: str, chat_id: str | None = None, source_id: str | None = None
    ) -> None:
        """Delete the user's points of a chat and/or a source (all of the user's ``kind`` if neither)."""
        ...

    async def delete_user(self, user_id: str) -> None:
        """Forget a user: delete their points in every collection of the tenant."""
        ...

    async def check(self) -> None:
        """Raise ``VectorStoreError`` unless the store answers (readiness)."""
        ...

    async def aclose(self) -> None:
        """Release the client (when the store owns it)."""
        ...
