"""The EchoDeployment spec and status as a whole, and `parse_spec`. Pure.

Inline valves and model thresholds are checked exactly as the services check a mounted file
(`echo.config.snapshot.build_snapshot`), so a spec the operator accepts never ships a ConfigMap
that the hooks would refuse at load time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

from echo.config import snapshot, valves
from echo.errors import ConfigError
from echo_operator import connections, models, shapes
from echo_operator.shapes import Rule, Section

__all__ = [
    "NAME_RULE",
    "EchoDeploymentSpec",
    "EchoDeploymentStatus",
    "InvalidSpec",
    "Mode",
    "ModelThresholdsSource",
    "ValvesSource",
    "parse_spec",
]

NAME_RULE = Rule(
    "self.metadata.name.size() <= 40 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
    "metadata.name must be a DNS-1035 label of at most 40 characters (it names the tenant and its children)",
)
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
Mode = Literal["distributed", "standalone"]
ONE_VALVES_SOURCE = Rule(
    "!(has(self.inline) && has(self.configMapRef))", "set at most one of inline and configMapRef"
)
DATABASE_IN_DISTRIBUTED = Rule(
    "self.mode == 'standalone' || has(self.database)",
    "database is required in mode distributed (the default): the Secret of the services' PostgreSQL DSN",
)
STANDALONE_KEEPS_ITS_DATA = Rule(
    "self.mode != 'standalone' || "
    "(!has(self.database) && !has(self.qdrant.externalUrl) && !has(self.embedding.externalUrl))",
    "a standalone tenant keeps its data in its own pod (embedded PostgreSQL, Qdrant local mode, the "
    "packaged embedder): remove database, qdrant.externalUrl and embedding.externalUrl, or use mode "
    "distributed",
)


def _default(field: str) -> Any:
    return valves.CompressionValves.model_fields[field].default


def _valve(field: str) -> str:
    """A compression valve in CEL: its value when set, else the services' default."""
    return f"(has(self.{field}) ? self.{field} : {_default(field)})"


def _summary_budget_rule() -> Rule:
    """Seed 002's 80% rule where CEL can see it: `max_summary_tokens < 0.8 × window`."""
    share = valves.SUMMARY_OUTPUT_SHARE
    summary, window = _valve("max_summary_tokens"), _valve("summary_model_max_context")
    named_model = "(has(self.summary_model) && self.summary_model != '')"
    cel = (
        f"{window} > 0 ? double{summary} < {share} * double{window} : "
        f"({named_model} || double{summary} < {share} * double{_valve('max_context_tokens')})"
    )
    message = "max_summary_tokens must be strictly below 80% of the effective summary input window"
    return Rule(cel, f"echo_compression: {message}")


SUMMARY_BUDGET = _summary_budget_rule()
THRESHOLD_BELOW_CEILING = Rule(
    f"{_valve('compression_threshold_tokens')} <= {_valve('max_context_tokens')}",
    "echo_compression: compression_threshold_tokens must not exceed max_context_tokens",
)
ENTRY_BELOW_CEILING = Rule(
    "self.compression_threshold_tokens <= self.max_context_tokens",
    "compression_threshold_tokens must not exceed max_context_tokens",
)


