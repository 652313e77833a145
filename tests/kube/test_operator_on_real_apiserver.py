"""`echoctl operator` against a real kube-apiserver v1.20.2 (no controllers, no kubelet): the
example tenant docs/examples/echo-cpu.yaml gets its children and its status conditions.

What 1.20 lacks and how the operator copes: policy/v1 PDBs (it writes policy/v1beta1),
autoscaling/v2 HPAs (autoscaling/v2beta2), StatefulSet PVC retention (the field is left out and a
warning Event says retainOnDelete is not enforced), CEL rules of the CRD (the chart installs it
without them before 1.25, so only the operator's own validation reports InvalidSpec).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

pytestmark = [pytest.mark.kube, pytest.mark.timeout(180)]

NS = "echo-test"
DRIFT_SECONDS = 4  # the drift timer, short here: a child deleted by hand comes back within seconds
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "echo-cpu.yaml"
STANDALONE = ROOT / "docs" / "examples" / "echo-standalone.yaml"
T = TypeVar("T")


def eventually(check: Callable[[], T | None], within: float = 30.0, what: str = "") -> T:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def api(echo_crd: Any) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {echo_crd.token}"}
    with httpx.Client(base_url=echo_crd.url, headers=headers, verify=False, timeout=10) as client:
        answer = client.post("/api/v1/namespaces", json={"metadata": {"name": NS}})
        assert answer.status_code in (201, 409), answer.text
        yield client


@pytest.fixture(scope="module")
def operator(
    echo_crd: Any, operator_rbac: Any, api: httpx.Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """`echoctl operator -n echo-test` as the ServiceAccount echo-system/echo-operator, which holds only
    the chart's own RBAC (so a missing verb fails here, as in a cluster); yields its log file."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    echoctl = shutil.which("echoctl", path=str(Path(sys.executable).parent)) or "echoctl"
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["KUBECONFIG"] = str(echo_crd.operator_kubeconfig)
    with log.open("wb") as out:
        command = [echoctl, "operator", "--namespace", NS, "--drift-seconds", str(DRIFT_SECONDS)]
        process = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    try:
        yield log
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def path(api_version: str, plural: str, name: str = "") -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{base}/namespaces/{NS}/{plural}" + (f"/{name}" if name else "")


def create(api: httpx.Client, manifest: dict[str, Any]) -> None:
    plural = {"Secret": "secrets", "EchoDeployment": "echodeployments"}[manifest["kind"]]
    answer = api.post(path(manifest["apiVersion"], plural), json=manifest)
    assert answer.status_code in (201, 409), answer.text


def names(api: httpx.Client, api_version: str, plural: str) -> set[str]:
    answer = api.get(path(api_version, plural))
    assert answer.status_code == 200, answer.text
    return {item["metadata"]["name"] for item in answer.json()["items"]}


def ready(api: httpx.Client, name: str, log: Path) -> dict[str, Any]:
    """The Ready condition once the reconcile handler has reported generation 1 (child events may
    write conditions before it) or refused the spec; the operator's log tail when it never does."""

    def reported() -> dict[str, Any] | None:
        condition = conditions(api, name).get("Ready")
        done = condition and (
            condition.get("observedGeneration") == 1 or condition["reason"] == "InvalidSpec"
        )
        return condition if done else None

    try:
        return eventually(reported, what=f"generation 1 of {name} reported")
    except AssertionError as error:
        raise AssertionError(
            f"{error}\n--- operator log ---\n{log.read_text(errors='replace')[-6000:]}"
        ) from None


def conditions(api: httpx.Client, name: str) -> dict[str, dict[str, Any]]:
    body = api.get(path("echo.dev/v1alpha1", "echodeployments", name)).json()
    return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or ()}


