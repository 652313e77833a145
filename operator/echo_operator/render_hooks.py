"""echo-hooks children: Deployment, Service (:9099), PodDisruptionBudget, optional CPU HPA. Pure."""

from __future__ import annotations

from typing import Any

from echo_operator import pods
from echo_operator.tenant import HOOKS_PORT, Tenant

__all__ = ["render_hooks"]

Manifest = dict[str, Any]
COMPONENT = "hooks"
PRE_STOP_SECONDS = 5
DEFAULT_RESOURCES = {"requests": {"cpu": "500m", "memory": "384Mi"}, "limits": {"memory": "1Gi"}}


def _probe(path: str, period: int, failures: int) -> Manifest:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def _admin_key_env(tenant: Tenant) -> list[Manifest]:
    """ECHO_ADMIN_KEY, the memory-management API's key: the hooks serve that API, no other pod needs it."""
    ref = tenant.spec.hooks.admin_key_secret_ref
    return [] if ref is None else [pods.secret_env("ECHO_ADMIN_KEY", ref.name, ref.key)]


def _deployment(tenant: Tenant) -> Manifest:
    hooks = tenant.spec.hooks
    name, key = tenant.api_key_ref
    container = {
        "name": COMPONENT,
        "image": tenant.image(hooks.image, "echo"),
        "command": ["echoctl"],
        "args": ["serve"],
        "ports": [{"name": "http", "containerPort": HOOKS_PORT, "protocol": "TCP"}],
        "env": [
            *pods.echo_env(tenant),
            pods.env("ECHO_HOST", "0.0.0.0"),
            pods.env("ECHO_PORT", str(HOOKS_PORT)),
            # the distiller pool runs the jobs; said explicitly so the hooks log it as intended
            pods.env("ECHO_INPROCESS_WORKER", "false"),
            pods.secret_env("ECHO_API_KEY", name, key),
            *_admin_key_env(tenant),
        ],
        "startupProbe": _probe("/healthz", 2, 30),
        "livenessProbe": _probe("/healthz", 10, 3),
        "readinessProbe": _probe("/readyz", 5, 3),
        # Kubernetes sends SIGTERM while the Service may still route to the pod for a few seconds;
        # waiting first lets the endpoint go, then uvicorn finishes the requests in flight.
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRE_STOP_SECONDS)]}}},
        "resources": pods.resources(hooks.resources, DEFAULT_RESOURCES),
        "volumeMounts": pods.echo_volume_mounts(),
    }
    return pods.deployment(
        tenant,
        COMPONENT,
        pods.pod_spec(tenant, [container], pods.echo_volumes(tenant), terminationGracePeriodSeconds=30),
        # with an HPA the replica count is the HPA's field, not ours
        replicas=None if hooks.autoscaling.enabled else hooks.replicas,
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
    )


def _service(tenant: Tenant) -> Manifest:
    service_type = tenant.spec.hooks.service_type
    return pods.service(tenant, COMPONENT, [pods.service_port("http", HOOKS_PORT)], service_type=service_type)


def _pdb(tenant: Tenant) -> Manifest:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": tenant.metadata(tenant.child(COMPONENT), COMPONENT),
        "spec": {
            "maxUnavailable": tenant.spec.hooks.pod_disruption_budget.max_unavailable,
            "selector": {"matchLabels": tenant.selector(COMPONENT)},
        },
    }


def _hpa(tenant: Tenant) -> Manifest:
    autoscaling = tenant.spec.hooks.autoscaling
    target = {"type": "Utilization", "averageUtilization": autoscaling.target_cpu_utilization}
    return pods.horizontal_pod_autoscaler(
        tenant,
        COMPONENT,
        min_replicas=autoscaling.min_replicas,
        max_replicas=autoscaling.max_replicas,
        metric={"type": "Resource", "resource": {"name": "cpu", "target": target}},
    )


def render_hooks(tenant: Tenant) -> list[Manifest]:
    hooks = tenant.spec.hooks
    out = [_deployment(tenant), _service(tenant)]
    if hooks.pod_disruption_budget.enabled:
        out.append(_pdb(tenant))
    if hooks.autoscaling.enabled:
        out.append(_hpa(tenant))
    return out
