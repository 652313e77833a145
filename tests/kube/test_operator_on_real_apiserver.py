"""`echoctl operator` against a real kube-apiserver v1.20.2 (no controllers, no kubelet): the
example tenant docs/examples/echo-cpu.yaml gets its children and its status conditions.

What 1.20 lacks and how the operator copes: policy/v1 PDBs (it writes policy/v1beta1),
autoscaling/v2 HPAs (autoscaling/v2beta2), StatefulSet PVC retention (the field is left out and a
warning Event says retainOnDelete is not enforced), CEL rules of the CRD (the chart installs it
without them before 1.25, so only the operator's own validation reports InvalidSpec).
"""

from __future__ import annotations

import json
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
    review: dict[str, Any] = {
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


# --- spec.openwebui.connect: the connect Job, its outcome and its reruns ----------------------------
# No Job controller runs here: the tests write the Job's status (and its pod) as the controller and the
# kubelet would, and the operator reads them as it does in a cluster.

ADMIN_KEY = "sk-admin-never-in-a-spec-or-log"


def connect_tenant(api: httpx.Client, name: str, operator: Path, **connect: Any) -> None:
    create(
        api,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{name}-owui-admin"},
            "stringData": {"admin-key": ADMIN_KEY},
        },
    )
    spec = {
        "database": {"dsnSecretRef": {"name": "echo-cpu-db"}},
        "llm": {"provider": "offline"},
        "embedding": {"gpu": {"count": 0}},
        "hooks": {"replicas": 1, "podDisruptionBudget": {"enabled": False}},
        "openwebui": {
            "url": "http://open-webui.owui.svc:8080",
            "connect": {"adminKeySecretRef": {"name": f"{name}-owui-admin"}, **connect},
        },
        "networkPolicy": {"openwebui": {"namespace": "owui", "podLabels": {"app": "open-webui"}}},
    }
    body = {"apiVersion": "echo.dev/v1alpha1", "kind": "EchoDeployment", "metadata": {"name": name}}
    create(api, {**body, "spec": spec})
    ready(api, name, operator)


def connect_jobs(api: httpx.Client, name: str) -> dict[str, dict[str, Any]]:
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component=openwebui-connect"
    answer = api.get(path("batch/v1", "jobs"), params={"labelSelector": selector})
    assert answer.status_code == 200, answer.text
    return {job["metadata"]["name"]: job for job in answer.json()["items"]}


def one_job(api: httpx.Client, name: str, other_than: str = "") -> dict[str, Any]:
    def single() -> dict[str, Any] | None:
        found = list(connect_jobs(api, name).values())
        alone = len(found) == 1 and found[0]["metadata"]["name"] != other_than
        return found[0] if alone else None

    return eventually(single, within=60, what=f"one connect Job of {name}")


def connect_condition(api: httpx.Client, name: str, **expected: str) -> dict[str, Any]:
    def matches() -> dict[str, Any] | None:
        condition = conditions(api, name).get("OpenWebUIConnected") or {}
        return condition if all(condition.get(k) == v for k, v in expected.items()) else None

    return eventually(matches, within=60, what=f"OpenWebUIConnected {expected}")


