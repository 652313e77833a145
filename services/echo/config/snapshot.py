"""Build one validated configuration snapshot from plain mappings, pure.

Sources, lowest precedence first: the seeds' defaults, valves saved through
`POST /{id}/valves/update` (embedded mode), the mounted valves file; a mounted model-thresholds
file is merged over `echo_compression.model_thresholds` entry by entry. A mapping valve may come
as JSON text (Open WebUI's valves editor sends it so): it is parsed before anything is merged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from echo.config import valves as valves_module
from echo.errors import ConfigError

__all__ = [
    "ConfigSnapshot",
    "build_snapshot",
    "describe_validation_error",
    "parse_mapping_valves",
    "validate_valves",
]

THRESHOLDS_FIELD = "echo_compression.model_thresholds"


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


def parse_mapping_valves(
    filter_id: str, data: Mapping[str, Any], *, source: str | None = None
) -> dict[str, Any]:
    """`data` with each mapping valve given as JSON text parsed; a ConfigError names the valve."""
    parsed = dict(data)
    model = valves_module.FILTER_VALVES.get(filter_id)
    for name in valves_module.mapping_valve_names(model) if model is not None else ():
        value = parsed.get(name)
        if isinstance(value, str):
            try:
                parsed[name] = valves_module.parse_json_text(value)
            except json.JSONDecodeError as error:
                raise ConfigError(
                    f"not valid JSON text ({error})", field=f"{filter_id}.{name}", source=source
                ) from error
    return parsed


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
        return model.model_validate(parse_mapping_valves(filter_id, data, source=source))
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
        data = parse_mapping_valves(filter_id, data, source=source)
        if filter_id == "echo_compression" and model_thresholds:
            data["model_thresholds"] = _merged_thresholds(
                data.get("model_thresholds"), model_thresholds, source
            )
        built[filter_id] = validate_valves(filter_id, data, source=source)
    return ConfigSnapshot(valves=built)


def _merged_thresholds(base: object, overrides: Mapping[str, Any], source: str | None) -> dict[str, Any]:
    """The valve's table (or the default one) with the thresholds file's entries over it."""
    if base is None:
        defaults = valves_module.CompressionValves.model_fields["model_thresholds"].get_default(
            call_default_factory=True
        )
        base = {key: value.model_dump() for key, value in defaults.items()}
    if not isinstance(base, Mapping):
        raise ConfigError(
            f"must be a mapping of model id to thresholds (or its JSON text), got {type(base).__name__}",
            field=THRESHOLDS_FIELD,
            source=source,
        )
    return {**base, **overrides}
