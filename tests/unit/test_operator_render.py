"""render(name, namespace, spec): every option of the spec, and every manifest against the Kubernetes
OpenAPI schemas (kubernetes-validate, offline)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from echo_operator import render
from echo_operator.render import distiller as render_distiller
from echo_operator.render.tenant import Tenant
from echo_operator.spec import parse_spec

K8S_VERSION = "1.33"
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
MINIMAL: dict[str, Any] = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}}
WORKLOADS = ("Deployment", "StatefulSet")
TENANT_PENDING_JOBS = (
    "sum by (namespace, tenant) (max by (namespace, tenant, kind) "
    '(echo_jobs_pending{namespace="tenants",tenant="acme"}))'
)
SCALE_DOWN_SLOWLY = {"scaleDown": {"stabilizationWindowSeconds": 300}}
_validated: set[str] = set()


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def rendered(changes: dict[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    manifests = render.render("acme", "tenants", merged(MINIMAL, changes or {}), **kwargs)
    validate_all(manifests)
    return manifests


def validate_all(manifests: Iterable[dict[str, Any]]) -> None:
    """Every built-in kind against the Kubernetes OpenAPI schema, strictly (no unknown fields)."""
    for manifest in manifests:
        if manifest["apiVersion"].startswith(("monitoring.coreos.com/", "keda.sh/")):
            continue
        text = json.dumps(manifest, sort_keys=True)
        if text not in _validated:
            kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
            _validated.add(text)


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} found in {ids(manifests)}"
    return matches[0]


def ids(manifests: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(m["kind"], m["metadata"]["name"]) for m in manifests}


def container(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["template"]["spec"]["containers"][0]


def env_of(manifest: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container(manifest)["env"]}


def secret(name: str, key: str) -> dict[str, Any]:
    return {"secretKeyRef": {"name": name, "key": key}}


# --- the whole picture -------------------------------------------------------------------------


def test_minimal_spec_renders_the_default_tenant() -> None:
    assert ids(rendered()) == {
        ("ConfigMap", "acme-valves"),
        ("ConfigMap", "acme-model-thresholds"),
        ("StatefulSet", "acme-qdrant"),
        ("Service", "acme-qdrant"),
        ("Deployment", "acme-embedding"),
        ("Service", "acme-embedding"),
        ("Deployment", "acme-hooks"),
        ("Service", "acme-hooks"),
        ("PodDisruptionBudget", "acme-hooks"),
        ("Deployment", "acme-distiller"),
        ("ScaledObject", "acme-distiller"),
        ("NetworkPolicy", "acme-tenant"),
        ("NetworkPolicy", "acme-hooks-ingress"),
    }


def test_render_is_pure_and_deterministic() -> None:
    spec = merged(MINIMAL, {"valves": {"inline": {"echo_memory": {"WINDOW_SIZE": 3}}}})
    before = copy.deepcopy(spec)
    first = render.render("acme", "tenants", spec)
    assert render.render("acme", "tenants", spec) == first
    assert spec == before
    assert json.loads(json.dumps(first)) == first  # plain JSON data, nothing else


def test_every_child_is_labelled_namespaced_and_distinct() -> None:
    manifests = rendered({"monitoring": {"serviceMonitor": True, "dashboards": True}})
    for manifest in manifests:
        meta = manifest["metadata"]
        assert meta["namespace"] == "tenants"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "echo-operator"
        assert meta["labels"]["app.kubernetes.io/instance"] == "acme"
        assert meta["name"].startswith("acme-")
        assert "ownerReferences" not in meta  # the handlers adopt, render stays pure
    assert len({render.identity(m) for m in manifests}) == len(manifests)


@pytest.mark.parametrize("example", ["echo-cpu.yaml", "echo-gpu.yaml", "echo-standalone.yaml"])
def test_examples_render_and_validate(example: str) -> None:
    docs = [doc for doc in yaml.safe_load_all((EXAMPLES / example).read_text()) if doc]
    body = next(doc for doc in docs if doc["kind"] == "EchoDeployment")
    validate_all(render.render(body["metadata"]["name"], "examples", body["spec"]))
    validate_all(doc for doc in docs if doc["kind"] != "EchoDeployment")  # what the example brings
    for doc in docs:  # applied as is with `kubectl apply -n <namespace> -f`
        assert "namespace" not in doc["metadata"] or example == "echo-gpu.yaml", doc["metadata"]


def test_every_example_is_tested() -> None:
    assert {path.name for path in EXAMPLES.glob("*.yaml")} == {
        "echo-cpu.yaml",
        "echo-gpu.yaml",
        "echo-standalone.yaml",
    }


def test_the_cpu_example_brings_its_postgresql() -> None:
    """docs/examples/echo-cpu.yaml is self-contained: its DSN points at the PostgreSQL it deploys, by a
    namespace-relative name."""
    docs = [doc for doc in yaml.safe_load_all((EXAMPLES / "echo-cpu.yaml").read_text()) if doc]
    objects = {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}
    tenant = objects["EchoDeployment", "echo-cpu"]
    ref = tenant["spec"]["database"]["dsnSecretRef"]
    dsn = objects["Secret", ref["name"]]["stringData"][ref.get("key", "dsn")]
    credentials = objects["Secret", "postgres"]["stringData"]
    user, password, database = (credentials[k] for k in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"))
    assert dsn == f"postgresql://{user}:{password}@postgres:5432/{database}"
    service = objects["Service", "postgres"]
    deployment = objects["Deployment", "postgres"]
    pod = deployment["spec"]["template"]["spec"]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["port"] == 5432
    (postgres,) = pod["containers"]
    assert postgres["image"] == "ghcr.io/echo-k8s/echo-postgres:0.1.0"
    assert pod["securityContext"]["runAsUser"] == 999
    assert postgres["securityContext"]["readOnlyRootFilesystem"] is True
    assert postgres["securityContext"]["runAsNonRoot"] is True
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert postgres[probe]["exec"]["command"][0] == "pg_isready"
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in postgres["volumeMounts"]:  # every writable path is a volume: data, socket, /tmp
        assert "emptyDir" in volumes[mount["name"]]
    env = {item["name"]: item["value"] for item in postgres["env"]}
    assert env["PGDATA"].startswith("/var/lib/postgresql/data/")  # a subdirectory initdb creates


def test_invalid_spec_raises_with_every_problem() -> None:
    spec = merged(MINIMAL, {"hooks": {"replicas": 0, "colour": "blue"}, "llm": {"provider": "gemini"}})
    with pytest.raises(render.InvalidSpec) as caught:
        render.render("acme", "tenants", spec)
    message = str(caught.value)
    assert "spec.hooks.replicas" in message
    assert "spec.hooks.colour" in message
    assert "llm.apiKeySecretRef is required" in message


@pytest.mark.parametrize("name", ["Acme", "1acme", "a" * 41, "acme.corp", "acme-"])
def test_tenant_names_must_be_short_dns_labels(name: str) -> None:
    with pytest.raises(render.InvalidSpec, match="DNS-1035 label"):
        render.render(name, "tenants", MINIMAL)


# --- secure defaults ---------------------------------------------------------------------------


def test_every_pod_runs_with_the_secure_defaults() -> None:
    manifests = rendered({"monitoring": {"serviceMonitor": True}})
    workloads = [m for m in manifests if m["kind"] in WORKLOADS]
    assert len(workloads) == 4
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}} in pod["volumes"]
        for item in pod["containers"]:
            security = item["securityContext"]
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert security["runAsNonRoot"] is True
            assert {"name": "tmp", "mountPath": "/tmp"} in item["volumeMounts"]
            assert item["resources"]["requests"]


# --- hooks -------------------------------------------------------------------------------------


def test_hooks_deployment_service_probes_and_env() -> None:
    manifests = rendered()
    hooks = find(manifests, "Deployment", "acme-hooks")
    main = container(hooks)
    assert hooks["spec"]["replicas"] == 2
    assert main["image"] == "ghcr.io/echo-k8s/echo:0.1.0"
    assert main["args"] == ["serve"]
    assert main["ports"] == [{"name": "http", "containerPort": 9099, "protocol": "TCP"}]
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert main["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert main["lifecycle"]["preStop"] == {"exec": {"command": ["sleep", "5"]}}  # endpoint gone first
    assert main["resources"]["requests"] == {"cpu": "250m", "memory": "384Mi"}
    assert hooks["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 5
    env = env_of(hooks)
    assert env["ECHO_HOST"] == "0.0.0.0"
    assert env["ECHO_PORT"] == "9099"
    assert env["ECHO_INPROCESS_WORKER"] == "false"  # the distiller pool runs the jobs
    assert env["ECHO_TENANT"] == "tenants-acme-" + hashlib.sha256(b"tenants/acme").hexdigest()[:12]
    assert env["ECHO_API_KEY"] == secret("acme-api-key", "api-key")
    assert env["ECHO_DATABASE_URL"] == secret("db", "dsn")
    assert env["ECHO_QDRANT_URL"] == "http://acme-qdrant.tenants.svc:6333"
    assert env["ECHO_EMBEDDING_URL"] == "http://acme-embedding.tenants.svc:7997"
    assert env["ECHO_EMBEDDING_MODEL"] == "BAAI/bge-m3"
    assert env["ECHO_EMBEDDING_DIMENSION"] == "1024"
    assert env["ECHO_VALVES_FILE"] == "/etc/echo/valves/valves.yaml"
    assert env["ECHO_MODEL_THRESHOLDS_FILE"] == "/etc/echo/model-thresholds/model-thresholds.yaml"
    assert env["ECHO_LOG_LEVEL"] == "INFO"
    service = find(manifests, "Service", "acme-hooks")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"][0]["port"] == 9099
    assert service["spec"]["selector"] == hooks["spec"]["selector"]["matchLabels"]
    pdb = find(manifests, "PodDisruptionBudget", "acme-hooks")
    assert pdb["spec"]["maxUnavailable"] == 1


def test_hooks_options() -> None:
    manifests = rendered(
        {
            "hooks": {
                "replicas": 4,
                "image": "registry.local/echo:dev",
                "resources": {"requests": {"cpu": 1, "memory": "1Gi"}},
                "podDisruptionBudget": {"maxUnavailable": 2},
                "apiKeySecretRef": {"name": "owui-key", "key": "token"},
                "serviceType": "LoadBalancer",
            },
            "logLevel": "DEBUG",
        }
    )
    hooks = find(manifests, "Deployment", "acme-hooks")
    assert hooks["spec"]["replicas"] == 4
    assert container(hooks)["image"] == "registry.local/echo:dev"
    assert container(hooks)["resources"] == {"requests": {"cpu": 1, "memory": "1Gi"}}
    assert env_of(hooks)["ECHO_API_KEY"] == secret("owui-key", "token")
    assert env_of(hooks)["ECHO_LOG_LEVEL"] == "DEBUG"
    assert find(manifests, "Service", "acme-hooks")["spec"]["type"] == "LoadBalancer"
    assert find(manifests, "PodDisruptionBudget", "acme-hooks")["spec"]["maxUnavailable"] == 2


def test_no_admin_key_unless_given() -> None:
    """Without hooks.adminKeySecretRef the memory-management API is off: nothing mounts ECHO_ADMIN_KEY."""
    for manifest in rendered():
        if manifest["kind"] in WORKLOADS:
            assert "ECHO_ADMIN_KEY" not in env_of(manifest), manifest["metadata"]["name"]


def test_the_admin_key_reaches_the_hooks_only() -> None:
    manifests = rendered({"hooks": {"adminKeySecretRef": {"name": "acme-admin"}}})
    hooks = env_of(find(manifests, "Deployment", "acme-hooks"))
    assert hooks["ECHO_ADMIN_KEY"] == secret("acme-admin", "admin-key")
    assert hooks["ECHO_API_KEY"] == secret("acme-api-key", "api-key")  # the key Open WebUI holds, apart
    for manifest in manifests:
        if manifest["kind"] in WORKLOADS and manifest["metadata"]["name"] != "acme-hooks":
            assert "ECHO_ADMIN_KEY" not in env_of(manifest), manifest["metadata"]["name"]
    custom = rendered({"hooks": {"adminKeySecretRef": {"name": "ops", "key": "token"}}})
    assert env_of(find(custom, "Deployment", "acme-hooks"))["ECHO_ADMIN_KEY"] == secret("ops", "token")


@pytest.mark.parametrize(
    "hooks",
    [
        {"apiKeySecretRef": {"name": "keys", "key": "k"}, "adminKeySecretRef": {"name": "keys", "key": "k"}},
        {"adminKeySecretRef": {"name": "acme-api-key", "key": "api-key"}},  # the generated one
    ],
)
def test_the_admin_key_is_never_the_hooks_key(hooks: dict[str, Any]) -> None:
    """The same Secret key for both would give Open WebUI's key the power to list and forget users
    (and the services refuse to start with equal keys)."""
    with pytest.raises(render.InvalidSpec, match=r"hooks\.adminKeySecretRef.* must differ from") as caught:
        render.render("acme", "tenants", merged(MINIMAL, {"hooks": hooks}))
    assert "the key Open WebUI holds" in str(caught.value)
    other = merged(MINIMAL, {"hooks": {**hooks, "adminKeySecretRef": {"name": "keys", "key": "admin"}}})
    render.render("acme", "tenants", other)  # another key of the same Secret is fine


def test_hooks_autoscaling_owns_the_replica_count() -> None:
    manifests = rendered(
        {
            "hooks": {
                "autoscaling": {
                    "enabled": True,
                    "minReplicas": 3,
                    "maxReplicas": 9,
                    "targetCpuUtilization": 55,
                }
            }
        }
    )
    assert "replicas" not in find(manifests, "Deployment", "acme-hooks")["spec"]
    hpa = find(manifests, "HorizontalPodAutoscaler", "acme-hooks")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "acme-hooks"}
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 9)
    assert hpa["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 55}


def test_hooks_without_pdb() -> None:
    manifests = rendered({"hooks": {"podDisruptionBudget": {"enabled": False}}})
    assert ("PodDisruptionBudget", "acme-hooks") not in ids(manifests)


# --- distiller ---------------------------------------------------------------------------------


def test_distiller_scales_with_keda_on_pending_jobs_by_default() -> None:
    manifests = rendered(
        {"distiller": {"concurrency": 7, "minReplicas": 2, "maxReplicas": 8, "targetPendingJobs": 25}}
    )
    distiller = find(manifests, "Deployment", "acme-distiller")
    assert "replicas" not in distiller["spec"]
    assert container(distiller)["args"] == ["worker", "--concurrency", "7"]
    env = env_of(distiller)
    assert env["ECHO_WORKER_METRICS_PORT"] == "9101"
    assert env["ECHO_HOST"] == "0.0.0.0"
    assert "ECHO_API_KEY" not in env
    assert ("HorizontalPodAutoscaler", "acme-distiller") not in ids(manifests)
    scaled = find(manifests, "ScaledObject", "acme-distiller")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "acme-distiller"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 8)
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == SCALE_DOWN_SLOWLY
    assert spec["triggers"] == [
        {
            "type": "prometheus",
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
                "query": TENANT_PENDING_JOBS,
                "threshold": "25",
                # no series = Prometheus does not scrape the distillers: an error to see, not a 0
                "ignoreNullValues": "false",
            },
        }
    ]


def test_distiller_fixed_replicas_without_autoscaling() -> None:
    manifests = rendered({"distiller": {"autoscaling": False, "replicas": 3}})
    assert find(manifests, "Deployment", "acme-distiller")["spec"]["replicas"] == 3
    assert not {("HorizontalPodAutoscaler", "acme-distiller"), ("ScaledObject", "acme-distiller")} & ids(
        manifests
    )


def test_distiller_keda_reads_the_prometheus_it_is_given() -> None:
    address = "http://prometheus.obs.svc:9090"
    manifests = rendered({"distiller": {"prometheusAddress": address, "maxReplicas": 6}})
    scaled = find(manifests, "ScaledObject", "acme-distiller")
    assert scaled["spec"]["maxReplicaCount"] == 6
    assert scaled["spec"]["triggers"][0]["metadata"]["serverAddress"] == address


def test_distiller_hpa_fallback_reads_the_prometheus_adapter_metric() -> None:
    manifests = rendered(
        {"distiller": {"keda": False, "minReplicas": 2, "maxReplicas": 8, "targetPendingJobs": 25}}
    )
    assert ("ScaledObject", "acme-distiller") not in ids(manifests)
    hpa = find(manifests, "HorizontalPodAutoscaler", "acme-distiller")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "acme-distiller"}
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 8)
    assert hpa["behavior"] == SCALE_DOWN_SLOWLY
    (metric,) = hpa["metrics"]
    assert metric["type"] == "External"
    # the adapter's external rule (chart value prometheusAdapterRules) answers for this name, in the
    # HPA's namespace, selected by the tenant label the ServiceMonitors add
    assert metric["external"]["metric"] == {
        "name": "echo_jobs_pending",
        "selector": {"matchLabels": {"tenant": "acme"}},
    }
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "25"}


def test_pending_jobs_query_sums_the_kinds_of_the_max_over_workers() -> None:
    """Every worker reports the whole queue: a sum over pods would count it once per replica."""
    tenant = Tenant("acme", "tenants", parse_spec("acme", MINIMAL))
    assert render_distiller.pending_jobs_query(tenant) == TENANT_PENDING_JOBS


def test_the_adapter_rule_asks_prometheus_what_keda_asks() -> None:
    """The chart's prometheus-adapter rule is this template (tests/integration/test_chart.py)."""
    query = render_distiller.ADAPTER_METRICS_QUERY
    assert query.count("<<.Series>>{<<.LabelMatchers>>}") == 1
    substituted = query.replace("<<.Series>>", "echo_jobs_pending").replace(
        "<<.LabelMatchers>>", 'namespace="tenants",tenant="acme"'
    )
    assert substituted == TENANT_PENDING_JOBS


