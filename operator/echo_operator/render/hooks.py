"""echo-hooks children: Deployment, Service (:9099), PodDisruptionBudget, optional CPU HPA. Pure.

The Service, the probes and the key env are shared with the standalone pod (`render_standalone`),
so Open WebUI connects to either mode the same way.
"""

from __future__ import annotations

from typing import Any

from echo_operator.render import pods
from echo_operator.render.tenant import HOOKS_PORT, Tenant

__all__ = ["PRE_STOP_SECONDS", "key_env", "pre_stop", "probe", "render_hooks", "service"]

Manifest = dict[str, Any]
COMPONENT = "hooks"
PRE_STOP_SECONDS = 5
DEFAULT_RESOURCES = {"requests": {"cpu": "250m", "memory": "384Mi"}, "limits": {"memory": "1Gi"}}


def probe(path: str, period: int, failures: int, *, timeout: int = 2) -> Manifest:
    """An HTTP probe on the `http` port (:9099)."""
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def key_env(tenant: Tenant) -> list[Manifest]:
    """ECHO_API_KEY (Open WebUI's) and ECHO_ADMIN_KEY, the memory-management API's key (the hooks
    serve that API, no other pod needs it)."""
    name, key = tenant.api_key_ref
    out = [pods.secret_env("ECHO_API_KEY", name, key)]
    ref = tenant.spec.hooks.admin_key_secret_ref
    return out if ref is None else [*out, pods.secret_env("ECHO_ADMIN_KEY", ref.name, ref.key)]


def pre_stop() -> Manifest:
    """Kubernetes sends SIGTERM while the Service may still route to the pod for a few seconds;
    waiting first lets the endpoint go, then uvicorn finishes the requests in flight."""
    return {"preStop": {"exec": {"command": ["sleep", str(PRE_STOP_SECONDS)]}}}


def _deployment(tenant: Tenant) -> Manifest:
    hooks = tenant.spec.hooks
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
            *key_env(tenant),
        ],
        "startupProbe": probe("/healthz", 2, 30),
        "livenessProbe": probe("/healthz", 10, 3),
        "readinessProbe": probe("/readyz", 5, 3),
        "lifecycle": pre_stop(),
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


def service(tenant: Tenant) -> Manifest:
    """`<name>-hooks`, the Service Open WebUI connects to (the hooks pods, or the standalone one)."""
    return pods.service(
        tenant,
        COMPONENT,
        [pods.service_port("http", HOOKS_PORT)],
        service_type=tenant.spec.hooks.service_type,
        pods_of=tenant.serving_component,
    )


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
    out = [_deployment(tenant), service(tenant)]
    if hooks.pod_disruption_budget.enabled:
        out.append(_pdb(tenant))
    if hooks.autoscaling.enabled:
        out.append(_hpa(tenant))
    return out
