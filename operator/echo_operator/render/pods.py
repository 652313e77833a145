"""Building blocks shared by every workload: secure pod defaults, volumes, the ECHO_* env, and the
Deployment, Service and HorizontalPodAutoscaler of a component. Pure.

Every pod runs as non-root with a read-only root filesystem (an emptyDir for /tmp), no
capabilities, no privilege escalation, the RuntimeDefault seccomp profile and no service account
token (DESIGN §7); the services need no Kubernetes API access.
"""

from __future__ import annotations

from typing import Any

from echo_operator import shapes
from echo_operator import spec as spec_module
from echo_operator.render import tenant as tenant_module
from echo_operator.render.tenant import Tenant

__all__ = [
    "DATA_DIR",
    "DATA_VOLUME",
    "ECHO_UID",
    "config_volumes",
    "container_security",
    "deployment",
    "echo_env",
    "echo_volume_mounts",
    "echo_volumes",
    "embedded_env",
    "env",
    "horizontal_pod_autoscaler",
    "pod_spec",
    "resources",
    "scale_target",
    "secret_env",
    "service",
    "service_port",
]

ECHO_UID = 10001
DATA_DIR = "/var/lib/echo"
DATA_VOLUME = "data"
Manifest = dict[str, Any]


def container_security() -> Manifest:
    return {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_spec(
    tenant: Tenant,
    containers: list[Manifest],
    volumes: list[Manifest],
    *,
    uid: int = ECHO_UID,
    security: Manifest | None = None,
    **extra: Any,
) -> Manifest:
    """A pod spec with the secure defaults and a /tmp emptyDir added to every container; `security`
    adds to the pod's securityContext."""
    for container in containers:
        container["securityContext"] = container_security()
        mounts = container.setdefault("volumeMounts", [])
        mounts.insert(0, {"name": "tmp", "mountPath": "/tmp"})
        container["imagePullPolicy"] = tenant.spec.images.pull_policy
    spec: Manifest = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": uid,
            "fsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"},
            **(security or {}),
        },
        "containers": containers,
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}, *volumes],
        **extra,
    }
    if tenant.spec.images.pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in tenant.spec.images.pull_secrets]
    return spec


def resources(given: shapes.Resources | None, default: Manifest) -> Manifest:
    """The container resources: the spec's when given, else the component's default."""
    if given is None or (given.requests is None and given.limits is None):
        return default
    out: Manifest = {}
    if given.requests:
        out["requests"] = dict(given.requests)
    if given.limits:
        out["limits"] = dict(given.limits)
    return out


def env(name: str, value: str) -> Manifest:
    return {"name": name, "value": value}


def secret_env(name: str, secret: str, key: str) -> Manifest:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def echo_env(tenant: Tenant) -> list[Manifest]:
    """The ECHO_* environment of echo-hooks and echo-distiller (DESIGN §3)."""
    spec = tenant.spec
    assert spec.database is not None  # parse_spec requires it in mode distributed
    dsn = spec.database.dsn_secret_ref
    backends = [
        secret_env("ECHO_DATABASE_URL", dsn.name, dsn.key),
        env("ECHO_QDRANT_URL", tenant.qdrant_url),
        env("ECHO_EMBEDDING_URL", tenant.embedding_url),
        env("ECHO_EMBEDDING_MODEL", spec.embedding.model),
        env("ECHO_EMBEDDING_DIMENSION", str(spec.embedding.dimension)),
    ]
    qdrant_key = spec.qdrant.api_key_secret_ref
    keys = [secret_env("ECHO_QDRANT_API_KEY", *_ref(qdrant_key))] if qdrant_key else []
    return [*_state_env(tenant), *backends, *_files_env(tenant), *keys, *_services_env(spec)]


def embedded_env(tenant: Tenant) -> list[Manifest]:
    """The ECHO_* environment of the standalone pod: no database, Qdrant or embedding URL, so
    `echoctl serve` runs embedded, its state under ECHO_DATA_DIR (the pod's volume)."""
    return [*_state_env(tenant), *_files_env(tenant), *_services_env(tenant.spec)]


def _state_env(tenant: Tenant) -> list[Manifest]:
    return [
        env("ECHO_TENANT", tenant.tenant_id),
        env("ECHO_DATA_DIR", DATA_DIR),
        env("ECHO_LOG_LEVEL", tenant.spec.log_level),
        env("ECHO_LOG_FORMAT", "json"),
    ]


def _files_env(tenant: Tenant) -> list[Manifest]:
    return [
        env("ECHO_VALVES_FILE", f"{tenant_module.VALVES_DIR}/{tenant.valves_ref[1]}"),
        env("ECHO_MODEL_THRESHOLDS_FILE", f"{tenant_module.THRESHOLDS_DIR}/{tenant.thresholds_ref[1]}"),
    ]


