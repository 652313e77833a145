"""Vectors behind one port, ``VectorStore``: Qdrant (a server, or local mode) and an in-memory fake.

Rules of the package: a store serves one tenant, whose collections (``<tenant>__echo_memory``,
``<tenant>__echo_ephemeral``) no other tenant uses; every point carries its ``user_id`` and every
read and delete is filtered on it; a collection is created on first use with the embedder's
dimension and cosine distance, and a size mismatch is a ``DimensionMismatch``, never a silent
failure; driver errors surface as ``VectorStoreError`` saying whether a retry may help.
"""

from __future__ import annotations

from echo.adapters.vectors.factory import vector_store_from_settings
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.adapters.vectors.qdrant import QdrantVectorStore
from echo.ports.vectors import (
    DimensionMismatch,
    Hit,
    Kind,
    Point,
    Record,
    VectorStore,
    VectorStoreError,
    collection_name,
    point_uuid,
)

__all__ = [
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
]
