"""Prometheus metrics of the operator, on their own registry (served by `serve`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import kopf
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, start_http_server

from echo_operator import apply
from echo_operator.kube import ApiError

__all__ = ["ERRORS", "PRUNED", "RECONCILES", "RECONCILE_SECONDS", "REGISTRY", "observe", "serve"]

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)

RECONCILES = Counter(
    "echo_operator_reconciles_total",
    "Handler runs by handler (reconcile|delete|status) and result (success|error).",
    ["handler", "result"],
    registry=REGISTRY,
)
ERRORS = Counter(
    "echo_operator_errors_total",
    "Failed handler runs by handler and kind (invalid_spec|rejected|api|other); kopf retries api and other.",
    ["handler", "kind"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "echo_operator_reconcile_seconds",
    "Duration of one handler run (s) by handler.",
    ["handler"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
    registry=REGISTRY,
)
PRUNED = Counter(
    "echo_operator_children_pruned_total",
    "Children deleted because the spec no longer wants them, by kind.",
    ["kind"],
    registry=REGISTRY,
)


def _kind(error: BaseException) -> str:
    if isinstance(error, kopf.PermanentError):
        return "rejected" if isinstance(error.__cause__, apply.ChildRejected) else "invalid_spec"
    if isinstance(error, ApiError):
        return "api"
    return "other"


@contextlib.contextmanager
def observe(handler: str) -> Iterator[None]:
    """Count and time one handler run; errors are counted by kind and re-raised."""
    started = time.perf_counter()
    try:
        yield
    except Exception as error:
        RECONCILES.labels(handler, "error").inc()
        ERRORS.labels(handler, _kind(error)).inc()
        raise
    else:
        RECONCILES.labels(handler, "success").inc()
    finally:
        RECONCILE_SECONDS.labels(handler).observe(time.perf_counter() - started)


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve /metrics on `port` in a background thread."""
    start_http_server(port, addr=address, registry=REGISTRY)
