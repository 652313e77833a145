"""echo-distiller children: the worker Deployment and its scaler on queue depth. Pure.

Scaling signal: `echo_jobs_pending` (by kind; every worker reports the same tenant-wide count, so
take the max across pods, not the sum). The HPA reads it as an External metric selected by
`tenant=<name>` (the ServiceMonitors add that label); KEDA queries Prometheus directly.
"""

from __future__ import annotations

from typing import Any

from echo_operator import pods
from echo_operator.tenant import WORKER_METRICS_PORT, Tenant

__all__ = ["pending_jobs_query", "render_distiller"]

Manifest = dict[str, Any]
COMPONENT = "distiller"
METRIC = "echo_jobs_pending"
DEFAULT_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


def pending_jobs_query(tenant: Tenant) -> str:
    """PromQL of the tenant's pending jobs: the sum over kinds, the max over the workers reporting it."""
    return f'max(sum by (pod) ({METRIC}{{namespace="{tenant.namespace}",tenant="{tenant.name}"}}))'


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
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": tenant.metadata(tenant.child(COMPONENT), COMPONENT),
        "spec": {
            "scaleTargetRef": pods.scale_target(tenant, COMPONENT),
            "minReplicas": distiller.min_replicas,
            "maxReplicas": distiller.max_replicas,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": METRIC, "selector": {"matchLabels": {"tenant": tenant.name}}},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": str(distiller.target_pending_jobs),
                        },
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        },
    }


def _scaled_object(tenant: Tenant) -> Manifest:
    distiller = tenant.spec.distiller
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": tenant.metadata(tenant.child(COMPONENT), COMPONENT),
        "spec": {
            "scaleTargetRef": pods.scale_target(tenant, COMPONENT),
            "minReplicaCount": distiller.min_replicas,
            "maxReplicaCount": distiller.max_replicas,
            "pollingInterval": 15,
            "cooldownPeriod": 300,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": distiller.prometheus_address,
                        "query": pending_jobs_query(tenant),
                        "threshold": str(distiller.target_pending_jobs),
                    },
                }
            ],
        },
    }


def _metrics_service(tenant: Tenant) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": tenant.metadata(tenant.child(COMPONENT), COMPONENT),
        "spec": {
            "type": "ClusterIP",
            "selector": tenant.selector(COMPONENT),
            "ports": [
                {"name": "metrics", "port": WORKER_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}
            ],
        },
    }


def render_distiller(tenant: Tenant) -> list[Manifest]:
    distiller = tenant.spec.distiller
    out = [_deployment(tenant)]
    if _scaled(tenant):
        out.append(_scaled_object(tenant) if distiller.keda else _hpa(tenant))
    if tenant.spec.monitoring.service_monitor:  # a ServiceMonitor needs a Service to find the pods
        out.append(_metrics_service(tenant))
    return out
