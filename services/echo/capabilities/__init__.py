"""The Open WebUI filters ECHO serves, one module each, behind the `Filter` protocol.

Filters are application services: they take and return plain bodies, never mutate their input,
and reach the outside only through ports handed to them.
"""

from echo.capabilities.base import Filter, HookContext
from echo.capabilities.registry import FilterSet, build_filters

__all__ = ["Filter", "FilterSet", "HookContext", "build_filters"]