def test_the_example_tenant_gets_its_children_and_status(api: httpx.Client, operator: Path) -> None:
    for manifest in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")):
        if manifest["kind"] in ("Secret", "EchoDeployment"):  # its PostgreSQL needs a kubelet: not here
            create(api, manifest)
    condition = ready(api, "echo-cpu", operator)
    assert (condition["status"], condition["reason"]) == ("False", "ComponentsNotReady"), condition
    assert condition["observedGeneration"] == 1

    assert names(api, "v1", "configmaps") >= {"echo-cpu-valves", "echo-cpu-model-thresholds"}
    assert "echo-cpu-api-key" in names(api, "v1", "secrets")
    assert names(api, "apps/v1", "deployments") == {
        "echo-cpu-hooks",
        "echo-cpu-distiller",
        "echo-cpu-embedding",
    }
    assert names(api, "apps/v1", "statefulsets") == {"echo-cpu-qdrant"}
    assert names(api, "v1", "services") == {"echo-cpu-hooks", "echo-cpu-embedding", "echo-cpu-qdrant"}
    assert names(api, "networking.k8s.io/v1", "networkpolicies") == {
        "echo-cpu-tenant",
        "echo-cpu-hooks-ingress",
    }
    # No controllers run here: the workloads never report ready replicas.
    assert conditions(api, "echo-cpu")["HooksReady"]["message"] == "0/1 replicas ready"
    qdrant = api.get(path("apps/v1", "statefulsets", "echo-cpu-qdrant")).json()
    assert "persistentVolumeClaimRetentionPolicy" not in qdrant["spec"]  # 1.20 has none
    events = api.get(path("v1", "events")).json()["items"]
    warned = [e for e in events if "retainOnDelete false is not enforced" in e.get("message", "")]
    assert warned, [e.get("message") for e in events]
    assert warned[0]["involvedObject"]["name"] == "echo-cpu"


def test_older_apis_are_used_where_the_newer_are_not_served(api: httpx.Client, operator: Path) -> None:
    """The default spec wants a PDB, and an HPA without KEDA; 1.20 serves neither policy/v1 nor
    autoscaling/v2, nor a StatefulSet PVC retention policy."""
    spec = {
        "database": {"dsnSecretRef": {"name": "echo-cpu-db"}},
        "llm": {"provider": "offline"},
        "distiller": {"keda": False},
        "embedding": {"gpu": {"count": 0}},
    }
    create(
        api,
        {
            "apiVersion": "echo.dev/v1alpha1",
            "kind": "EchoDeployment",
            "metadata": {"name": "dflt"},
            "spec": spec,
        },
    )
    assert ready(api, "dflt", operator)["reason"] == "ComponentsNotReady"
    assert names(api, "policy/v1beta1", "poddisruptionbudgets") == {"dflt-hooks"}
    assert "dflt-distiller" in names(api, "autoscaling/v2beta2", "horizontalpodautoscalers")
    qdrant = api.get(path("apps/v1", "statefulsets", "dflt-qdrant")).json()
    assert "persistentVolumeClaimRetentionPolicy" not in qdrant["spec"]


def test_a_gpu_tenant_is_applied(api: httpx.Client, operator: Path) -> None:
    spec = {"database": {"dsnSecretRef": {"name": "echo-cpu-db"}}, "llm": {"provider": "offline"}}
    body = {
        "apiVersion": "echo.dev/v1alpha1",
        "kind": "EchoDeployment",
        "metadata": {"name": "gpu"},
        "spec": spec,
    }
    create(api, body)
    assert ready(api, "gpu", operator)["reason"] == "ComponentsNotReady"


def test_the_standalone_example_is_one_statefulset_on_1_20(api: httpx.Client, operator: Path) -> None:
    for manifest in yaml.safe_load_all(STANDALONE.read_text(encoding="utf-8")):
        create(api, manifest)
    condition = ready(api, "echo-standalone", operator)
    assert (condition["status"], condition["reason"]) == ("False", "ComponentsNotReady"), condition
    assert set(conditions(api, "echo-standalone")) == {"Ready", "StandaloneReady"}
    statefulset = api.get(path("apps/v1", "statefulsets", "echo-standalone-standalone")).json()
    assert "persistentVolumeClaimRetentionPolicy" not in statefulset["spec"]  # 1.20 has none
    assert (
        statefulset["spec"]["template"]["spec"]["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    )
    assert "echo-standalone-hooks" in names(api, "v1", "services")
    assert "echo-standalone-api-key" in names(api, "v1", "secrets")
    assert not {"echo-standalone-hooks", "echo-standalone-distiller"} & names(api, "apps/v1", "deployments")


def test_an_invalid_spec_is_reported(api: httpx.Client, operator: Path) -> None:
    """1.20 does not run the CRD's CEL rules: the operator's own check reports what they would refuse."""
    spec = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "gemini"}}
    create(
        api,
        {
            "apiVersion": "echo.dev/v1alpha1",
            "kind": "EchoDeployment",
            "metadata": {"name": "bad"},
            "spec": spec,
        },
    )
    condition = ready(api, "bad", operator)
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert "llm.apiKeySecretRef is required" in condition["message"]