# --- embedding ---------------------------------------------------------------------------------


def test_embedding_on_gpu_by_default() -> None:
    manifests = rendered()
    embedding = find(manifests, "Deployment", "acme-embedding")
    main, pod = container(embedding), embedding["spec"]["template"]["spec"]
    assert main["image"] == "ghcr.io/echo-k8s/echo-embedding:0.1.0"
    assert main["args"] == ["v2", "--model-id", "BAAI/bge-m3", "--port", "7997", "--device", "cuda"]
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert main["startupProbe"]["httpGet"]["path"] == "/health"
    assert main["startupProbe"]["periodSeconds"] * main["startupProbe"]["failureThreshold"] == 900
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    assert volumes["model-cache"]["emptyDir"] == {"sizeLimit": "20Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in main["volumeMounts"]
    assert embedding["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    service = find(manifests, "Service", "acme-embedding")
    assert service["spec"]["ports"][0]["port"] == 7997


def test_embedding_gpu_scheduling_options() -> None:
    manifests = rendered(
        {
            "embedding": {
                "gpu": {"count": 2, "resourceName": "amd.com/gpu"},
                "nodeSelector": {"pool": "gpu"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}
                ],
                "runtimeClassName": "nvidia",
                "startupTimeoutSeconds": 95,
                "shmSize": "4Gi",
                "modelCacheSize": "50Gi",
                "replicas": 2,
                "image": "registry.local/infinity:1",
            }
        }
    )
    embedding = find(manifests, "Deployment", "acme-embedding")
    pod, main = embedding["spec"]["template"]["spec"], container(embedding)
    assert main["resources"]["limits"]["amd.com/gpu"] == "2"
    assert "nvidia.com/gpu" not in main["resources"]["limits"]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}
    ]
    assert pod["runtimeClassName"] == "nvidia"
    assert main["startupProbe"]["failureThreshold"] == 10  # ceil(95 / 10)
    assert main["image"] == "registry.local/infinity:1"
    assert embedding["spec"]["replicas"] == 2
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["sizeLimit"] == "4Gi"
    assert volumes["model-cache"]["emptyDir"]["sizeLimit"] == "50Gi"


