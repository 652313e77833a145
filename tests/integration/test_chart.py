"""The Helm chart charts/echo-operator, rendered by the real helm binary and checked object by object.

helm 4.1.4 comes from `make tools` (scripts/helm-tools.sh, into tools/bin); without it these tests
skip and say so. Every rendered object is validated against the Kubernetes 1.33 OpenAPI schemas
(kubernetes-validate, strict: an unknown field is an error), for the default values and for the
values files under charts/echo-operator/ci/ that turn every toggle on.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "echo-operator"
HELM = ROOT / "tools" / "bin" / "helm"
KUBERNETES_VERSION = "1.33"  # the kubectl shipped with helm in tools/ (1.33.9)
NAMESPACE = "echo-system"
RELEASE = "echo"
VALUES_SETS = {
    "defaults": [],
    "all-on": ["ci/all-on-values.yaml"],
    "namespaced": ["ci/namespaced-values.yaml"],
}
# What the operator calls (echo_operator.apply: get, list by label, server-side apply = patch, create
# when absent, delete when pruning; kopf watches EchoDeployments, Deployments and StatefulSets).
MANAGE = {"get", "list", "create", "patch", "delete"}
# The operator's permissions on the objects it reconciles (per namespace; cluster-wide in -A mode).
EXPECTED_NAMESPACED_RULES = {
    ("echo.dev", "echodeployments"): {"get", "list", "watch", "patch"},
    ("echo.dev", "echodeployments/status"): {"get", "patch"},
    ("echo.dev", "echodeployments/finalizers"): {"update"},
    ("", "configmaps"): MANAGE,
    ("", "secrets"): MANAGE,
    ("", "services"): MANAGE,
    ("apps", "deployments"): MANAGE | {"watch"},
    ("apps", "statefulsets"): MANAGE | {"watch"},
    ("batch", "jobs"): MANAGE | {"watch"},  # the Open WebUI connect Job, watched for its outcome
    ("policy", "poddisruptionbudgets"): MANAGE,
    ("autoscaling", "horizontalpodautoscalers"): MANAGE,
    ("networking.k8s.io", "networkpolicies"): MANAGE,
    ("monitoring.coreos.com", "servicemonitors"): MANAGE,
    ("keda.sh", "scaledobjects"): MANAGE,
    ("", "events"): {"create"},
    ("", "pods"): {"get", "list"},  # read only: the kubelet's reason in a not-ready condition
}
PEERING = {"get", "list", "watch", "patch"}
READ = {"get", "list", "watch"}

# kubernetes-validate knows the built-in kinds only: the Prometheus Operator's ServiceMonitor is
# checked against the subset of its schema (monitoring.coreos.com/v1) that the chart uses.
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": "^(0|(([0-9]+)(ms|s|m|h))+)$"},
                            "scrapeTimeout": {"type": "string", "pattern": "^(0|(([0-9]+)(ms|s|m|h))+)$"},
                        },
                    },
                },
            },
        },
    },
}


def _need_helm() -> None:
    if not (HELM.is_file() and HELM.stat().st_mode & 0o111):
        pytest.skip(
            f"helm is not in {HELM.parent}: run `make tools` (scripts/helm-tools.sh) to fetch helm 4.1.4"
        )


def _helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    _need_helm()
    # No kubeconfig, no repositories, no cache outside the test: rendering must not need a cluster.
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "KUBECONFIG": "/dev/null"}
    result = subprocess.run(
        [str(HELM), *args], capture_output=True, text=True, timeout=60, env=env, cwd=CHART, check=False
    )
    if check and result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@cache
def _render(values_set: str, *extra: str) -> tuple[dict[str, Any], ...]:
    args = ["template", RELEASE, ".", "--namespace", NAMESPACE, "--include-crds"]
    for path in VALUES_SETS[values_set]:
        args += ["--values", path]
    out = _helm(*args, *extra).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def _rendered(values_set: str = "defaults", *extra: str) -> list[dict[str, Any]]:
    return list(_render(values_set, *extra))


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return found


def _rules(role: dict[str, Any]) -> Iterator[tuple[tuple[str, str], set[str]]]:
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                yield (group, resource), set(rule["verbs"])


def _grants(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for key, verbs in _rules(role):
        grants.setdefault(key, set()).update(verbs)
    return grants


# -- helm itself ------------------------------------------------------------------------------------


@pytest.mark.parametrize("values_set", sorted(VALUES_SETS))
def test_helm_lint_is_clean_in_strict_mode(values_set: str) -> None:
    args = ["lint", "--strict", "."]
    for path in VALUES_SETS[values_set]:
        args += ["--values", path]
    result = _helm(*args)
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout
    assert "[ERROR]" not in result.stdout


def test_chart_metadata_matches_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "echo-operator"
    assert chart["appVersion"] == "0.1.0" == project["version"]


# -- schema validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("values_set", sorted(VALUES_SETS))
def test_every_rendered_object_is_valid_for_kubernetes(values_set: str) -> None:
    docs = _rendered(values_set)
    errors = []
    for doc in docs:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] == "ServiceMonitor":
            validator = jsonschema.Draft202012Validator(SERVICE_MONITOR_SCHEMA)
            errors += [
                f"{name}: {'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)
            ]
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{name}: {'.'.join(map(str, error.path))}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            errors.append(f"{name}: {error.message}")
    assert not errors, "\n".join(errors)
    kinds = {doc["kind"] for doc in docs}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service"} <= kinds


def _grafana_configmaps(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]]


def test_every_toggle_renders_its_objects() -> None:
    docs = _rendered("all-on")
    assert [doc["kind"] for doc in docs].count("ServiceMonitor") == 1
    assert len(_grafana_configmaps(docs)) == len(list((CHART / "dashboards").glob("*.json"))) == 6
    defaults = _rendered()
    assert "ServiceMonitor" not in {doc["kind"] for doc in defaults}
    assert not _grafana_configmaps(defaults)


def _crd(*extra: str) -> dict[str, Any]:
    return _one(_rendered("defaults", *extra), "CustomResourceDefinition")


def test_the_crd_is_a_template_that_helm_upgrades_and_uninstall_keeps() -> None:
    """Helm installs crds/ once and never upgrades it: the CRD is a template of the release instead
    (templates/crd.yaml), annotated to survive `helm uninstall`."""
    assert not list((CHART / "crds").glob("*")), "the CRD is templates/crd.yaml, not crds/"
    crd = _crd()
    assert crd["metadata"]["name"] == "echodeployments.echo.dev"
    assert crd["spec"]["names"]["kind"] == "EchoDeployment"
    assert "echo" in crd["spec"]["names"].get("shortNames", [])
    assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert "annotations" not in _crd("--set", "crds.keep=false")["metadata"]
    kinds = {doc["kind"] for doc in _rendered("defaults", "--set", "crds.enabled=false")}
    assert "CustomResourceDefinition" not in kinds


@pytest.mark.parametrize(
    ("kube_version", "cel"), [("1.20.2", False), ("1.24.9", False), ("1.25.0", True), ("1.33.0", True)]
)
def test_the_crd_carries_its_cel_rules_only_where_the_server_knows_them(kube_version: str, cel: bool) -> None:
    """A 1.20 API server refuses a whole CRD over `x-kubernetes-validations` (field not declared in
    schema); the operator checks every rule itself, so older servers get the CRD without them."""
    crd_module = pytest.importorskip("echo_operator.crd")
    crd = _crd("--kube-version", kube_version)
    assert ("x-kubernetes-validations" in json.dumps(crd)) is cel
    assert crd["spec"] == crd_module.build_crd(cel=cel)["spec"]  # nothing lost through fromYaml/toYaml
    generated = crd_module.build_crd(cel=cel)["metadata"]["labels"]
    assert generated.items() <= crd["metadata"]["labels"].items()


def test_the_chart_files_are_the_generated_crds() -> None:
    crd_module = pytest.importorskip("echo_operator.crd")
    for output in crd_module.OUTPUTS:
        if output.path.parts[:2] == ("charts", "echo-operator"):
            assert (ROOT / output.path).read_text() == crd_module.render_yaml(cel=output.cel), output.path


@pytest.mark.parametrize("values_set", sorted(VALUES_SETS))
def test_the_chart_installs_on_kubernetes_1_20(values_set: str) -> None:
    """Chart.yaml's kubeVersion admits 1.20, and everything rendered for it is in an API 1.20 serves."""
    served = {
        "v1",
        "apps/v1",
        "rbac.authorization.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "monitoring.coreos.com/v1",  # with the Prometheus Operator
    }
    docs = _rendered(values_set, "--kube-version", "1.20.2")
    assert {doc["apiVersion"] for doc in docs} <= served
    assert yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"] == ">=1.20.0-0"
    refused = _helm("template", RELEASE, ".", "--kube-version", "1.19.16", check=False)
    assert refused.returncode != 0
    assert "kubeVersion" in refused.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "unknownKey=1"], "unknownKey"),
        (["--set", "image.tag=latest"], "/image/tag"),
        (["--set", "image.pullPolicy=Sometimes"], "/image/pullPolicy"),
        (["--set", "watch.namespaces[0]=tenant-a"], "/watch/namespaces"),
        (["--set", "watch.allNamespaces=false", "--set", "watch.namespaces[0]=Not_A_Namespace"], "/watch"),
        (["--set", "ports.metrics=70000"], "/ports/metrics"),
        (["--set", "securityContext.runAsUsr=1"], "runAsUsr"),
        (["--set", "serviceMonitor.interval=soon"], "/serviceMonitor/interval"),
        (["--set", "operator.verbose=maybe"], "/operator/verbose"),
        (["--set", "ports.metrics=8080"], "ports.health and ports.metrics must differ"),
        (["--set", "resources.limits.memory=lots"], "/resources/limits/memory"),
        (["--set", "prometheusAdapterRules.namespace=Not_A_Namespace"], "/prometheusAdapterRules/namespace"),
        (["--set", "prometheusAdapterRules.enable=true"], "enable"),
        (["--set", "crds.enable=false"], "enable"),
        (["--set", "crds.keep=maybe"], "/crds/keep"),
    ],
)
def test_the_values_schema_refuses_mistakes(values: list[str], message: str) -> None:
    result = _helm("template", RELEASE, ".", *values, check=False)
    assert result.returncode != 0
    assert message in result.stderr