def job_status(api: httpx.Client, job: str, status: dict[str, Any]) -> None:
    answer = api.patch(
        path("batch/v1", "jobs", job) + "/status",
        json={"status": status},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert answer.status_code == 200, answer.text


def finished(kind: str, reason: str = "", **counts: int) -> dict[str, Any]:
    when = "2026-01-01T00:00:00Z"
    condition = {"type": kind, "status": "True", "lastProbeTime": when, "lastTransitionTime": when}
    return {"conditions": [{**condition, **({"reason": reason} if reason else {})}], **counts}


def failed_pod(api: httpx.Client, job: str, exit_code: int) -> None:
    """A pod of `job` whose connect container ended with `exit_code`, as the kubelet reports it."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job}-x1", "labels": {"job-name": job}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "connect", "image": "echo"}]},
    }
    assert api.post(path("v1", "pods"), json=pod).status_code == 201
    ended = {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-01-01T00:00:09Z"}
    container = {
        "name": "connect",
        "ready": False,
        "restartCount": 0,
        "image": "echo",
        "imageID": "",
        "state": {"terminated": {**ended, "startedAt": "2026-01-01T00:00:01Z"}},
    }
    answer = api.patch(
        path("v1", "pods", pod["metadata"]["name"]) + "/status",
        json={"status": {"phase": "Failed", "containerStatuses": [container]}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert answer.status_code == 200, answer.text


def test_connect_runs_as_a_job_whose_outcome_is_the_condition(api: httpx.Client, operator: Path) -> None:
    connect_tenant(api, "owui", operator)
    job = one_job(api, "owui")
    name = job["metadata"]["name"]
    assert name.startswith("owui-openwebui-")
    assert "podFailurePolicy" not in job["spec"]  # 1.20 has none: the operator leaves it out
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ECHO_OPENWEBUI_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "owui-owui-admin",
        "key": "admin-key",
    }
    assert env["ECHO_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "owui-api-key", "key": "api-key"}
    assert env["ECHO_HOOKS_URL"]["value"] == "http://owui-hooks.echo-test.svc:9099"
    assert ADMIN_KEY not in json.dumps(job)
    assert "owui-openwebui-connect" in names(api, "networking.k8s.io/v1", "networkpolicies")
    connect_condition(api, "owui", status="Unknown", reason="Connecting")

    job_status(api, name, finished("Complete", succeeded=1))
    connected = connect_condition(api, "owui", status="True", reason="Connected")
    assert name in connected["message"]
    # Ready is the components' summary; the connection is beside it
    assert conditions(api, "owui")["Ready"]["reason"] == "ComponentsNotReady"
    assert ADMIN_KEY not in operator.read_text(errors="replace")


def test_an_unchanged_spec_keeps_its_finished_job(api: httpx.Client, operator: Path) -> None:
    """Re-applied (a child deleted by hand makes the operator apply every child again), the finished
    Job is the same object: connect does not run again, and its immutable template is accepted."""
    connect_tenant(api, "keep", operator)
    job = one_job(api, "keep")
    job_status(api, job["metadata"]["name"], finished("Complete", succeeded=1))
    connect_condition(api, "keep", status="True")
    assert api.delete(path("v1", "configmaps", "keep-valves")).status_code == 200
    eventually(lambda: "keep-valves" in names(api, "v1", "configmaps"), within=60, what="valves back")
    again = one_job(api, "keep")
    assert again["metadata"]["uid"] == job["metadata"]["uid"]
    assert (again.get("status") or {}).get("succeeded") == 1
    assert conditions(api, "keep")["OpenWebUIConnected"]["status"] == "True"
    assert "ChildRejected" not in json.dumps(conditions(api, "keep"))


def test_a_spec_change_runs_a_new_job_whose_failure_says_why(api: httpx.Client, operator: Path) -> None:
    connect_tenant(api, "rerun", operator)
    first = one_job(api, "rerun")["metadata"]["name"]
    job_status(api, first, finished("Complete", succeeded=1))
    connect_condition(api, "rerun", status="True")

    generation = patch_spec(api, "rerun", {"openwebui": {"connect": {"echoUrl": "http://echo.example:9099"}}})
    eventually(observed(api, "rerun", generation), within=60, what="the update reconciled")
    second = one_job(api, "rerun", other_than=first)  # the old one pruned
    assert second["metadata"]["name"] != first
    env = {e["name"]: e.get("value") for e in second["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ECHO_HOOKS_URL"] == "http://echo.example:9099"
    connect_condition(api, "rerun", status="Unknown")

    failed_pod(api, second["metadata"]["name"], exit_code=1)
    job_status(api, second["metadata"]["name"], finished("Failed", "BackoffLimitExceeded", failed=1))
    missing = connect_condition(api, "rerun", status="False", reason="SomethingMissing")
    assert f"kubectl -n {NS} logs job/{second['metadata']['name']}" in missing["message"]


def test_a_job_deleted_by_hand_runs_again(api: httpx.Client, operator: Path) -> None:
    connect_tenant(api, "again", operator)
    job = one_job(api, "again")
    job_status(api, job["metadata"]["name"], finished("Failed", "DeadlineExceeded", failed=1))
    connect_condition(api, "again", status="False", reason="JobFailed")
    # as kubectl deletes (the API's default for a Job orphans its pods, which needs the garbage collector)
    gone = api.delete(
        path("batch/v1", "jobs", job["metadata"]["name"]), params={"propagationPolicy": "Background"}
    )
    assert gone.status_code == 200, gone.text

    def recreated() -> dict[str, Any] | None:
        jobs = connect_jobs(api, "again")
        new = jobs.get(job["metadata"]["name"])
        return new if new and new["metadata"]["uid"] != job["metadata"]["uid"] else None

    eventually(recreated, within=60, what="the connect Job recreated")
    connect_condition(api, "again", status="Unknown", reason="Connecting")


def test_connect_without_url_is_refused_naming_the_field(api: httpx.Client, operator: Path) -> None:
    spec = {
        "database": {"dsnSecretRef": {"name": "db"}},
        "llm": {"provider": "offline"},
        "openwebui": {"connect": {"adminKeySecretRef": {"name": "x"}}},
    }
    body = {"apiVersion": "echo.dev/v1alpha1", "kind": "EchoDeployment", "metadata": {"name": "nourl"}}
    create(api, {**body, "spec": spec})
    condition = ready(api, "nourl", operator)
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert "spec.openwebui: openwebui.connect needs openwebui.url" in condition["message"]
    assert connect_jobs(api, "nourl") == {}
