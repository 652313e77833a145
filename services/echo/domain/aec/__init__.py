"""The AEC block (seed 000, filter 1: `<environnement_contexte>`), the pure domain.

Pure, no I/O (import-linter's pure-domain contract): the standard library, PyYAML's emitter and the
project's valves only. The context filter reads the store and Open WebUI's request; this package
turns what they gave into the model's proprioception for the turn.

- ``entries``: the values the block lists (files, plans, code entries) and the plan statuses.
- ``environment``: who, when and where, from Open WebUI's ``user`` and ``metadata.variables``, with
  the valves' defaults (an unknown time zone falls back, never raises).
- ``rendering``: the YAML block exactly in the seed's layout, every value quoted so that no
  filename, goal or commit message can break the YAML or close the fence.
"""

from echo.domain.aec.entries import PLAN_STATUSES, CodexEntry, FileEntry, PlanEntry, count_lines
from echo.domain.aec.environment import AecDefaults, AecEnvironment, environment_from_request, resolve_zone
from echo.domain.aec.rendering import (
    BLOCK_CLOSE,
    BLOCK_OPEN,
    MODEL_ID_PLACEHOLDER,
    MODEL_ORIGIN_PLACEHOLDER,
    quoted,
    render_block,
)

__all__ = [
    "BLOCK_CLOSE",
    "BLOCK_OPEN",
    "MODEL_ID_PLACEHOLDER",
    "MODEL_ORIGIN_PLACEHOLDER",
    "PLAN_STATUSES",
    "AecDefaults",
    "AecEnvironment",
    "CodexEntry",
    "FileEntry",
    "PlanEntry",
    "count_lines",
    "environment_from_request",
    "quoted",
    "render_block",
    "resolve_zone",
]
