"""NetworkPolicies of a tenant: only the hooks Service is reachable from outside. Pure.

Ingress to every tenant pod is allowed from the tenant's own pods; echo-hooks is also open on
:9099 to `networkPolicy.hooksFrom` (default: anyone, since Open WebUI may run anywhere); with
ServiceMonitors on, the Prometheus namespace may scrape the metrics ports. Egress stays open
(the LLM API, PostgreSQL and an external Qdrant or embedding server live outside).
"""

from __future__ import annotations

from typing import Any

from echo_operator.tenant import (
    EMBEDDING_PORT,
    HOOKS_PORT,
    QDRANT_HTTP_PORT,
    WORKER_METRICS_PORT,
    Tenant,
)

__all__ = ["render_network"]

Manifest = dict[str, Any]
COMPONENT = "network"


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


def render_network(tenant: Tenant) -> list[Manifest]:
    policy = tenant.spec.network_policy
    if not policy.enabled:
        return []
    own = tenant.tenant_selector()
    hooks_rule: Manifest = {"ports": _tcp(HOOKS_PORT)}
    if policy.hooks_from:
        hooks_rule["from"] = [peer.model_dump(by_alias=True, exclude_none=True) for peer in policy.hooks_from]
    out = [
        _policy(tenant, "tenant", own, [{"from": [{"podSelector": {"matchLabels": own}}]}]),
        _policy(tenant, "hooks-ingress", tenant.selector("hooks"), [hooks_rule]),
    ]
    monitoring = tenant.spec.monitoring
    if monitoring.service_monitor:
        prometheus = {"kubernetes.io/metadata.name": monitoring.prometheus_namespace}
        scrape = {
            "from": [{"namespaceSelector": {"matchLabels": prometheus}}],
            "ports": _tcp(HOOKS_PORT, WORKER_METRICS_PORT, EMBEDDING_PORT, QDRANT_HTTP_PORT),
        }
        out.append(_policy(tenant, "metrics", own, [scrape]))
    return out
