"""NetworkPolicies of a tenant: only the hooks Service is reachable from outside. Pure.

Ingress to every tenant pod is allowed from the tenant's own pods; echo-hooks is also open on
:9099 to Open WebUI's pods (`networkPolicy.openwebui`) and to `networkPolicy.hooksFrom` (neither
set: anyone, since Open WebUI may run anywhere); with ServiceMonitors on, the Prometheus namespace
may scrape the metrics ports (:9099 among them). Egress stays open
(the LLM API, PostgreSQL and an external Qdrant or embedding server live outside), except for the
pods of the Open WebUI connect Job (`openwebui.connect`) when Open WebUI's pods are known
(`networkPolicy.openwebui`): those may reach DNS and Open WebUI's pods only, on any port (a Service's
port is translated to its pods' before the policy applies, and the operator knows only the URL).
"""

from __future__ import annotations

from typing import Any

from echo_operator.connections import OpenWebUIPods
from echo_operator.render import openwebui as render_openwebui
from echo_operator.render.tenant import (
    EMBEDDING_PORT,
    HOOKS_PORT,
    QDRANT_HTTP_PORT,
    WORKER_METRICS_PORT,
    Tenant,
)

__all__ = ["render_network"]

Manifest = dict[str, Any]
COMPONENT = "network"
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # set on every namespace by the API server (1.21+)


def _policy(tenant: Tenant, suffix: str, pod_selector: dict[str, str], ingress: list[Manifest]) -> Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": tenant.metadata(tenant.child(suffix), COMPONENT),
        "spec": {
            "podSelector": {"matchLabels": pod_selector},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def _tcp(*ports: int) -> list[Manifest]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _openwebui_peer(pods: OpenWebUIPods) -> Manifest:
    """One peer with both selectors: Open WebUI's pods *and* in its namespace (two peers would be either)."""
    peer: Manifest = {"podSelector": {"matchLabels": dict(pods.pod_labels)}}
    if pods.namespace is not None:
        peer = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: pods.namespace}}, **peer}
    return peer


def _connect_egress(tenant: Tenant, pods: OpenWebUIPods) -> Manifest:
    """The connect Job's pods may reach DNS (any resolver: kube-dns, NodeLocal DNS) and Open WebUI."""
    dns = {"ports": [{"protocol": "UDP", "port": 53}, *_tcp(53)]}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": tenant.metadata(tenant.child(render_openwebui.COMPONENT), COMPONENT),
        "spec": {
            "podSelector": {"matchLabels": tenant.selector(render_openwebui.COMPONENT)},
            "policyTypes": ["Egress"],
            "egress": [dns, {"to": [_openwebui_peer(pods)]}],
        },
    }


def render_network(tenant: Tenant) -> list[Manifest]:
    policy = tenant.spec.network_policy
    if not policy.enabled:
        return []
    own = tenant.tenant_selector()
    hooks_rule: Manifest = {"ports": _tcp(HOOKS_PORT)}
    peers = [peer.model_dump(by_alias=True, exclude_none=True) for peer in policy.hooks_from or ()]
    if policy.openwebui is not None:
        peers.insert(0, _openwebui_peer(policy.openwebui))
    if peers:
        hooks_rule["from"] = peers
    out = [
        _policy(tenant, "tenant", own, [{"from": [{"podSelector": {"matchLabels": own}}]}]),
        _policy(tenant, "hooks-ingress", tenant.selector(tenant.serving_component), [hooks_rule]),
    ]
    monitoring = tenant.spec.monitoring
    if monitoring.service_monitor:
        prometheus = {NAMESPACE_NAME: monitoring.prometheus_namespace}
        scrape = {
            "from": [{"namespaceSelector": {"matchLabels": prometheus}}],
            "ports": _tcp(HOOKS_PORT, WORKER_METRICS_PORT, EMBEDDING_PORT, QDRANT_HTTP_PORT),
        }
        out.append(_policy(tenant, "metrics", own, [scrape]))
    if policy.openwebui is not None and render_openwebui.connect_job(tenant) is not None:
        out.append(_connect_egress(tenant, policy.openwebui))
    return out
