"""echo-embedding children: Infinity serving the embedding model (GPU nodes) + Service :7997. Pure.

Nothing is rendered when `embedding.externalUrl` is set. The startup probe allows
`startupTimeoutSeconds` for the model to load; /dev/shm is a memory emptyDir (PyTorch's data
loaders need more than the runtime's 64 MiB) and the model cache is an emptyDir under HF_HOME,
since the root filesystem is read-only.
"""

from __future__ import annotations

import math
from typing import Any

from echo_operator.render import pods
from echo_operator.render.tenant import EMBEDDING_PORT, Tenant

__all__ = ["render_embedding"]

Manifest = dict[str, Any]
COMPONENT = "embedding"
CACHE_DIR = "/models-cache"
DEFAULT_RESOURCES = {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
STARTUP_PERIOD = 10


def _probe(period: int, failures: int, timeout: int = 5) -> Manifest:
    return {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def _resources(tenant: Tenant) -> Manifest:
    embedding = tenant.spec.embedding
    out = pods.resources(embedding.resources, DEFAULT_RESOURCES)
    if embedding.gpu.count > 0:
        # a quantity is a string on the wire: a 1.20 server-side apply refuses a bare integer
        gpus = str(embedding.gpu.count)
        out = {**out, "limits": {**out.get("limits", {}), embedding.gpu.resource_name: gpus}}
    return out


def _scheduling(tenant: Tenant) -> Manifest:
    embedding = tenant.spec.embedding
    out: Manifest = {}
    if embedding.node_selector:
        out["nodeSelector"] = dict(embedding.node_selector)
    tolerations = embedding.tolerations
    if tolerations is not None:
        out["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in tolerations]
    elif embedding.gpu.count > 0:  # GPU nodes are usually tainted with their resource name
        out["tolerations"] = [
            {"key": embedding.gpu.resource_name, "operator": "Exists", "effect": "NoSchedule"}
        ]
    if embedding.runtime_class_name:
        out["runtimeClassName"] = embedding.runtime_class_name
    return out


def _deployment(tenant: Tenant) -> Manifest:
    embedding = tenant.spec.embedding
    gpu = embedding.gpu.count > 0
    container = {
        "name": COMPONENT,
        "image": tenant.image(embedding.image, "embedding"),
        "args": [
            "v2",
            "--model-id",
            embedding.model,
            "--port",
            str(EMBEDDING_PORT),
            "--device",
            "cuda" if gpu else "cpu",
        ],
        "ports": [{"name": "http", "containerPort": EMBEDDING_PORT, "protocol": "TCP"}],
        "env": [
            pods.env("HF_HOME", f"{CACHE_DIR}/huggingface"),
            pods.env("HOME", "/tmp"),
            pods.env("INFINITY_ANONYMOUS_USAGE_STATS", "0"),
        ],
        "startupProbe": _probe(
            STARTUP_PERIOD, math.ceil(embedding.startup_timeout_seconds / STARTUP_PERIOD), timeout=5
        ),
        "readinessProbe": _probe(10, 3),
        "livenessProbe": _probe(20, 3),
        "resources": _resources(tenant),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "model-cache", "mountPath": CACHE_DIR},
        ],
    }
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": embedding.shm_size}},
        {"name": "model-cache", "emptyDir": {"sizeLimit": embedding.model_cache_size}},
    ]
    # A GPU pod cannot surge onto a GPU that is not free: replace pods one at a time instead.
    rolling = {"maxUnavailable": 1, "maxSurge": 0} if gpu else {"maxUnavailable": 0, "maxSurge": 1}
    return pods.deployment(
        tenant,
        COMPONENT,
        pods.pod_spec(tenant, [container], volumes, terminationGracePeriodSeconds=30, **_scheduling(tenant)),
        replicas=embedding.replicas,
        strategy={"type": "RollingUpdate", "rollingUpdate": rolling},
    )


def _service(tenant: Tenant) -> Manifest:
    return pods.service(tenant, COMPONENT, [pods.service_port("http", EMBEDDING_PORT)])


def render_embedding(tenant: Tenant) -> list[Manifest]:
    if tenant.spec.embedding.external_url:
        return []
    return [_deployment(tenant), _service(tenant)]
