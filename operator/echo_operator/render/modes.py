"""Which parts of an EchoDeployment spec each mode uses. Pure.

A standalone tenant is one pod (`echoctl serve` in embedded mode), so what shapes the distributed
workloads (the hooks' replicas, autoscaling, PodDisruptionBudget, image and resources; the
distillers; the embedding Deployment; the managed Qdrant; their images) does not apply to it, nor
`spec.standalone` to a distributed tenant. Such fields are ignored, not refused, so a tenant can
switch modes by changing `spec.mode` alone; since the API server fills in every default, only a
field that differs from its default is named (`ignored`), in the Ready condition's message and in a
warning Event. What would put a standalone tenant's data elsewhere (`database`,
`qdrant.externalUrl`, `embedding.externalUrl`) is refused instead (`spec.STANDALONE_KEEPS_ITS_DATA`).
"""

from __future__ import annotations

from collections.abc import Mapping

from echo_operator import spec as spec_module

__all__ = ["DISTRIBUTED_ONLY", "STANDALONE_ONLY", "ignored"]

Fields = tuple[str, ...] | None
DISTRIBUTED_ONLY: Mapping[str, Fields] = {
    "hooks": ("replicas", "image", "resources", "autoscaling", "pod_disruption_budget"),
    "distiller": None,
    "embedding": None,
    "qdrant": None,
    "images": ("echo", "embedding", "qdrant"),
}
"""Spec section -> its fields that only the distributed mode uses (None: the whole section)."""
STANDALONE_ONLY: Mapping[str, Fields] = {"standalone": None, "images": ("standalone",)}
"""The same for the standalone mode."""


def ignored(spec: spec_module.EchoDeploymentSpec) -> tuple[str, ...]:
    """The fields (`spec.<camelCase path>`) set to something else than their default that the
    tenant's mode does not use."""
    sections = DISTRIBUTED_ONLY if spec.mode == "standalone" else STANDALONE_ONLY
    out = []
    for section, fields in sections.items():
        info = spec_module.EchoDeploymentSpec.model_fields[section]
        value, default = getattr(spec, section), info.get_default(call_default_factory=True)
        if fields is None:
            if value != default:
                out.append(f"spec.{info.alias}")
            continue
        for field in fields:
            if getattr(value, field) != getattr(default, field):
                out.append(f"spec.{info.alias}.{type(value).model_fields[field].alias}")
    return tuple(out)
