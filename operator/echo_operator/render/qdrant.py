"""Qdrant children: a one-replica StatefulSet with its volume + a headless Service. Pure.

Nothing is rendered when `qdrant.externalUrl` is set. The `-unprivileged` image runs as uid 1000;
storage is the PVC, snapshots and the init marker are emptyDirs (the root filesystem is
read-only). `retainOnDelete` keeps the PVC when the EchoDeployment goes.
"""

from __future__ import annotations

from typing import Any

from echo_operator.render import pods
from echo_operator.render.tenant import QDRANT_GRPC_PORT, QDRANT_HTTP_PORT, Tenant

__all__ = ["render_qdrant"]

Manifest = dict[str, Any]
COMPONENT = "qdrant"
QDRANT_UID = 1000
DEFAULT_RESOURCES = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}


def _probe(path: str, period: int, failures: int) -> Manifest:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 3,
        "failureThreshold": failures,
    }


def _statefulset(tenant: Tenant) -> Manifest:
    managed = tenant.spec.qdrant.managed
    assert managed is not None  # render_qdrant checks it
    storage = managed.storage
    container = {
        "name": COMPONENT,
        "image": tenant.image(managed.image, "qdrant"),
        "ports": [
            {"name": "http", "containerPort": QDRANT_HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": QDRANT_GRPC_PORT, "protocol": "TCP"},
        ],
        "env": [
            pods.env("QDRANT__TELEMETRY_DISABLED", "true"),
            pods.env("QDRANT_INIT_FILE_PATH", "/qdrant/init/.qdrant-initialized"),
        ],
        "startupProbe": _probe("/livez", 5, 60),
        "livenessProbe": _probe("/livez", 10, 3),
        "readinessProbe": _probe("/readyz", 5, 3),
        "resources": pods.resources(managed.resources, DEFAULT_RESOURCES),
        "volumeMounts": [
            {"name": "storage", "mountPath": "/qdrant/storage"},
            {"name": "snapshots", "mountPath": "/qdrant/snapshots"},
            {"name": "init", "mountPath": "/qdrant/init"},
        ],
    }
    volumes = [{"name": "snapshots", "emptyDir": {}}, {"name": "init", "emptyDir": {"sizeLimit": "1Mi"}}]
    claim_spec: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class_name:
        claim_spec["storageClassName"] = storage.storage_class_name
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": tenant.metadata(tenant.child(COMPONENT), COMPONENT),
        "spec": {
            "replicas": 1,
            "serviceName": tenant.child(COMPONENT),
            "selector": {"matchLabels": tenant.selector(COMPONENT)},
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain" if storage.retain_on_delete else "Delete",
                "whenScaled": "Retain",
            },
            "template": {
                "metadata": {"labels": tenant.labels(COMPONENT)},
                "spec": pods.pod_spec(
                    tenant, [container], volumes, uid=QDRANT_UID, terminationGracePeriodSeconds=30
                ),
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "storage", "labels": tenant.labels(COMPONENT)},
                    "spec": claim_spec,
                }
            ],
        },
    }


def _service(tenant: Tenant) -> Manifest:
    ports = [pods.service_port("http", QDRANT_HTTP_PORT), pods.service_port("grpc", QDRANT_GRPC_PORT)]
    return pods.service(tenant, COMPONENT, ports, headless=True)


def render_qdrant(tenant: Tenant) -> list[Manifest]:
    if tenant.spec.qdrant.managed is None:
        return []
    return [_statefulset(tenant), _service(tenant)]