def patch_spec(api: httpx.Client, name: str, spec: dict[str, Any]) -> int:
    answer = api.patch(
        path("echo.dev/v1alpha1", "echodeployments", name),
        json={"spec": spec},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["metadata"]["generation"])


def observed(api: httpx.Client, name: str, generation: int) -> Callable[[], bool]:
    def check() -> bool:
        condition = conditions(api, name).get("Ready") or {}
        return condition.get("observedGeneration") == generation

    return check


def test_the_service_account_has_only_the_chart_s_rights(api: httpx.Client, operator_rbac: Any) -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "system:serviceaccount:echo-system:echo-operator",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        },
    }

    def allowed(verb: str, resource: str, namespace: str, group: str = "") -> bool:
        attributes = {"verb": verb, "resource": resource, "namespace": namespace, "group": group}
        body = {**review, "spec": {**review["spec"], "resourceAttributes": attributes}}
        answer = api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=body)
        assert answer.status_code == 201, answer.text
        return bool(answer.json()["status"]["allowed"])

    assert allowed("create", "deployments", NS, "apps")
    assert allowed("patch", "echodeployments", NS, "echo.dev")
    assert not allowed("create", "deployments", "kube-system", "apps")  # only the watched namespace
    assert not allowed("delete", "customresourcedefinitions", "", "apiextensions.k8s.io")
    assert not allowed("get", "secrets", "kube-system")


def tenant(api: httpx.Client, name: str, operator: Path) -> None:
    """A small offline tenant of its own (each test its own, so generations do not mix), reconciled."""
    spec = {
        "database": {"dsnSecretRef": {"name": "echo-cpu-db"}},
        "llm": {"provider": "offline"},
        "embedding": {"gpu": {"count": 0}},
        "hooks": {"replicas": 1, "podDisruptionBudget": {"enabled": False}},
    }
    create(
        api,
        {
            "apiVersion": "echo.dev/v1alpha1",
            "kind": "EchoDeployment",
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    ready(api, name, operator)


def test_a_spec_update_reaches_the_children(api: httpx.Client, operator: Path) -> None:
    tenant(api, "upd", operator)
    generation = patch_spec(api, "upd", {"hooks": {"replicas": 3}})
    eventually(observed(api, "upd", generation), within=60, what="the update reconciled")
    hooks = api.get(path("apps/v1", "deployments", "upd-hooks")).json()
    assert hooks["spec"]["replicas"] == 3


def test_a_child_deleted_by_hand_comes_back(api: httpx.Client, operator: Path) -> None:
    tenant(api, "child", operator)
    answer = api.delete(path("v1", "configmaps", "child-valves"))
    assert answer.status_code == 200, answer.text
    eventually(lambda: "child-valves" in names(api, "v1", "configmaps"), within=60, what="valves back")


def test_spec_changes_racing_the_status_writes_all_land(api: httpx.Client, operator: Path) -> None:
    """Each status write carries the resourceVersion it read; spec patches in between make some of
    them conflict (409): the operator reads again and the last generation is the one reported."""
    tenant(api, "race", operator)
    generation = 0
    for replicas in (2, 4, 1, 5, 2):
        generation = patch_spec(api, "race", {"hooks": {"replicas": replicas}})
        time.sleep(0.05)
    eventually(observed(api, "race", generation), within=90, what=f"generation {generation} reported")
    assert api.get(path("apps/v1", "deployments", "race-hooks")).json()["spec"]["replicas"] == 2
    assert "Traceback" not in operator.read_text(errors="replace")


def test_a_deleted_tenant_goes_once_its_finalizer_is_done(api: httpx.Client, operator: Path) -> None:
    tenant(api, "gone", operator)
    found = api.get(path("echo.dev/v1alpha1", "echodeployments", "gone")).json()
    assert found["metadata"].get("finalizers"), found["metadata"]
    assert api.delete(path("echo.dev/v1alpha1", "echodeployments", "gone")).status_code == 200

    def gone() -> bool:
        return api.get(path("echo.dev/v1alpha1", "echodeployments", "gone")).status_code == 404

    eventually(gone, within=60, what="the tenant deleted after its finalizer")
