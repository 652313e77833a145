"""``LocalEmbedder``: sentence-transformers on a model directory, in this process (embedded mode).

The model is loaded lazily, in a worker thread, on the first ``probe``/``embed``; a process loads each
directory once (of the last 4 used) and every ``LocalEmbedder`` on it shares that model. Encoding runs in
``asyncio.to_thread`` one batch at a time, so a query waits behind at most one batch of a long job.
Hub access is off (``HF_HUB_OFFLINE``, ``local_files_only``): only a directory on disk is loaded.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cachetools

from echo.ports import embeddings as base
from echo.support import metrics

__all__ = ["LocalEmbedder"]

# The models loaded, by (directory, device): a process runs the one its settings name; 4 leave room
# for a device change (or tests) without keeping stray weights (90 MB for MiniLM, GBs for larger ones).
# An embedder keeps its model when it leaves the cache. Loaded on worker threads: behind the lock.
_MODELS: cachetools.LRUCache[tuple[str, str], Any] = cachetools.LRUCache(maxsize=4)
_MODELS_LOCK = threading.Lock()


def _load_model(path: Path, device: str) -> Any:
    """The SentenceTransformer of ``path`` on ``device``, loaded once per process."""
    key = (str(path), device)
    with _MODELS_LOCK:
        found = _MODELS.get(key)
        if found is not None:
            return found
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
            raise base.EmbeddingError(f"no sentence-transformers model in directory {path}", reason="load")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise base.EmbeddingError(
                "sentence-transformers is not installed: install the `local` extra", reason="load"
            ) from exc
        try:
            model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as exc:
            raise base.EmbeddingError(f"cannot load the model in {path}: {exc}", reason="load") from exc
        _MODELS[key] = model
        return model


def _model_dimension(model: Any) -> int:
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        method = getattr(model, name, None)
        size = method() if callable(method) else None
        if isinstance(size, int) and size > 0:
            return size
    return len(model.encode(["dimension"], convert_to_numpy=True)[0])


class LocalEmbedder:
    """An ``Embedder`` on a local sentence-transformers model directory."""

    backend = "local"

    def __init__(
        self,
        model_path: Path | str,
        *,
        model_name: str | None = None,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        self.model_path = Path(model_path)
        self._model_name = model_name or self.model_path.name
        self._batch_size = batch_size
        self._device = device
        self._model: Any = None
        self._dimension: int | None = None
        self._lock = asyncio.Lock()

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            raise base.unknown_dimension(self._model_name)
        return self._dimension

    async def probe(self) -> int:
        await self._loaded()
        return self.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return []
        model = await self._loaded()
        vectors: list[list[float]] = []
        for batch in base.batched(texts, self._batch_size):
            started = time.perf_counter()
            try:
                array = await asyncio.to_thread(
                    model.encode,
                    batch,
                    batch_size=len(batch),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            except Exception as exc:
                metrics.EMBEDDING_ERRORS.labels(self.backend, "encode").inc()
                raise base.EmbeddingError(
                    f"{self._model_name} failed to encode: {exc}", reason="encode"
                ) from exc
            metrics.EMBEDDING_LATENCY.labels(self.backend, self._model_name).observe(
                time.perf_counter() - started
            )
            metrics.EMBEDDING_TEXTS.labels(self.backend, self._model_name).inc(len(batch))
            vectors.extend(base.l2_normalise(row) for row in array.tolist())
        return vectors

    async def aclose(self) -> None:
        self._model = None  # the process-wide cache keeps the weights for the next embedder

    async def _loaded(self) -> Any:
        if self._model is not None:
            return self._model
        async with self._lock:
            if self._model is None:
                try:
                    model = await asyncio.to_thread(_load_model, self.model_path, self._device)
                    self._dimension = await asyncio.to_thread(_model_dimension, model)
                except base.EmbeddingError as exc:
                    metrics.EMBEDDING_ERRORS.labels(self.backend, exc.reason).inc()
                    raise
                self._model = model
        return self._model