def test_embedding_on_cpu() -> None:
    manifests = rendered({"embedding": {"gpu": {"count": 0}, "model": "small/model", "dimension": 384}})
    embedding = find(manifests, "Deployment", "acme-embedding")
    assert container(embedding)["args"][-1] == "cpu"
    assert "nvidia.com/gpu" not in container(embedding)["resources"].get("limits", {})
    assert "tolerations" not in embedding["spec"]["template"]["spec"]
    assert env_of(find(manifests, "Deployment", "acme-hooks"))["ECHO_EMBEDDING_DIMENSION"] == "384"


def test_external_embedding_renders_no_server() -> None:
    manifests = rendered({"embedding": {"externalUrl": "https://embed.example.com/v1"}})
    assert not {("Deployment", "acme-embedding"), ("Service", "acme-embedding")} & ids(manifests)
    env = env_of(find(manifests, "Deployment", "acme-distiller"))
    assert env["ECHO_EMBEDDING_URL"] == "https://embed.example.com/v1"


# --- qdrant ------------------------------------------------------------------------------------


def test_managed_qdrant_statefulset() -> None:
    manifests = rendered(
        {"qdrant": {"managed": {"storage": {"size": "25Gi", "storageClassName": "ssd"}, "image": "q:1"}}}
    )
    qdrant = find(manifests, "StatefulSet", "acme-qdrant")
    spec = qdrant["spec"]
    assert spec["serviceName"] == "acme-qdrant"
    claim = spec["volumeClaimTemplates"][0]["spec"]
    assert claim["resources"]["requests"]["storage"] == "25Gi"
    assert claim["storageClassName"] == "ssd"
    assert spec["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    assert container(qdrant)["image"] == "q:1"
    assert container(qdrant)["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert spec["template"]["spec"]["securityContext"]["runAsUser"] == 1000
    service = find(manifests, "Service", "acme-qdrant")
    assert service["spec"]["clusterIP"] == "None"
    assert [p["port"] for p in service["spec"]["ports"]] == [6333, 6334]


def test_managed_qdrant_volume_can_go_with_the_tenant() -> None:
    manifests = rendered({"qdrant": {"managed": {"storage": {"retainOnDelete": False}}}})
    policy = find(manifests, "StatefulSet", "acme-qdrant")["spec"]["persistentVolumeClaimRetentionPolicy"]
    assert policy["whenDeleted"] == "Delete"
    assert (
        "storageClassName"
        not in find(manifests, "StatefulSet", "acme-qdrant")["spec"]["volumeClaimTemplates"][0]["spec"]
    )


def test_external_qdrant_with_api_key() -> None:
    changes = {
        "qdrant": {"externalUrl": "https://qdrant.example.com:6333", "apiKeySecretRef": {"name": "qk"}}
    }
    spec = merged(MINIMAL, {})
    spec["qdrant"] = changes["qdrant"]
    manifests = render.render("acme", "tenants", spec)
    validate_all(manifests)
    assert not {("StatefulSet", "acme-qdrant"), ("Service", "acme-qdrant")} & ids(manifests)
    env = env_of(find(manifests, "Deployment", "acme-hooks"))
    assert env["ECHO_QDRANT_URL"] == "https://qdrant.example.com:6333"
    assert env["ECHO_QDRANT_API_KEY"] == secret("qk", "api-key")


# --- llm, database, openwebui, images ------------------------------------------------------------


def test_gemini_provider_env() -> None:
    llm = {"provider": "gemini", "models": ["gemini-2.5-pro"], "apiKeySecretRef": {"name": "g", "key": "k"}}
    manifests = rendered({"llm": llm | {"baseUrl": "http://fake-gemini:8080"}})
    env = env_of(find(manifests, "Deployment", "acme-hooks"))
    assert env["ECHO_LLM_PROVIDER"] == "gemini"
    assert env["ECHO_LLM_MODEL"] == "gemini-2.5-pro"
    assert env["ECHO_PIPE_MODELS"] == "gemini-2.5-pro"
    assert env["ECHO_GEMINI_API_KEY"] == secret("g", "k")
    assert env["ECHO_GEMINI_BASE_URL"] == "http://fake-gemini:8080"
    assert not any(name.startswith("ECHO_OPENAI") for name in env)


def test_openai_provider_env() -> None:
    llm = {"provider": "openai", "models": ["deepseek-chat"], "baseUrl": "http://vllm:8000/v1"}
    manifests = rendered({"llm": llm | {"apiKeySecretRef": {"name": "o"}}})
    env = env_of(find(manifests, "Deployment", "acme-distiller"))
    assert env["ECHO_LLM_PROVIDER"] == "openai"
    assert env["ECHO_LLM_MODEL"] == "deepseek-chat"
    assert env["ECHO_OPENAI_BASE_URL"] == "http://vllm:8000/v1"
    assert env["ECHO_OPENAI_API_KEY"] == secret("o", "api-key")
    assert "ECHO_PIPE_MODELS" not in env
    assert "ECHO_GEMINI_API_KEY" not in env


def test_offline_provider_needs_no_key() -> None:
    env = env_of(find(rendered(), "Deployment", "acme-hooks"))
    assert env["ECHO_LLM_PROVIDER"] == "offline"
    assert not any(name.endswith("_API_KEY") and name != "ECHO_API_KEY" for name in env)


def test_database_secret_key() -> None:
    manifests = rendered({"database": {"dsnSecretRef": {"name": "pg", "key": "url"}}})
    assert env_of(find(manifests, "Deployment", "acme-hooks"))["ECHO_DATABASE_URL"] == secret("pg", "url")


def test_openwebui_files_api_env() -> None:
    owui = {"url": "http://owui.web.svc:8080", "apiKeySecretRef": {"name": "owui"}}
    env = env_of(find(rendered({"openwebui": owui}), "Deployment", "acme-distiller"))
    assert env["ECHO_OPENWEBUI_URL"] == "http://owui.web.svc:8080"
    assert env["ECHO_OPENWEBUI_API_KEY"] == secret("owui", "api-key")


def test_images_defaults_pull_policy_and_secrets() -> None:
    images = {
        "echo": {"repository": "r.local/echo", "tag": "t1"},
        "embedding": {"repository": "r.local/emb", "tag": "t2"},
        "qdrant": {"repository": "r.local/q", "tag": "t3"},
        "pullPolicy": "Always",
        "pullSecrets": ["regcred"],
    }
    manifests = rendered({"images": images})
    expected = {
        "acme-hooks": "r.local/echo:t1",
        "acme-distiller": "r.local/echo:t1",
        "acme-embedding": "r.local/emb:t2",
        "acme-qdrant": "r.local/q:t3",
    }
    for workload in (m for m in manifests if m["kind"] in WORKLOADS):
        assert container(workload)["image"] == expected[workload["metadata"]["name"]]
        assert container(workload)["imagePullPolicy"] == "Always"
        assert workload["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]


# --- valves and model thresholds ------------------------------------------------------------------


def test_inline_valves_and_thresholds_become_mounted_config_maps() -> None:
    valves = {"echo_memory": {"WINDOW_SIZE": 7}, "echo_compression": {"keep_last": 4}}
    thresholds = {"my-model": {"compression_threshold_tokens": 5000, "max_context_tokens": 8000}}
    manifests = rendered({"valves": {"inline": valves}, "modelThresholds": {"inline": thresholds}})
    assert yaml.safe_load(find(manifests, "ConfigMap", "acme-valves")["data"]["valves.yaml"]) == valves
    data = find(manifests, "ConfigMap", "acme-model-thresholds")["data"]["model-thresholds.yaml"]
    assert yaml.safe_load(data) == thresholds
    for name in ("acme-hooks", "acme-distiller"):
        workload = find(manifests, "Deployment", name)
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        assert volumes["valves"]["configMap"] == {"name": "acme-valves"}
        assert volumes["model-thresholds"]["configMap"] == {"name": "acme-model-thresholds"}
        mounts = {m["name"]: m for m in container(workload)["volumeMounts"]}
        assert "subPath" not in mounts["valves"]  # subPath mounts never see ConfigMap updates
        assert mounts["valves"]["mountPath"] == "/etc/echo/valves"


def test_empty_config_maps_without_inline_values() -> None:
    manifests = rendered()
    assert yaml.safe_load(find(manifests, "ConfigMap", "acme-valves")["data"]["valves.yaml"]) == {}


def test_config_maps_of_the_user_are_mounted_instead() -> None:
    manifests = rendered(
        {
            "valves": {"configMapRef": {"name": "my-valves", "key": "v.json"}},
            "modelThresholds": {"configMapRef": {"name": "my-thresholds", "key": "t.yaml"}},
        }
    )
    assert not {("ConfigMap", "acme-valves"), ("ConfigMap", "acme-model-thresholds")} & ids(manifests)
    hooks = find(manifests, "Deployment", "acme-hooks")
    volumes = {v["name"]: v for v in hooks["spec"]["template"]["spec"]["volumes"]}
    assert volumes["valves"]["configMap"] == {"name": "my-valves"}
    assert volumes["model-thresholds"]["configMap"] == {"name": "my-thresholds"}
    assert env_of(hooks)["ECHO_VALVES_FILE"] == "/etc/echo/valves/v.json"
    assert env_of(hooks)["ECHO_MODEL_THRESHOLDS_FILE"] == "/etc/echo/model-thresholds/t.yaml"


# --- network policies and monitoring --------------------------------------------------------------


def test_network_policies_open_only_the_hooks() -> None:
    manifests = rendered()
    tenant = find(manifests, "NetworkPolicy", "acme-tenant")["spec"]
    own = {"app.kubernetes.io/instance": "acme", "app.kubernetes.io/managed-by": "echo-operator"}
    assert tenant["podSelector"] == {"matchLabels": own}
    assert tenant["ingress"] == [{"from": [{"podSelector": {"matchLabels": own}}]}]
    assert tenant["policyTypes"] == ["Ingress"]  # egress stays open (LLM API, PostgreSQL)
    hooks = find(manifests, "NetworkPolicy", "acme-hooks-ingress")["spec"]
    assert hooks["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "hooks"
    assert hooks["ingress"] == [{"ports": [{"protocol": "TCP", "port": 9099}]}]


def test_network_policy_peers_for_the_hooks() -> None:
    peers = [
        {"namespaceSelector": {"matchLabels": {"team": "web"}}},
        {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
    ]
    manifests = rendered({"networkPolicy": {"hooksFrom": peers}})
    assert find(manifests, "NetworkPolicy", "acme-hooks-ingress")["spec"]["ingress"][0]["from"] == peers


OPENWEBUI_PODS = {"app.kubernetes.io/component": "open-webui"}


def hooks_peers(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (rule,) = find(manifests, "NetworkPolicy", "acme-hooks-ingress")["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9099}]
    return rule["from"]


def test_the_hooks_can_be_reached_by_open_webuis_pods_only() -> None:
    """networkPolicy.openwebui: one peer with both selectors, so both must match (its pods, in its
    namespace), not either."""
    manifests = rendered({"networkPolicy": {"openwebui": {"namespace": "chat", "podLabels": OPENWEBUI_PODS}}})
    assert hooks_peers(manifests) == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "chat"}},
            "podSelector": {"matchLabels": OPENWEBUI_PODS},
        }
    ]
    # the tenant's own pods still reach each other; nothing else is opened
    tenant = find(manifests, "NetworkPolicy", "acme-tenant")["spec"]
    assert tenant["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": tenant["podSelector"]["matchLabels"]}}]}
    ]


