"""echo-distiller children: the worker Deployment and its autoscaler on queue depth. Pure.

Scaling signal: `echo_jobs_pending{kind}`. Every worker reports the same tenant-wide count per
kind, so a tenant's pending jobs are the sum over kinds of the max over pods; a sum over pods would
count the queue once per replica and scale without end. The series carry `namespace` and
`tenant=<name>` (the tenant's ServiceMonitors add it: `spec.monitoring.serviceMonitor`).

Default: a KEDA ScaledObject whose Prometheus trigger runs `pending_jobs_query`. Fallback
(`distiller.keda: false`): an HPA on the External metric `echo_jobs_pending`, which prometheus-adapter
serves only with the external rule the chart ships (value `prometheusAdapterRules`), whose
metricsQuery is `ADAPTER_METRICS_QUERY`: the same query, so both scale alike.
"""

from __future__ import annotations

from typing import Any

from echo_operator.render import pods
from echo_operator.render.tenant import METRICS_TENANT_LABEL, WORKER_METRICS_PORT, Tenant

__all__ = ["ADAPTER_METRICS_QUERY", "METRIC", "pending_jobs_query", "render_distiller"]

Manifest = dict[str, Any]
COMPONENT = "distiller"
METRIC = "echo_jobs_pending"
DEFAULT_RESOURCES = {"requests": {"cpu": "100m", "memory": "384Mi"}, "limits": {"memory": "1Gi"}}
_TENANT_TOTAL = (
    f"sum by (namespace, {METRICS_TENANT_LABEL}) "
    f"(max by (namespace, {METRICS_TENANT_LABEL}, kind) ({{series}}))"
)
ADAPTER_METRICS_QUERY = _TENANT_TOTAL.format(series="<<.Series>>{<<.LabelMatchers>>}")
"""prometheus-adapter's metricsQuery for `echo_jobs_pending` (the chart's external rule)."""
# Replicas go down at most once per 5 minutes of lower demand: no flapping on a bursty queue.
SCALE_DOWN_SLOWLY = {"scaleDown": {"stabilizationWindowSeconds": 300}}


def pending_jobs_query(tenant: Tenant) -> str:
    """PromQL of the tenant's pending jobs: the sum over kinds of the max over the workers."""
    selector = f'namespace="{tenant.namespace}",{METRICS_TENANT_LABEL}="{tenant.name}"'
    return _TENANT_TOTAL.format(series=f"{METRIC}{{{selector}}}")


def _scaled(tenant: Tenant) -> bool:
    return tenant.spec.distiller.autoscaling


def _deployment(tenant: Tenant) -> Manifest:
    distiller = tenant.spec.distiller
    container = {
        "name": COMPONENT,
        "image": tenant.image(distiller.image, "echo"),
        "command": ["echoctl"],
        "args": ["worker", "--concurrency", str(distiller.concurrency)],
        "ports": [{"name": "metrics", "containerPort": WORKER_METRICS_PORT, "protocol": "TCP"}],
        "env": [
            *pods.echo_env(tenant),
            pods.env("ECHO_HOST", "0.0.0.0"),  # the worker binds /metrics to ECHO_HOST
            pods.env("ECHO_WORKER_METRICS_PORT", str(WORKER_METRICS_PORT)),
        ],
        "resources": pods.resources(distiller.resources, DEFAULT_RESOURCES),
        "volumeMounts": pods.echo_volume_mounts(),
    }
    return pods.deployment(
        tenant,
        COMPONENT,
        # Workers release their leases within ECHO_JOB_GRACE_SECONDS (20 s) of SIGTERM.
        pods.pod_spec(tenant, [container], pods.echo_volumes(tenant), terminationGracePeriodSeconds=30),
        replicas=None if _scaled(tenant) else distiller.replicas,
    )


def _hpa(tenant: Tenant) -> Manifest:
    distiller = tenant.spec.distiller
    metric = {
        "type": "External",
        "external": {
            "metric": {"name": METRIC, "selector": {"matchLabels": {METRICS_TENANT_LABEL: tenant.name}}},
            "target": {"type": "AverageValue", "averageValue": str(distiller.target_pending_jobs)},
        },
    }
    return pods.horizontal_pod_autoscaler(
        tenant,
        COMPONENT,
        min_replicas=distiller.min_replicas,
        max_replicas=distiller.max_replicas,
        metric=metric,
        behavior=SCALE_DOWN_SLOWLY,
    )


def _scaled_object(tenant: Tenant) -> Manifest:
    distiller = tenant.spec.distiller
    trigger = {
        "type": "prometheus",
        "metricType": "AverageValue",  # replicas = pending jobs / threshold, as the HPA's target
        "metadata": {
            "serverAddress": distiller.prometheus_address,
            "query": pending_jobs_query(tenant),
            "threshold": str(distiller.target_pending_jobs),
            # No series means Prometheus does not scrape the workers (no ServiceMonitor?): KEDA
            # reports an error on the ScaledObject and holds the replicas, instead of reading 0.
            "ignoreNullValues": "false",
        },
    }
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": tenant.metadata(tenant.child(COMPONENT), COMPONENT),
        "spec": {
            "scaleTargetRef": pods.scale_target(tenant, COMPONENT),
            "minReplicaCount": distiller.min_replicas,
            "maxReplicaCount": distiller.max_replicas,
            "pollingInterval": 15,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": SCALE_DOWN_SLOWLY}},
            "triggers": [trigger],
        },
    }


def _metrics_service(tenant: Tenant) -> Manifest:
    return pods.service(tenant, COMPONENT, [pods.service_port("metrics", WORKER_METRICS_PORT)])


def render_distiller(tenant: Tenant) -> list[Manifest]:
    distiller = tenant.spec.distiller
    out = [_deployment(tenant)]
    if _scaled(tenant):
        out.append(_scaled_object(tenant) if distiller.keda else _hpa(tenant))
    if tenant.spec.monitoring.service_monitor:  # a ServiceMonitor needs a Service to find the pods
        out.append(_metrics_service(tenant))
    return out
