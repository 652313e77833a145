"""How the Qdrant adapter turns driver errors into ``VectorStoreError`` and times each operation.

A server's 408/429/5xx, transport errors and timeouts are retryable (``reason="unavailable"``);
another status, and local mode's ``ValueError`` on bad input, are permanent (``"rejected"``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import httpx
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from echo.ports import vectors as base
from echo.support import metrics

__all__ = ["translated"]


@contextlib.asynccontextmanager
async def translated(operation: str) -> AsyncIterator[None]:
    """Run one store operation: count its failures, time its successes, raise only domain errors."""
    started = time.perf_counter()
    try:
        yield
    except base.VectorStoreError as exc:
        metrics.VECTOR_ERRORS.labels(operation, exc.reason).inc()
        raise
    except UnexpectedResponse as exc:
        status = exc.status_code
        retryable = status is None or status in (408, 429) or status >= 500
        reason = "unavailable" if retryable else "rejected"
        metrics.VECTOR_ERRORS.labels(operation, reason).inc()
        detail = exc.content[:200].decode(errors="replace")
        raise base.VectorStoreError(
            f"Qdrant {operation} failed with {status} {exc.reason_phrase}: {detail}",
            retryable=retryable,
            reason=reason,
        ) from exc
    except (ResponseHandlingException, httpx.HTTPError, OSError, TimeoutError) as exc:
        metrics.VECTOR_ERRORS.labels(operation, "unavailable").inc()
        raise base.VectorStoreError(
            f"Qdrant {operation} failed, server unreachable: {exc!r}",
            retryable=True,
            reason="unavailable",
        ) from exc
    except ValueError as exc:  # local mode rejects bad input with ValueError
        metrics.VECTOR_ERRORS.labels(operation, "rejected").inc()
        raise base.VectorStoreError(f"Qdrant {operation} rejected: {exc}", reason="rejected") from exc
    metrics.VECTOR_LATENCY.labels(operation).observe(time.perf_counter() - started)
