"""Build one validated configuration snapshot from plain mappings, pure.

Sources, lowest precedence first: the seeds' defaults, valves saved through
`POST /{id}/valves/update` (embedded mode), the mounted valves file; a mounted model-thresholds
file is merged over `echo_compression.model_thresholds` entry by entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from echo.config import valves as valves_module
from echo.errors import ConfigError

__all__ = ["ConfigSnapshot", "build_snapshot", "describe_validation_error", "validate_valves"]


@dataclass(frozen=True)
class ConfigSnapshot:
    """The valves of every filter, all validated together."""

    valves: Mapping[str, valves_module.Valves]

    def of(self, filter_id: str) -> valves_module.Valves:
        return self.valves[filter_id]


def describe_validation_error(error: ValidationError, prefix: str = "") -> str:
    """One line per problem, each naming the dotted field path."""
    lines = []
    for item in error.errors(include_url=False):
        path = ".".join(str(part) for part in (prefix, *item["loc"]) if part != "")
        message = str(item["msg"]).removeprefix("Value error, ")
        lines.append(f"{path or prefix or 'value'}: {message}")
    return "; ".join(lines)


def validate_valves(
    filter_id: str, data: Mapping[str, Any], *, source: str | None = None
) -> valves_module.Valves:
    """Validate one filter's valves; a ConfigError names the field and the rule."""
    model = valves_module.FILTER_VALVES.get(filter_id)
    if model is None:
        known = ", ".join(sorted(valves_module.FILTER_VALVES))
        raise ConfigError(f"unknown filter id (known: {known})", field=filter_id, source=source)
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"valves must be a mapping, got {type(data).__name__}", field=filter_id, source=source
        )
    try:
        return model.model_validate(dict(data))
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, filter_id), source=source) from error


def build_snapshot(
    *,
    file_valves: Mapping[str, Any] | None = None,
    saved_valves: Mapping[str, Any] | None = None,
    model_thresholds: Mapping[str, Any] | None = None,
    source: str | None = None,
) -> ConfigSnapshot:
    """Merge the sources and validate every filter; raise ConfigError on the first bad filter."""
    file_valves = file_valves or {}
    saved_valves = saved_valves or {}
    for filter_id in file_valves:
        if filter_id not in valves_module.FILTER_VALVES:
            known = ", ".join(sorted(valves_module.FILTER_VALVES))
            raise ConfigError(f"unknown filter id (known: {known})", field=filter_id, source=source)
    built: dict[str, valves_module.Valves] = {}
    for filter_id in valves_module.FILTER_VALVES:
        data: Any = file_valves.get(filter_id, saved_valves.get(filter_id, {}))
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"valves must be a mapping, got {type(data).__name__}", field=filter_id, source=source
            )
        data = dict(data)
        if filter_id == "echo_compression" and model_thresholds:
            base = data.get("model_thresholds")
            if base is None:
                base = valves_module.CompressionValves.model_fields["model_thresholds"].get_default(
                    call_default_factory=True
                )
                base = {key: value.model_dump() for key, value in base.items()}
            data["model_thresholds"] = {**base, **model_thresholds}
        built[filter_id] = validate_valves(filter_id, data, source=source)
    return ConfigSnapshot(valves=built)
