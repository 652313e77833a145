"""Small shared shapes of the EchoDeployment spec: references, quantities, scheduling, rules. Pure.

Every model refuses unknown fields and takes camelCase keys (the Kubernetes spelling). A rule that
spans fields is declared once as a `Rule`: its CEL text goes into the CRD
(`x-kubernetes-validations`), and the same check runs in Python in a model validator, so a spec the
API server would refuse is refused here too with the same message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

__all__ = [
    "AdminKeySecretRef",
    "ConfigMapKeyRef",
    "LabelSelector",
    "NetworkPeer",
    "Quantity",
    "Resources",
    "Rule",
    "SecretKeyRef",
    "Section",
    "Toleration",
    "check",
    "section_config",
]

DNS_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
HTTP_URL = r"^https?://[^\s]+$"


class Rule(NamedTuple):
    """A rule spanning fields: CEL for the API server, the message for both sides."""

    cel: str
    message: str


def section_config(*rules: Rule, **extra: Any) -> ConfigDict:
    """The model config of a spec section, with its CEL rules for the CRD."""
    schema_extra: dict[str, Any] = dict(extra)
    if rules:
        schema_extra["x-kubernetes-validations"] = [{"rule": r.cel, "message": r.message} for r in rules]
    return ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        protected_namespaces=(),
        json_schema_extra=schema_extra or None,
    )


def check(condition: bool, rule: Rule) -> None:
    """The Python side of a CEL rule: raise its message when the condition does not hold."""
    if not condition:
        raise ValueError(rule.message)


class Section(BaseModel):
    """Base of every spec section."""

    model_config = section_config()


Quantity = Annotated[
    int | str,
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}),
]
"""A Kubernetes quantity: `500m`, `1Gi`, or a plain number."""


class SecretKeyRef(Section):
    """One key of a Secret in the EchoDeployment's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_NAME, description="Secret name.")
    key: str = Field("api-key", min_length=1, max_length=253, description="Key in the Secret.")


class DsnSecretRef(SecretKeyRef):
    """The Secret key holding a `postgresql://…` DSN."""

    key: str = Field("dsn", min_length=1, max_length=253, description="Key in the Secret.")


class AdminKeySecretRef(SecretKeyRef):
    """The Secret key holding the admin key of the memory-management API."""

    key: str = Field("admin-key", min_length=1, max_length=253, description="Key in the Secret.")


class ConfigMapKeyRef(Section):
    """One key of a ConfigMap in the EchoDeployment's namespace (mounted, so updates hot-reload)."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_NAME, description="ConfigMap name.")
    key: str = Field(min_length=1, max_length=253, description="Key in the ConfigMap (YAML or JSON).")


class Resources(Section):
    """Container resources; empty = the component's defaults."""

    requests: dict[str, Quantity] | None = Field(None, description="e.g. {cpu: 100m, memory: 256Mi}.")
    limits: dict[str, Quantity] | None = Field(None, description="e.g. {memory: 1Gi}.")


class Toleration(Section):
    """A pod toleration (core/v1 Toleration)."""

    key: str | None = Field(None, description="Taint key; empty with Exists matches every taint.")
    operator: Literal["Exists", "Equal"] = Field("Equal", description="Exists or Equal.")
    value: str | None = Field(None, description="Taint value (Equal).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="Taint effect; empty matches every effect."
    )
    toleration_seconds: int | None = Field(None, ge=0, description="NoExecute only: seconds tolerated.")


class LabelSelector(Section):
    """A label selector by exact labels."""

    match_labels: dict[str, str] = Field(default_factory=dict, description="Labels that must all match.")


class IpBlock(Section):
    """A CIDR, minus some sub-ranges."""

    cidr: str = Field(min_length=1, description="e.g. 10.0.0.0/8.")
    except_: list[str] | None = Field(None, alias="except", description="Sub-ranges excluded.")


class NetworkPeer(Section):
    """Who may connect (networking/v1 NetworkPolicyPeer)."""

    namespace_selector: LabelSelector | None = Field(None, description="Namespaces by label.")
    pod_selector: LabelSelector | None = Field(None, description="Pods by label.")
    ip_block: IpBlock | None = Field(None, description="Addresses by CIDR.")
