"""The Open WebUI filters ECHO serves, one module each, behind the `Filter` protocol.

Filters are application services: they take and return plain bodies, never mutate their input,
and reach the outside only through ports handed to them: one `echo.ports.backends.Backends` (the
store's repositories and job queue, the embedder and vectors, Open WebUI's API), asked for on every
call (`base.BackendsProvider`); `backends.on_store` gives it over PostgreSQL.
"""

from echo.capabilities.base import Filter, HookContext
from echo.capabilities.registry import FilterSet, build_filters

__all__ = ["Filter", "FilterSet", "HookContext", "build_filters"]
