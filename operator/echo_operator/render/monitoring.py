"""Monitoring children: ServiceMonitors and Grafana dashboard ConfigMaps, only when asked. Pure.

Each ServiceMonitor adds the label `tenant=<name>` (`tenant.METRICS_TENANT_LABEL`) to the scraped
series, beside the `namespace` Prometheus adds: the distiller's autoscaler (KEDA's query, or the
prometheus-adapter rule of the HPA fallback) selects `echo_jobs_pending` by the two. The handlers
drop ServiceMonitors when the Prometheus Operator CRD is absent. Dashboards are the JSON files the
operator loaded at startup (the chart's dashboards/), each given a tenant-specific uid and title so
tenants never overwrite each other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from echo_operator.render.tenant import METRICS_TENANT_LABEL, Tenant

__all__ = ["render_monitoring"]

Manifest = dict[str, Any]


def _service_monitor(tenant: Tenant, component: str, port: str) -> Manifest:
    monitoring = tenant.spec.monitoring
    metadata = tenant.metadata(tenant.child(component), component)
    metadata["labels"] = {**(monitoring.labels or {}), **metadata["labels"]}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": tenant.selector(component)},
            "namespaceSelector": {"matchNames": [tenant.namespace]},
            "endpoints": [
                {
                    "port": port,
                    "path": "/metrics",
                    "interval": monitoring.interval,
                    "relabelings": [
                        {"action": "replace", "targetLabel": METRICS_TENANT_LABEL, "replacement": tenant.name}
                    ],
                }
            ],
        },
    }


def _dashboard(tenant: Tenant, file_name: str, text: str) -> str:
    board = json.loads(text)
    stem = file_name.rsplit(".", 1)[0]
    board["uid"] = f"{tenant.name}-{stem}"[:40]
    board["title"] = f"{board.get('title') or stem} ({tenant.namespace}/{tenant.name})"
    return json.dumps(board, indent=1, sort_keys=True)


def _dashboards(tenant: Tenant, dashboards: Mapping[str, str]) -> Manifest:
    metadata = tenant.metadata(tenant.child("dashboards"), "monitoring")
    metadata["labels"] = {**metadata["labels"], "grafana_dashboard": "1"}
    metadata["annotations"] = {"grafana_folder": "ECHO"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {name: _dashboard(tenant, name, text) for name, text in sorted(dashboards.items())},
    }


def render_monitoring(tenant: Tenant, dashboards: Mapping[str, str]) -> list[Manifest]:
    spec = tenant.spec
    out: list[Manifest] = []
    if spec.monitoring.service_monitor:
        # the standalone pod serves every metric (its in-process worker's too) behind the hooks Service
        out.append(_service_monitor(tenant, "hooks", "http"))
    if spec.monitoring.service_monitor and not tenant.standalone:
        out.append(_service_monitor(tenant, "distiller", "metrics"))
        if not spec.embedding.external_url:
            out.append(_service_monitor(tenant, "embedding", "http"))
        if spec.qdrant.managed is not None:
            out.append(_service_monitor(tenant, "qdrant", "http"))
    if spec.monitoring.dashboards:
        out.append(_dashboards(tenant, dashboards))
    return out
