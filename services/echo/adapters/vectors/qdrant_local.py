"""``LocalQdrantClient``: Qdrant local mode (a path, or ``:memory:``) kept off the event loop.

qdrant-client's local mode is synchronous Python, also under ``AsyncQdrantClient``: opening a path
loads every stored point, and a search is a brute-force scan, seconds on a large collection. Here the
sync ``QdrantClient`` lives on one dedicated thread: it is built there on first use and every call
runs there, one at a time (local mode is not thread-safe, its SQLite connection belongs to the thread
that opened it, and one path allows one client). The methods are the subset of ``AsyncQdrantClient``
that ``QdrantVectorStore`` calls, with the same names and arguments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from qdrant_client import QdrantClient, models

from echo.ports import vectors as base

__all__ = ["LocalQdrantClient"]

_T = TypeVar("_T")
MEMORY = ":memory:"


class LocalQdrantClient:
    """Async calls on a sync local-mode client that only its own thread touches."""

    def __init__(self, location: Path | str = MEMORY) -> None:
        self._location = str(location)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qdrant-local")
        self._client: QdrantClient | None = None  # touched on the executor's thread only
        self._closed = False

    @property
    def location(self) -> str:
        """The storage directory, or ``:memory:``."""
        return self._location

    def _open(self) -> QdrantClient:
        if self._client is None:
            if self._location == MEMORY:
                self._client = QdrantClient(location=MEMORY)
            else:
                try:
                    Path(self._location).mkdir(parents=True, exist_ok=True)
                    self._client = QdrantClient(path=self._location)
                except RuntimeError as exc:  # the directory is locked by another client
                    raise base.VectorStoreError(
                        f"cannot open Qdrant storage {self._location}: {exc}", reason="locked"
                    ) from exc
                except OSError as exc:  # not a directory, not writable (a read-only root file system)
                    raise base.VectorStoreError(
                        f"cannot open Qdrant storage {self._location}: {exc!r}", reason="storage"
                    ) from exc
        return self._client

    async def _run(self, call: Callable[[QdrantClient], _T]) -> _T:
        if self._closed:
            raise base.VectorStoreError(f"the Qdrant storage {self._location} is closed", reason="closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: call(self._open()))

    async def collection_exists(self, *args: Any, **kwargs: Any) -> bool:
        return await self._run(lambda client: client.collection_exists(*args, **kwargs))

    async def create_collection(self, *args: Any, **kwargs: Any) -> bool:
        return await self._run(lambda client: client.create_collection(*args, **kwargs))

    async def get_collection(self, *args: Any, **kwargs: Any) -> models.CollectionInfo:
        return await self._run(lambda client: client.get_collection(*args, **kwargs))

    async def get_collections(self) -> models.CollectionsResponse:
        return await self._run(lambda client: client.get_collections())

    async def create_payload_index(self, *args: Any, **kwargs: Any) -> models.UpdateResult:
        return await self._run(lambda client: client.create_payload_index(*args, **kwargs))

    async def upsert(self, *args: Any, **kwargs: Any) -> models.UpdateResult:
        return await self._run(lambda client: client.upsert(*args, **kwargs))

    async def query_points(self, *args: Any, **kwargs: Any) -> models.QueryResponse:
        return await self._run(lambda client: client.query_points(*args, **kwargs))

    async def query_batch_points(self, *args: Any, **kwargs: Any) -> list[models.QueryResponse]:
        return await self._run(lambda client: client.query_batch_points(*args, **kwargs))

    async def scroll(
        self, *args: Any, **kwargs: Any
    ) -> tuple[list[models.Record], models.ExtendedPointId | None]:
        return await self._run(lambda client: client.scroll(*args, **kwargs))

    async def retrieve(self, *args: Any, **kwargs: Any) -> list[models.Record]:
        return await self._run(lambda client: client.retrieve(*args, **kwargs))

    async def count(self, *args: Any, **kwargs: Any) -> models.CountResult:
        return await self._run(lambda client: client.count(*args, **kwargs))

    async def delete(self, *args: Any, **kwargs: Any) -> models.UpdateResult:
        return await self._run(lambda client: client.delete(*args, **kwargs))

    def _close_on_thread(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    async def close(self) -> None:
        """Close the client (releasing the directory's lock) and stop the thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_on_thread)
        finally:
            self._executor.shutdown(wait=False)
