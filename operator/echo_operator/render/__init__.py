"""`render(name, namespace, spec) -> manifests`: everything one EchoDeployment wants. Pure.

No I/O, no clock, no randomness: the same input gives the same list, in a stable order
(config first, so pods find their ConfigMaps). The handlers add ownerReferences (kopf.adopt),
apply the list with server-side apply and prune labelled children that are not in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from echo_operator import spec as spec_module
from echo_operator.render import config as render_config
from echo_operator.render import distiller as render_distiller
from echo_operator.render import embedding as render_embedding
from echo_operator.render import hooks as render_hooks
from echo_operator.render import monitoring as render_monitoring
from echo_operator.render import network as render_network
from echo_operator.render import openwebui as render_openwebui
from echo_operator.render import qdrant as render_qdrant
from echo_operator.render import standalone as render_standalone
from echo_operator.render.tenant import Tenant

__all__ = ["InvalidSpec", "Manifest", "identity", "render", "render_tenant"]

Manifest = dict[str, Any]
InvalidSpec = spec_module.InvalidSpec


def render_tenant(tenant: Tenant, *, dashboards: Mapping[str, str] | None = None) -> list[Manifest]:
    """The children of a parsed tenant: its workloads by mode, then what guards and watches them."""
    if tenant.standalone:
        workloads = render_standalone.render_standalone(tenant)
    else:
        workloads = [
            *render_qdrant.render_qdrant(tenant),
            *render_embedding.render_embedding(tenant),
            *render_hooks.render_hooks(tenant),
            *render_distiller.render_distiller(tenant),
        ]
    return [
        *render_config.render_config(tenant),
        *workloads,
        *render_openwebui.render_openwebui(tenant),
        *render_network.render_network(tenant),
        *render_monitoring.render_monitoring(tenant, dashboards or {}),
    ]


def render(
    name: str, namespace: str, spec: Mapping[str, Any], *, dashboards: Mapping[str, str] | None = None
) -> list[Manifest]:
    """The child manifests of EchoDeployment `namespace/name`; InvalidSpec names what is wrong.

    `dashboards` maps a file name to Grafana dashboard JSON (loaded by the operator at startup);
    it is used only when `spec.monitoring.dashboards` is on.
    """
    tenant = Tenant(name=name, namespace=namespace, spec=spec_module.parse_spec(name, spec))
    return render_tenant(tenant, dashboards=dashboards)


def identity(manifest: Mapping[str, Any]) -> tuple[str, str, str]:
    """(apiVersion, kind, name): how children are told apart when pruning."""
    return manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"]