def _services_env(spec: spec_module.EchoDeploymentSpec) -> list[Manifest]:
    """The LLM and Open WebUI's files API."""
    out = _llm_env(spec)
    if spec.openwebui and spec.openwebui.url:
        out.append(env("ECHO_OPENWEBUI_URL", spec.openwebui.url))
        if spec.openwebui.api_key_secret_ref:
            out.append(secret_env("ECHO_OPENWEBUI_API_KEY", *_ref(spec.openwebui.api_key_secret_ref)))
    return out


def _ref(ref: shapes.SecretKeyRef) -> tuple[str, str]:
    return ref.name, ref.key


def _llm_env(spec: spec_module.EchoDeploymentSpec) -> list[Manifest]:
    llm = spec.llm
    out = [env("ECHO_LLM_PROVIDER", llm.provider)]
    if llm.models:
        out.append(env("ECHO_LLM_MODEL", llm.models[0]))
    prefix = {"gemini": "ECHO_GEMINI", "openai": "ECHO_OPENAI"}.get(llm.provider)
    if prefix is None:
        return out
    if llm.provider == "gemini":
        out.append(env("ECHO_PIPE_MODELS", ",".join(llm.models)))
    if llm.api_key_secret_ref:
        out.append(secret_env(f"{prefix}_API_KEY", *_ref(llm.api_key_secret_ref)))
    if llm.base_url:
        out.append(env(f"{prefix}_BASE_URL", llm.base_url))
    return out


def echo_volumes(tenant: Tenant) -> list[Manifest]:
    """The data emptyDir and the two config ConfigMaps (mounted whole, so updates hot-reload)."""
    return [{"name": DATA_VOLUME, "emptyDir": {"sizeLimit": "1Gi"}}, *config_volumes(tenant)]


def config_volumes(tenant: Tenant) -> list[Manifest]:
    """The valves and model-thresholds ConfigMaps."""
    return [
        {"name": "valves", "configMap": {"name": tenant.valves_ref[0]}},
        {"name": "model-thresholds", "configMap": {"name": tenant.thresholds_ref[0]}},
    ]


def echo_volume_mounts() -> list[Manifest]:
    return [
        {"name": DATA_VOLUME, "mountPath": DATA_DIR},
        {"name": "valves", "mountPath": tenant_module.VALVES_DIR, "readOnly": True},
        {"name": "model-thresholds", "mountPath": tenant_module.THRESHOLDS_DIR, "readOnly": True},
    ]


def deployment(
    tenant: Tenant, component: str, pod: Manifest, *, replicas: int | None, strategy: Manifest | None = None
) -> Manifest:
    """The Deployment of one component; `replicas` is None when an autoscaler owns the count."""
    spec: Manifest = {"revisionHistoryLimit": 5, "selector": {"matchLabels": tenant.selector(component)}}
    if replicas is not None:
        spec = {"replicas": replicas, **spec}
    if strategy is not None:
        spec["strategy"] = strategy
    spec["template"] = {"metadata": {"labels": tenant.labels(component)}, "spec": pod}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": tenant.metadata(tenant.child(component), component),
        "spec": spec,
    }


def scale_target(tenant: Tenant, component: str) -> Manifest:
    """What an HPA or a KEDA ScaledObject scales: the component's Deployment."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": tenant.child(component)}


def service_port(name: str, port: int) -> Manifest:
    """A TCP port of a Service that targets the container port of the same name."""
    return {"name": name, "port": port, "targetPort": name, "protocol": "TCP"}


def service(
    tenant: Tenant,
    component: str,
    ports: list[Manifest],
    *,
    service_type: str = "ClusterIP",
    headless: bool = False,
    pods_of: str | None = None,
) -> Manifest:
    """The Service `<name>-<component>` in front of the pods of `pods_of` (default the component);
    `headless` gives each pod of a StatefulSet its own DNS name (`clusterIP: None`) instead of one
    virtual IP."""
    spec: Manifest = {"clusterIP": "None"} if headless else {"type": service_type}
    spec |= {"selector": tenant.selector(pods_of or component), "ports": ports}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": tenant.metadata(tenant.child(component), component),
        "spec": spec,
    }


def horizontal_pod_autoscaler(
    tenant: Tenant,
    component: str,
    *,
    min_replicas: int,
    max_replicas: int,
    metric: Manifest,
    behavior: Manifest | None = None,
) -> Manifest:
    """An autoscaling/v2 HPA of the component's Deployment on one metric (a `metrics[]` item)."""
    spec: Manifest = {
        "scaleTargetRef": scale_target(tenant, component),
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "metrics": [metric],
    }
    if behavior is not None:
        spec["behavior"] = behavior
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": tenant.metadata(tenant.child(component), component),
        "spec": spec,
    }
