"""``vector_store_from_settings``: a Qdrant server when ``ECHO_QDRANT_URL`` is set, else local mode."""

from __future__ import annotations

from echo.adapters.vectors import qdrant
from echo.config.settings import Settings

__all__ = ["vector_store_from_settings"]


def vector_store_from_settings(settings: Settings, *, dimension: int) -> qdrant.QdrantVectorStore:
    """The tenant's store; ``dimension`` comes from the embedder (``await embedder.probe()``)."""
    if settings.qdrant_url:
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return qdrant.QdrantVectorStore.connect(
            dimension=dimension,
            tenant=settings.tenant,
            url=settings.qdrant_url,
            api_key=api_key,
            timeout_s=settings.qdrant_timeout_seconds,
        )
    path = settings.qdrant_path or settings.data_dir / "qdrant"
    return qdrant.QdrantVectorStore.connect(dimension=dimension, tenant=settings.tenant, path=path)