def _valves_schema() -> dict[str, Any]:
    filters: dict[str, Any] = {
        filter_id: {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        for filter_id in valves.FILTER_VALVES
    }
    typed = {name: {"type": "integer"} for name in ("max_summary_tokens", "summary_model_max_context")}
    typed |= {name: {"type": "integer"} for name in ("max_context_tokens", "compression_threshold_tokens")}
    filters["echo_compression"] |= {
        "properties": typed | {"summary_model": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": r.cel, "message": r.message} for r in (SUMMARY_BUDGET, THRESHOLD_BELOW_CEILING)
        ],
    }
    return {
        "type": "object",
        "description": "Filter id -> valves, the seeds' spelling (the valves file format).",
        "properties": filters,
    }


def _thresholds_schema() -> dict[str, Any]:
    entry = {
        "type": "object",
        "required": ["compression_threshold_tokens", "max_context_tokens"],
        "properties": {
            "compression_threshold_tokens": {"type": "integer", "minimum": 1},
            "max_context_tokens": {"type": "integer", "minimum": 1},
        },
        "x-kubernetes-validations": [
            {"rule": ENTRY_BELOW_CEILING.cel, "message": ENTRY_BELOW_CEILING.message}
        ],
    }
    return {
        "type": "object",
        "description": "Model id -> thresholds (tokens).",
        "additionalProperties": entry,
    }


InlineValves = Annotated[dict[str, dict[str, Any]], WithJsonSchema(_valves_schema())]
InlineThresholds = Annotated[dict[str, dict[str, int]], WithJsonSchema(_thresholds_schema())]


class ValvesSource(Section):
    """The valves file of the tenant: inline (the operator writes a ConfigMap) or a ConfigMap of yours."""

    model_config = shapes.section_config(ONE_VALVES_SOURCE)

    inline: InlineValves | None = Field(None, description="Valves, e.g. {echo_memory: {WINDOW_SIZE: 6}}.")
    config_map_ref: shapes.ConfigMapKeyRef | None = Field(None, description="A ConfigMap key instead.")

    @model_validator(mode="after")
    def _rules(self) -> ValvesSource:
        shapes.check(self.inline is None or self.config_map_ref is None, ONE_VALVES_SOURCE)
        return self


class ModelThresholdsSource(Section):
    """Per-model thresholds merged over echo_compression.model_thresholds: inline or a ConfigMap."""

    model_config = shapes.section_config(ONE_VALVES_SOURCE)

    inline: InlineThresholds | None = Field(
        None, description="e.g. {my-model: {compression_threshold_tokens: 50000, max_context_tokens: 64000}}."
    )
    config_map_ref: shapes.ConfigMapKeyRef | None = Field(None, description="A ConfigMap key instead.")

    @model_validator(mode="after")
    def _rules(self) -> ModelThresholdsSource:
        shapes.check(self.inline is None or self.config_map_ref is None, ONE_VALVES_SOURCE)
        return self


class EchoDeploymentSpec(Section):
    """One tenant of ECHO: what the operator deploys and how."""

    model_config = shapes.section_config(DATABASE_IN_DISTRIBUTED, STANDALONE_KEEPS_ITS_DATA)

    mode: Mode = Field(
        "distributed",
        description="distributed: hooks, distillers, embedding and Qdrant as separate workloads on an "
        "external PostgreSQL; standalone: one pod running `echoctl serve` in embedded mode (PostgreSQL, "
        "Qdrant local mode, the packaged MiniLM embedder, the in-process worker) with its data on a "
        "PersistentVolume. Switching moves no data.",
    )
    standalone: models.Standalone = Field(
        default_factory=models.Standalone,
        json_schema_extra={"default": {}},
        description="The standalone pod (mode standalone only).",
    )
    images: models.Images = Field(default_factory=models.Images, json_schema_extra={"default": {}})
    hooks: models.Hooks = Field(default_factory=models.Hooks, json_schema_extra={"default": {}})
    distiller: models.Distiller = Field(default_factory=models.Distiller, json_schema_extra={"default": {}})
    embedding: models.Embedding = Field(default_factory=models.Embedding, json_schema_extra={"default": {}})
    qdrant: models.Qdrant = Field(
        default_factory=lambda: models.Qdrant(managed=models.ManagedQdrant()),
        json_schema_extra={"default": {"managed": {}}},
    )
    database: connections.Database | None = Field(
        None, description="The services' PostgreSQL (mode distributed: required; standalone: not allowed)."
    )
    llm: connections.Llm
    valves: ValvesSource = Field(default_factory=ValvesSource, json_schema_extra={"default": {}})
    model_thresholds: ModelThresholdsSource = Field(
        default_factory=ModelThresholdsSource, json_schema_extra={"default": {}}
    )
    openwebui: connections.OpenWebUI | None = Field(
        None, description="Open WebUI: its files API, and ECHO installed in it (connect)."
    )
    monitoring: connections.Monitoring = Field(
        default_factory=connections.Monitoring, json_schema_extra={"default": {}}
    )
    network_policy: connections.NetworkPolicy = Field(
        default_factory=connections.NetworkPolicy, json_schema_extra={"default": {}}
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Services' log level."
    )

    @model_validator(mode="after")
    def _modes(self) -> EchoDeploymentSpec:
        standalone = self.mode == "standalone"
        shapes.check(standalone or self.database is not None, DATABASE_IN_DISTRIBUTED)
        external = self.qdrant.external_url or self.embedding.external_url
        shapes.check(not standalone or (self.database is None and not external), STANDALONE_KEEPS_ITS_DATA)
        return self

    @model_validator(mode="after")
    def _valves_load(self) -> EchoDeploymentSpec:
        """The services' own check of a valves file (the 80% summary budget rule included)."""
        if self.valves.inline is None and self.model_thresholds.inline is None:
            return self
        try:
            snapshot.build_snapshot(
                file_valves=self.valves.inline, model_thresholds=self.model_thresholds.inline, source="inline"
            )
        except ConfigError as error:
            raise ValueError(f"valves: {error}") from error
        return self


class Condition(BaseModel):
    """A status condition (metav1.Condition)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = Field(None, json_schema_extra={"format": "date-time"})
    observed_generation: int | None = None


class EchoDeploymentStatus(BaseModel):
    """What the operator observed; kopf keeps its own state in annotations, not here."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    observed_generation: int | None = None
    hooks_endpoint: str | None = Field(None, description="URL Open WebUI connects to (in-cluster).")
    conditions: list[Condition] | None = Field(
        None, json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )


class InvalidSpec(ValueError):
    """The spec cannot be deployed; permanent until the spec changes. The message names each field."""


def parse_spec(name: str, spec: Mapping[str, Any]) -> EchoDeploymentSpec:
    """The validated spec of EchoDeployment `name`, or InvalidSpec naming every problem."""
    problems = []
    if not (len(name) <= 40 and _NAME.match(name)):
        problems.append(NAME_RULE.message)
    try:
        parsed = EchoDeploymentSpec.model_validate(dict(spec))
    except ValidationError as error:
        for item in error.errors(include_url=False):
            where = ".".join(str(part) for part in ("spec", *item["loc"]))
            problems.append(f"{where}: {str(item['msg']).removeprefix('Value error, ')}")
    else:
        problems += _admin_key_problems(name, parsed)
    if problems:
        raise InvalidSpec("; ".join(problems))
    return parsed


def _admin_key_problems(name: str, parsed: EchoDeploymentSpec) -> list[str]:
    """The admin key may not be the Secret key the operator generates for Open WebUI (CEL cannot see
    the generated name)."""
    hooks = parsed.hooks
    admin = hooks.admin_key_secret_ref
    if admin is None or hooks.api_key_secret_ref is not None:
        return []
    if (admin.name, admin.key) != (f"{name}-api-key", "api-key"):
        return []
    return [
        f"spec.hooks.adminKeySecretRef: must differ from the generated Secret key {name}-api-key/api-key, "
        "the key Open WebUI holds"
    ]