def test_open_webui_in_the_tenants_namespace_and_more_peers() -> None:
    """No namespace: Open WebUI's pods in the tenant's namespace; hooksFrom adds peers beside it."""
    extra = [{"ipBlock": {"cidr": "10.8.0.0/16"}}]
    manifests = rendered({"networkPolicy": {"openwebui": {"podLabels": OPENWEBUI_PODS}, "hooksFrom": extra}})
    assert hooks_peers(manifests) == [{"podSelector": {"matchLabels": OPENWEBUI_PODS}}, *extra]


def test_open_webui_needs_its_pod_labels() -> None:
    with pytest.raises(render.InvalidSpec, match=r"spec\.networkPolicy\.openwebui\.podLabels"):
        render.render(
            "acme", "tenants", merged(MINIMAL, {"networkPolicy": {"openwebui": {"namespace": "chat"}}})
        )
    with pytest.raises(render.InvalidSpec, match=r"spec\.networkPolicy\.openwebui\.podLabels"):
        render.render("acme", "tenants", merged(MINIMAL, {"networkPolicy": {"openwebui": {"podLabels": {}}}}))


def test_network_policies_can_be_disabled() -> None:
    assert not [m for m in rendered({"networkPolicy": {"enabled": False}}) if m["kind"] == "NetworkPolicy"]


