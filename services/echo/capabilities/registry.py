"""Which filters and pipe models one hook service serves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from echo.capabilities import base
from echo.capabilities.compression import filter as compression
from echo.capabilities.context import filter as context
from echo.capabilities.masking import filter as masking_filter
from echo.capabilities.memory import filter as memory
from echo.capabilities.shadow import filter as pipe

__all__ = ["FilterSet", "build_filters"]


@dataclass(frozen=True)
class FilterSet:
    """Filters by id (ordered by priority) and pipe hooks by pipe id."""

    filters: Mapping[str, base.Filter]
    pipes: Mapping[str, pipe.PipeFilter]

    def get(self, hook_id: str) -> base.Filter | None:
        return self.filters.get(hook_id) or self.pipes.get(hook_id)


def build_filters(
    pipe_models: Iterable[str],
    on_masked: masking_filter.OnMasked,
    *,
    backends: base.BackendsProvider = base.no_backends,
) -> FilterSet:
    """The filters and pipe hooks. `backends` gives the running service's backends
    (`echo.ports.backends`), asked on every call: the store (None without one), the embedder and
    vectors (None until warmed up) and Open WebUI's API (None unless configured)."""
    filters: list[base.Filter] = [
        context.ContextFilter(on_masked, backends=backends),
        compression.CompressionFilter(backends),
        memory.MemoryFilter(backends),
    ]
    pipes = [pipe.PipeFilter(model, on_masked) for model in pipe_models]
    return FilterSet(
        filters={f.id: f for f in sorted(filters, key=lambda f: f.priority)},
        pipes={p.id: p for p in pipes},
    )
