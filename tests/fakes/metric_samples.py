"""Reading the process's Prometheus registry in tests."""

from __future__ import annotations

from prometheus_client import REGISTRY

__all__ = ["sample"]


def sample(name: str, **labels: str) -> float:
    """A metric's current value in the process registry (0 when it has no such child yet)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