def test_service_monitors_metrics_service_and_scrape_policy() -> None:
    manifests = rendered(
        {"monitoring": {"serviceMonitor": True, "interval": "15s", "labels": {"release": "kps"}}}
    )
    monitors = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ServiceMonitor"}
    assert set(monitors) == {"acme-hooks", "acme-distiller", "acme-embedding", "acme-qdrant"}
    endpoint = monitors["acme-distiller"]["spec"]["endpoints"][0]
    assert endpoint["port"] == "metrics"
    assert endpoint["interval"] == "15s"
    assert {"action": "replace", "targetLabel": "tenant", "replacement": "acme"} in endpoint["relabelings"]
    assert monitors["acme-hooks"]["metadata"]["labels"]["release"] == "kps"
    assert find(manifests, "Service", "acme-distiller")["spec"]["ports"][0]["port"] == 9101
    scrape = find(manifests, "NetworkPolicy", "acme-metrics")["spec"]["ingress"][0]
    assert scrape["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


def test_service_monitors_skip_external_services() -> None:
    spec = merged(
        MINIMAL, {"monitoring": {"serviceMonitor": True}, "embedding": {"externalUrl": "http://e:1"}}
    )
    spec["qdrant"] = {"externalUrl": "http://q:6333"}
    manifests = render.render("acme", "tenants", spec)
    assert {m["metadata"]["name"] for m in manifests if m["kind"] == "ServiceMonitor"} == {
        "acme-hooks",
        "acme-distiller",
    }


def test_no_monitoring_children_unless_asked() -> None:
    manifests = rendered()
    assert not [m for m in manifests if m["kind"] == "ServiceMonitor"]
    assert ("Service", "acme-distiller") not in ids(manifests)
    assert ("ConfigMap", "acme-dashboards") not in ids(manifests)


def test_dashboards_get_tenant_uids_and_titles() -> None:
    boards = {"queue.json": json.dumps({"uid": "echo-queue", "title": "ECHO queue", "panels": []})}
    manifests = rendered({"monitoring": {"dashboards": True}}, dashboards=boards)
    config_map = find(manifests, "ConfigMap", "acme-dashboards")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(config_map["data"]["queue.json"])
    assert board["uid"] == "acme-queue"
    assert board["title"] == "ECHO queue (tenants/acme)"
    assert board["panels"] == []
