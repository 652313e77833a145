"""Configuration: `ECHO_*` settings, the filters' valves, model thresholds, hot reload.

`settings`, `valves`, `thresholds` and `snapshot` are pure; `live` reads the mounted files.
"""

from echo.config.live import ConfigStatus, LiveConfig, ValvesManagedByFile
from echo.config.settings import Settings
from echo.config.snapshot import ConfigSnapshot, build_snapshot
from echo.config.thresholds import DEFAULT_MODEL_THRESHOLDS, ModelThreshold, lookup_threshold
from echo.config.valves import (
    FILTER_VALVES,
    CompressionValves,
    ContextValves,
    MemoryValves,
    Valves,
    effective_summary_window,
)

__all__ = [
    "DEFAULT_MODEL_THRESHOLDS",
    "FILTER_VALVES",
    "CompressionValves",
    "ConfigSnapshot",
    "ConfigStatus",
    "ContextValves",
    "LiveConfig",
    "MemoryValves",
    "ModelThreshold",
    "Settings",
    "Valves",
    "ValvesManagedByFile",
    "build_snapshot",
    "effective_summary_window",
    "lookup_threshold",
]