def test_the_values_schema_is_a_valid_draft7_schema_that_accepts_every_values_file() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(defaults)


def test_a_service_monitor_without_its_service_is_refused() -> None:
    result = _helm(
        "template",
        RELEASE,
        ".",
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "metrics.service.enabled=false",
        check=False,
    )
    assert result.returncode != 0
    assert "metrics.service.enabled" in result.stderr


# -- the operator Deployment ------------------------------------------------------------------------


def _operator(values_set: str = "defaults", *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    deployment = _one(_rendered(values_set, *extra), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container


def test_one_operator_replaced_by_recreate() -> None:
    deployment, _ = _operator()
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_the_operator_runs_cluster_wide_with_a_liveness_endpoint() -> None:
    _, container = _operator()
    assert container["args"] == [
        "operator",
        "--all-namespaces",
        "--liveness=http://0.0.0.0:8080/healthz",
        "--metrics-port=9090",
        "--dashboards-dir=/etc/echo-operator/dashboards",
    ]
    assert container["image"] == "ghcr.io/echo-k8s/echo-operator:0.1.0"
    probe = container["livenessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == ("/healthz", "health")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "metrics": 9090}


def test_a_namespaced_operator_gets_one_flag_per_namespace() -> None:
    _, container = _operator("namespaced")
    assert container["args"][:4] == [
        "operator",
        "--namespace=tenant-a",
        "--namespace=tenant-b",
        "--liveness=http://0.0.0.0:8080/healthz",
    ]
    _, alone = _operator("defaults", "--set", "watch.allNamespaces=false")
    assert alone["args"][1] == f"--namespace={NAMESPACE}"


@pytest.mark.parametrize("values_set", sorted(VALUES_SETS))
def test_the_operator_pod_is_locked_down(values_set: str) -> None:
    deployment, container = _operator(values_set)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert container["resources"]["limits"]["memory"]


def test_pod_placement_and_extras_pass_through() -> None:
    deployment, container = _operator("all-on")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert "nodeAffinity" in pod["affinity"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["serviceAccountName"] == "echo-operator"
    assert container["image"] == "registry.example.com/echo/echo-operator:0.1.0"
    assert container["args"][-2:] == ["--peering=echo", "--verbose"]
    assert {"HTTPS_PROXY", "NODE_NAME", "POD_NAMESPACE"} <= {e["name"] for e in container["env"]}
    _, extra = _operator("defaults", "--set", "operator.extraArgs[0]=--verbose")
    assert extra["args"][-1] == "--verbose"


def test_labels_follow_the_kubernetes_conventions() -> None:
    for doc in _rendered("all-on"):
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "echo-operator", doc["kind"]
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"


# -- RBAC -------------------------------------------------------------------------------------------


def test_cluster_wide_rbac_is_exactly_what_the_operator_uses() -> None:
    docs = _rendered()
    role = _one(docs, "ClusterRole")
    expected = {**EXPECTED_NAMESPACED_RULES, ("apiextensions.k8s.io", "customresourcedefinitions"): READ}
    assert _grants(role) == expected  # standalone kopf: no peering objects
    binding = _one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    sa = _one(docs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}
    ]
    assert "Role" not in {doc["kind"] for doc in docs}


def test_namespaced_rbac_keeps_writes_inside_the_watched_namespaces() -> None:
    docs = _rendered("namespaced")
    cluster_role = _one(docs, "ClusterRole")
    assert _grants(cluster_role) == {
        ("apiextensions.k8s.io", "customresourcedefinitions"): READ,
        ("", "namespaces"): READ,
    }
    roles = {doc["metadata"]["namespace"]: doc for doc in docs if doc["kind"] == "Role"}
    bindings = {doc["metadata"]["namespace"]: doc for doc in docs if doc["kind"] == "RoleBinding"}
    assert set(roles) == set(bindings) == {"tenant-a", "tenant-b"}
    for namespace, role in roles.items():
        assert _grants(role) == EXPECTED_NAMESPACED_RULES
        (subject,) = bindings[namespace]["subjects"]
        assert subject["namespace"] == NAMESPACE


@pytest.mark.parametrize("values_set", sorted(VALUES_SETS))
def test_no_wildcards_and_no_privilege_escalation_verbs(values_set: str) -> None:
    for doc in _rendered(values_set):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for (group, resource), verbs in _rules(doc):
            assert "*" not in (group, resource)
            assert "*" not in verbs
            assert not verbs & {"escalate", "bind", "impersonate", "deletecollection"}
            if resource == "customresourcedefinitions":
                assert verbs <= READ  # the operator never changes its own CRD


def test_rbac_covers_every_kind_the_operator_applies() -> None:
    """Cross-check with echo_operator.apply: a new child kind without RBAC fails here, not in a cluster."""
    apply = pytest.importorskip("echo_operator.apply")
    grants = _grants(_one(_rendered(), "ClusterRole"))
    for (api_version, kind), plural in apply.PLURALS.items():
        group = api_version.rpartition("/")[0]
        if kind == "EchoDeployment":
            assert grants[(group, plural)] >= {"get", "list", "watch", "patch"}
            continue
        if kind == "Pod":  # read, never applied
            assert grants[(group, plural)] == {"get", "list"}
            continue
        assert grants.get((group, plural), set()) >= MANAGE, f"{kind}: {grants.get((group, plural))}"
    assert set(EXPECTED_NAMESPACED_RULES) - {("", "events")} <= {
        (api_version.rpartition("/")[0], plural) for (api_version, _), plural in apply.PLURALS.items()
    } | {("echo.dev", "echodeployments/status"), ("echo.dev", "echodeployments/finalizers")}


def test_peering_adds_its_flag_and_its_rbac() -> None:
    docs = _rendered("defaults", "--set", "operator.peering=echo")
    _, container = _operator("defaults", "--set", "operator.peering=echo")
    assert "--peering=echo" in container["args"]
    assert _grants(_one(docs, "ClusterRole"))[("kopf.dev", "clusterkopfpeerings")] == PEERING
    docs = _rendered("namespaced", "--set", "operator.peering=echo")
    for role in (doc for doc in docs if doc["kind"] == "Role"):
        assert _grants(role)[("kopf.dev", "kopfpeerings")] == PEERING


def test_rbac_can_be_left_to_the_cluster_admin() -> None:
    kinds = {doc["kind"] for doc in _rendered("defaults", "--set", "rbac.create=false")}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


# -- monitoring and dashboards ----------------------------------------------------------------------


def test_the_service_monitor_scrapes_the_metrics_service() -> None:
    docs = _rendered("all-on")
    monitor = _one(docs, "ServiceMonitor")
    service = _one(docs, "Service")
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (
        service["spec"]["selector"].items()
        <= _operator("all-on")[0]["spec"]["template"]["metadata"]["labels"].items()
    )


def test_dashboards_become_configmaps_for_the_grafana_sidecar() -> None:
    configmaps = _grafana_configmaps(_rendered("all-on"))
    files = {path.stem: path for path in (CHART / "dashboards").glob("*.json")}
    assert set(files) == {"compression", "memory", "queue", "latency", "context", "shadow"}
    seen = set()
    for configmap in configmaps:
        assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert configmap["metadata"]["namespace"] == "monitoring"
        assert configmap["metadata"]["annotations"] == {"grafana_folder": "ECHO"}
        ((key, text),) = configmap["data"].items()
        stem = key.removeprefix("echo-").removesuffix(".json")
        assert json.loads(text) == json.loads(files[stem].read_text())
        assert len(text.encode()) < 256 * 1024  # far below the 1 MiB ConfigMap limit
        seen.add(stem)
    assert seen == set(files)


def test_the_operator_gets_the_dashboards_for_tenants() -> None:
    deployment, container = _operator()
    directory = "/etc/echo-operator/dashboards"
    assert f"--dashboards-dir={directory}" in container["args"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    source = next(
        d
        for d in _rendered()
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    )
    assert "grafana_dashboard" not in source["metadata"]["labels"]  # the operator's input, not a dashboard
    assert set(source["data"]) == {p.name for p in (CHART / "dashboards").glob("*.json")}
    assert deployment["spec"]["template"]["metadata"]["annotations"]["checksum/dashboards"]
    _, without = _operator("defaults", "--set", "operator.tenantDashboards=false")
    assert not any(a.startswith("--dashboards-dir") for a in without["args"])


# -- autoscaling of the tenants' distillers -------------------------------------------------------


ADAPTER_RULES = f"{RELEASE}-echo-operator-prometheus-adapter-rules"


def _adapter_rules(values_set: str = "all-on", *extra: str) -> list[dict[str, Any]]:
    return [
        doc
        for doc in _rendered(values_set, *extra)
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == ADAPTER_RULES
    ]


def test_the_prometheus_adapter_rule_is_shipped_only_when_asked() -> None:
    assert not _adapter_rules("defaults")
    (configmap,) = _adapter_rules("all-on")
    assert configmap["metadata"]["namespace"] == "monitoring"  # the adapter's, where it can mount it
    (configmap,) = _adapter_rules("defaults", "--set", "prometheusAdapterRules.enabled=true")
    assert configmap["metadata"]["namespace"] == NAMESPACE


def test_the_prometheus_adapter_rule_serves_what_the_distiller_hpa_asks_for() -> None:
    """The HPA fallback (spec.distiller.keda: false) reads the External metric `echo_jobs_pending`
    selected by `tenant`, in its own namespace: the rule must answer exactly that, with the tenant's
    total (the query KEDA runs, tests/unit/test_operator_render.py) and not a sum over workers."""
    render_distiller = pytest.importorskip("echo_operator.render.distiller")
    (configmap,) = _adapter_rules()
    config = yaml.safe_load(configmap["data"]["config.yaml"])  # `rules.existing: <this ConfigMap>`
    values = yaml.safe_load(configmap["data"]["values.yaml"])  # or merged into the adapter's values
    (rule,) = config["externalRules"]
    assert config == {"externalRules": [rule]}
    assert values == {"rules": {"external": [rule]}}
    assert rule["seriesQuery"] == 'echo_jobs_pending{namespace!="",tenant!=""}'
    assert rule["resources"] == {"overrides": {"namespace": {"resource": "namespace"}}}
    assert rule["name"] == {"matches": "^echo_jobs_pending$", "as": render_distiller.METRIC}
    assert rule["metricsQuery"] == render_distiller.ADAPTER_METRICS_QUERY
    assert rule["metricsQuery"].startswith("sum by (namespace, tenant) (max by (namespace, tenant, kind) (")


def test_the_readme_documents_the_shipped_adapter_rule() -> None:
    render_distiller = pytest.importorskip("echo_operator.render.distiller")
    readme = (CHART / "README.md").read_text()
    assert "prometheusAdapterRules.enabled" in readme
    assert render_distiller.ADAPTER_METRICS_QUERY in readme
    assert "rules.existing" in readme


@pytest.mark.parametrize("values_set", sorted(VALUES_SETS))
def test_the_real_cli_accepts_the_operator_args(values_set: str) -> None:
    """`echoctl operator` parses exactly what the chart passes (no unknown flag, no bad value)."""
    from echo.entrypoints import cli

    _, container = _operator(values_set)
    command, *args = container["args"]
    assert command == "operator"
    parsed = cli.main.commands["operator"].make_context("echoctl operator", args).params
    assert parsed["metrics_port"] == 9090
    assert parsed["liveness"] == "http://0.0.0.0:8080/healthz"
    assert parsed["all_namespaces"] != bool(parsed["namespaces"])


def test_notes_say_how_to_create_a_tenant_and_connect_open_webui() -> None:
    result = _helm(
        "install",
        RELEASE,
        ".",
        "--namespace",
        NAMESPACE,
        "--dry-run=client",
        "--values",
        "ci/all-on-values.yaml",
    )
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "wait --for=condition=Ready echodeployment/" in notes
    assert "-hooks" in notes
    assert ":9099" in notes
    assert "`helm upgrade` upgrades it" in notes
    assert "helm.sh/resource-policy: keep" in notes
    assert "echo-standalone.yaml" in notes
    assert "release" in notes  # the ServiceMonitor's labels are echoed back


def test_notes_say_who_holds_which_key_and_how_to_fence_the_hooks() -> None:
    """Issue 18: the admin key is the operators', never Open WebUI's; the hooks' NetworkPolicy can be
    narrowed to Open WebUI's pods."""
    result = _helm("install", RELEASE, ".", "--namespace", NAMESPACE, "--dry-run=client")
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "echo-prod-admin --from-literal=admin-key=" in notes
    assert "spec.hooks.adminKeySecretRef" in notes
    assert "ECHO_ADMIN_KEY" in notes
    assert "spec.networkPolicy.openwebui" in notes
    assert "docs/security.md" in notes
    readme = (CHART / "README.md").read_text()
    for fragment in ("spec.hooks.adminKeySecretRef", "spec.networkPolicy.openwebui", "docs/security.md"):
        assert fragment in readme, fragment
