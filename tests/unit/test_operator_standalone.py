"""`spec.mode: standalone`: one pod running `echoctl serve` embedded, its volume, the same hooks
Service; what the mode ignores or refuses; and switching modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from echo_operator import apply, render
from echo_operator.render import modes
from echo_operator.spec import InvalidSpec, parse_spec

STANDALONE: dict[str, Any] = {"mode": "standalone", "llm": {"provider": "offline"}}
DISTRIBUTED: dict[str, Any] = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}}
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "echo-standalone.yaml"
BACKEND_URLS = ("ECHO_DATABASE_URL", "ECHO_QDRANT_URL", "ECHO_EMBEDDING_URL", "ECHO_EMBEDDING_DIMENSION")


def rendered(**changes: Any) -> list[dict[str, Any]]:
    manifests = render.render("acme", "tenants", {**STANDALONE, **changes})
    for manifest in manifests:
        if not manifest["apiVersion"].startswith(("monitoring.coreos.com/", "keda.sh/")):
            kubernetes_validate.validate(manifest, "1.33", strict=True)
    return manifests


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def ids(manifests: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(m["kind"], m["metadata"]["name"]) for m in manifests}


def pod_of(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return find(manifests, "StatefulSet", "acme-standalone")["spec"]["template"]["spec"]


def env_of(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    (main,) = pod_of(manifests)["containers"]
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in main["env"]}


def test_a_standalone_tenant_is_one_statefulset_and_the_hooks_service() -> None:
    assert ids(rendered()) == {
        ("ConfigMap", "acme-valves"),
        ("ConfigMap", "acme-model-thresholds"),
        ("StatefulSet", "acme-standalone"),
        ("Service", "acme-hooks"),
        ("NetworkPolicy", "acme-tenant"),
        ("NetworkPolicy", "acme-hooks-ingress"),
    }  # no distiller, embedding, Qdrant, HPA, ScaledObject or PDB


def test_the_pod_runs_echoctl_serve_embedded_with_the_in_process_worker() -> None:
    manifests = rendered()
    statefulset = find(manifests, "StatefulSet", "acme-standalone")
    assert statefulset["spec"]["replicas"] == 1
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"  # a broken pod does not block a fix
    (main,) = pod_of(manifests)["containers"]
    assert main["image"] == "ghcr.io/echo-k8s/echo-standalone:0.1.0"
    assert (main["command"], main["args"]) == (["echoctl"], ["serve"])
    assert main["ports"] == [{"name": "http", "containerPort": 9099, "protocol": "TCP"}]
    env = env_of(manifests)
    assert not set(BACKEND_URLS) & set(env)  # nothing external: embedded PostgreSQL, Qdrant, embedder
    assert env["ECHO_DATA_DIR"] == "/var/lib/echo"
    assert env["ECHO_INPROCESS_WORKER"] == "true"
    assert env["ECHO_INPROCESS_WORKER_CONCURRENCY"] == "2"
    assert (env["ECHO_HOST"], env["ECHO_PORT"]) == ("0.0.0.0", "9099")
    assert env["ECHO_API_KEY"] == {"secretKeyRef": {"name": "acme-api-key", "key": "api-key"}}
    assert env["ECHO_TENANT"].startswith("tenants-acme-")
    assert env["ECHO_LLM_PROVIDER"] == "offline"
    assert env["ECHO_VALVES_FILE"] == "/etc/echo/valves/valves.yaml"
    assert main["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert main["startupProbe"]["periodSeconds"] * main["startupProbe"]["failureThreshold"] == 300
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert main["lifecycle"]["preStop"] == {"exec": {"command": ["sleep", "5"]}}
    assert main["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "3Gi"}}


def test_the_pod_is_locked_down_and_keeps_its_state_on_the_claim() -> None:
    manifests = rendered()
    statefulset = find(manifests, "StatefulSet", "acme-standalone")
    pod = pod_of(manifests)
    (main,) = pod["containers"]
    security = main["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["runAsNonRoot"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["fsGroup"] == 10001
    # PostgreSQL refuses a data directory the kubelet made group-writable on a later mount
    assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert mounts["/var/lib/echo"] == "data"
    assert "data" not in volumes  # the claim of the volumeClaimTemplate, not an emptyDir
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}
    assert statefulset["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    assert {"valves", "model-thresholds"} <= set(volumes)


def test_standalone_options() -> None:
    manifests = rendered(
        images={"pullPolicy": "Never", "standalone": {"repository": "registry.local/s", "tag": "dev"}},
        standalone={
            "workerConcurrency": 6,
            "startupTimeoutSeconds": 600,
            "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "6Gi"}},
            "storage": {"size": "20Gi", "storageClassName": "local", "retainOnDelete": False},
        },
        hooks={"adminKeySecretRef": {"name": "ops"}, "apiKeySecretRef": {"name": "owui", "key": "k"}},
        logLevel="DEBUG",
    )
    statefulset = find(manifests, "StatefulSet", "acme-standalone")
    (main,) = pod_of(manifests)["containers"]
    assert main["image"] == "registry.local/s:dev"
    assert main["imagePullPolicy"] == "Never"
    assert main["resources"] == {"requests": {"cpu": "2"}, "limits": {"memory": "6Gi"}}
    assert main["startupProbe"]["periodSeconds"] * main["startupProbe"]["failureThreshold"] == 600
    env = env_of(manifests)
    assert env["ECHO_INPROCESS_WORKER_CONCURRENCY"] == "6"
    assert env["ECHO_ADMIN_KEY"] == {"secretKeyRef": {"name": "ops", "key": "admin-key"}}
    assert env["ECHO_API_KEY"] == {"secretKeyRef": {"name": "owui", "key": "k"}}
    assert env["ECHO_LOG_LEVEL"] == "DEBUG"
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "local"
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert statefulset["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    override = rendered(standalone={"image": "registry.local/other:1"})
    assert pod_of(override)["containers"][0]["image"] == "registry.local/other:1"


def test_open_webui_connects_as_to_a_distributed_tenant() -> None:
    """The same Service name, port, type and key: .status.hooksEndpoint does not change with the mode."""
    manifests = rendered(hooks={"serviceType": "NodePort"})
    service = find(manifests, "Service", "acme-hooks")
    statefulset = find(manifests, "StatefulSet", "acme-standalone")
    assert service["spec"]["selector"] == statefulset["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "standalone"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 9099, "targetPort": "http", "protocol": "TCP"}
    ]
    assert service["spec"]["type"] == "NodePort"
    assert statefulset["spec"]["serviceName"] == "acme-hooks"
    distributed = render.render("acme", "tenants", {**DISTRIBUTED, "hooks": {"serviceType": "NodePort"}})
    other = find(distributed, "Service", "acme-hooks")
    assert other["metadata"] == service["metadata"]
    assert other["spec"]["ports"] == service["spec"]["ports"]
    ingress = find(manifests, "NetworkPolicy", "acme-hooks-ingress")
    assert ingress["spec"]["podSelector"]["matchLabels"] == service["spec"]["selector"]


def test_monitoring_scrapes_the_one_pod_through_the_hooks_service() -> None:
    manifests = rendered(monitoring={"serviceMonitor": True, "dashboards": True})
    monitors = [m for m in manifests if m["kind"] == "ServiceMonitor"]
    assert [m["metadata"]["name"] for m in monitors] == ["acme-hooks"]
    service = find(manifests, "Service", "acme-hooks")
    assert monitors[0]["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert ("NetworkPolicy", "acme-metrics") in ids(manifests)


def test_sections_of_the_other_mode_are_ignored_and_named() -> None:
    ignoring = {
        "hooks": {"replicas": 5, "autoscaling": {"enabled": True}, "podDisruptionBudget": {"enabled": False}},
        "distiller": {"replicas": 3, "keda": False},
        "embedding": {"model": "BAAI/bge-m3", "dimension": 768},
        "qdrant": {"managed": {"storage": {"size": "1Gi"}}},
        "images": {"echo": {"repository": "r/echo", "tag": "1"}},
    }
    assert rendered(**ignoring) == rendered()  # nothing of theirs reaches the children
    spec = parse_spec("acme", {**STANDALONE, **ignoring})
    assert modes.ignored(spec) == (
        "spec.hooks.replicas",
        "spec.hooks.autoscaling",
        "spec.hooks.podDisruptionBudget",
        "spec.distiller",
        "spec.embedding",
        "spec.qdrant",
        "spec.images.echo",
    )
    assert modes.ignored(parse_spec("acme", STANDALONE)) == ()
    # the API server fills in every default: a defaulted object names nothing either
    defaulted = parse_spec("acme", STANDALONE).model_dump(by_alias=True, exclude_none=True)
    assert modes.ignored(parse_spec("acme", defaulted)) == ()
    distributed = parse_spec("acme", {**DISTRIBUTED, "standalone": {"workerConcurrency": 3}})
    assert modes.ignored(distributed) == ("spec.standalone",)
    assert modes.ignored(parse_spec("acme", DISTRIBUTED)) == ()


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"database": {"dsnSecretRef": {"name": "db"}}}, "remove database"),
        ({"qdrant": {"externalUrl": "http://q:6333"}}, "qdrant.externalUrl"),
        ({"embedding": {"externalUrl": "http://e:7997"}}, "embedding.externalUrl"),
    ],
)
def test_what_would_put_the_data_elsewhere_is_refused(changes: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidSpec, match="a standalone tenant keeps its data in its own pod") as caught:
        render.render("acme", "tenants", {**STANDALONE, **changes})
    assert fragment in str(caught.value)


def test_distributed_mode_still_needs_a_database() -> None:
    with pytest.raises(InvalidSpec, match="database is required in mode distributed"):
        render.render("acme", "tenants", {"llm": {"provider": "offline"}})


def test_switching_modes_keeps_only_the_hooks_service_and_the_config() -> None:
    """What the handlers prune on a switch: every child of the other mode (identities differ)."""
    distributed = {render.identity(m) for m in render.render("acme", "tenants", DISTRIBUTED)}
    standalone = {render.identity(m) for m in rendered()}
    assert distributed & standalone == {
        ("v1", "ConfigMap", "acme-valves"),
        ("v1", "ConfigMap", "acme-model-thresholds"),
        ("v1", "Service", "acme-hooks"),
        ("networking.k8s.io/v1", "NetworkPolicy", "acme-tenant"),
        ("networking.k8s.io/v1", "NetworkPolicy", "acme-hooks-ingress"),
    }
    assert ("apps/v1", "StatefulSet", "acme-standalone") in standalone - distributed
    assert {("apps/v1", "Deployment", f"acme-{c}") for c in ("hooks", "distiller", "embedding")} <= (
        distributed - standalone
    )
    kinds = {kind for _, kind in apply.CHILD_KINDS}
    assert {kind for _, kind, _ in distributed | standalone} <= kinds  # all pruned by the handlers


def test_on_kubernetes_1_20_the_statefulset_loses_only_its_retention_policy() -> None:
    statefulset = find(rendered(), "StatefulSet", "acme-standalone")
    old = apply.for_cluster(statefulset, apply.Cluster(frozenset(), 20))
    assert old is not None
    assert "persistentVolumeClaimRetentionPolicy" not in old["spec"]
    assert {k: v for k, v in statefulset["spec"].items() if k != "persistentVolumeClaimRetentionPolicy"} == (
        old["spec"]
    )


def test_the_example_is_a_standalone_tenant_with_nothing_else_to_run() -> None:
    docs = [doc for doc in yaml.safe_load_all(EXAMPLE.read_text()) if doc]
    (tenant,) = docs
    assert tenant["kind"] == "EchoDeployment"
    assert "namespace" not in tenant["metadata"]  # `kubectl apply -n <namespace> -f` as is
    spec = parse_spec(tenant["metadata"]["name"], tenant["spec"])
    assert spec.mode == "standalone"
    assert spec.llm.provider == "offline"  # no key needed
    assert modes.ignored(spec) == ()
    manifests = render.render(tenant["metadata"]["name"], "echo-small", tenant["spec"])
    assert [m["kind"] for m in manifests if m["kind"] in ("Deployment", "StatefulSet")] == ["StatefulSet"]
