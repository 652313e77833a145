"""`spec.openwebui.connect`: the spec refuses what cannot run, the renderer's Job (pure, checked
against the Kubernetes OpenAPI schemas), its egress NetworkPolicy, and the OpenWebUIConnected
condition from the Job's state."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from echo_operator import apply, crd, handlers, render, status
from echo_operator.render.tenant import Tenant
from echo_operator.spec import InvalidSpec, parse_spec

K8S_VERSION = "1.33"
OWUI = "http://open-webui.owui.svc:8080"
BASE: dict[str, Any] = {
    "database": {"dsnSecretRef": {"name": "db"}},
    "llm": {"provider": "offline"},
    "openwebui": {"url": OWUI, "connect": {"adminKeySecretRef": {"name": "owui-admin"}}},
}
OPENWEBUI_PODS = {"namespace": "owui", "podLabels": {"app.kubernetes.io/component": "open-webui"}}
T0 = "2026-01-01T00:00:00Z"


def spec_with(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = out
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def manifests(spec: dict[str, Any], name: str = "acme") -> list[dict[str, Any]]:
    return render.render(name, "tenants", spec)


def jobs(spec: dict[str, Any], name: str = "acme") -> list[dict[str, Any]]:
    return [m for m in manifests(spec, name) if m["kind"] == "Job"]


def the_job(spec: dict[str, Any] | None = None, name: str = "acme") -> dict[str, Any]:
    (job,) = jobs(BASE if spec is None else spec, name)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    return job


def container(job: dict[str, Any]) -> dict[str, Any]:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


def env(job: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container(job)["env"]}


def secret(name: str, key: str) -> dict[str, Any]:
    return {"secretKeyRef": {"name": name, "key": key}}


def refusal(spec: dict[str, Any]) -> str:
    with pytest.raises(InvalidSpec) as error:
        parse_spec("acme", spec)
    return str(error.value)


# --- the spec ------------------------------------------------------------------------------------


CONNECT = "spec.openwebui.connect"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"openwebui__url": None}, "spec.openwebui: openwebui.connect needs openwebui.url"),
        ({"openwebui__url": "open-webui:8080"}, "spec.openwebui.url: String should match pattern"),
        ({"openwebui__connect__echoUrl": "ftp://x"}, f"{CONNECT}.echoUrl: String should match"),
        ({"openwebui__connect__adminKeySecretRef": {"key": "k"}}, f"{CONNECT}.adminKeySecretRef.name"),
        ({"openwebui__connect__adminKeySecretRef": {"name": ""}}, f"{CONNECT}.adminKeySecretRef.name"),
        ({"openwebui__connect__adminKeySecretRef": None}, f"{CONNECT}.adminKeySecretRef: Field required"),
        ({"openwebui__connect__timeoutSeconds": 0}, f"{CONNECT}.timeoutSeconds"),
        ({"openwebui__connect__dryRun": True}, f"{CONNECT}.dryRun: Extra inputs"),
    ],
)
def test_the_operator_refuses_a_connect_that_cannot_run_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    assert field in refusal(spec_with(**changes))


def test_the_crd_refuses_a_missing_secret_name_and_a_bad_url_too() -> None:
    schema = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    validator = jsonschema.Draft4Validator(schema)

    def errors(spec: dict[str, Any]) -> list[str]:
        return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(spec)]

    assert errors(BASE) == []
    (missing,) = errors(spec_with(openwebui__connect__adminKeySecretRef={"key": "k"}))
    assert missing.startswith("openwebui.connect.adminKeySecretRef: 'name' is a required property")
    (bad,) = errors(spec_with(openwebui__url="open-webui"))
    assert bad.startswith("openwebui.url: 'open-webui' does not match")
    rules = schema["properties"]["openwebui"]["x-kubernetes-validations"]
    message = refusal(spec_with(openwebui__url=None)).removeprefix("spec.openwebui: ")
    assert {"rule": "!has(self.connect) || has(self.url)", "message": message} in rules  # the same words


# --- the Job -------------------------------------------------------------------------------------


def test_no_connect_no_job_and_no_connect_policy() -> None:
    spec = spec_with(openwebui__connect=None)
    spec["networkPolicy"] = {"openwebui": OPENWEBUI_PODS}
    rendered = manifests(spec)
    assert not [m for m in rendered if m["kind"] == "Job"]
    assert "acme-openwebui-connect" not in {m["metadata"]["name"] for m in rendered}


def test_the_job_runs_connect_with_both_keys_from_secrets_and_no_key_in_the_spec() -> None:
    job = the_job()
    assert container(job)["command"] == ["echoctl"]
    assert container(job)["args"] == ["openwebui", "connect", "--timeout", "10"]
    assert env(job) == {
        "ECHO_OPENWEBUI_URL": OWUI,
        "ECHO_OPENWEBUI_API_KEY": secret("owui-admin", "admin-key"),
        "ECHO_HOOKS_URL": "http://acme-hooks.tenants.svc:9099",
        "ECHO_API_KEY": secret("acme-api-key", "api-key"),  # the key the operator generates
    }
    assert "--admin-key" not in container(job)["args"]
    assert "--echo-key" not in container(job)["args"]


def test_the_echo_key_is_the_tenant_s_own_and_the_echo_url_may_be_given() -> None:
    spec = spec_with(
        hooks={"apiKeySecretRef": {"name": "mine", "key": "bearer"}},
        openwebui__connect__echoUrl="https://echo.example.com/",
        openwebui__connect__adminKeySecretRef={"name": "owui", "key": "sk"},
        openwebui__connect__timeoutSeconds=30,
    )
    job = the_job(spec)
    assert env(job)["ECHO_API_KEY"] == secret("mine", "bearer")
    assert env(job)["ECHO_OPENWEBUI_API_KEY"] == secret("owui", "sk")
    assert env(job)["ECHO_HOOKS_URL"] == "https://echo.example.com"
    assert container(job)["args"][-1] == "30"


def test_the_job_runs_once_in_the_hooks_image_with_the_secure_pod_defaults() -> None:
    job = the_job()
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert container(job)["image"] == "ghcr.io/echo-k8s/echo:0.1.0"
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False  # connect needs no Kubernetes API
    assert container(job)["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["backoffLimit"] == 3
    assert spec["activeDeadlineSeconds"] == 600
    assert "ttlSecondsAfterFinished" not in spec  # the finished Job is the record (see render_openwebui)
    (rule,) = spec["podFailurePolicy"]["rules"]
    assert rule == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "connect", "operator": "In", "values": [1, 2]},
    }
    labels = job["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "openwebui-connect"
    assert job["spec"]["template"]["metadata"]["labels"] == labels
    assert "selector" not in spec  # the Job controller's own


def test_the_image_follows_the_hooks_and_the_mode() -> None:
    assert container(the_job(spec_with(hooks={"image": "reg/echo:dev"})))["image"] == "reg/echo:dev"
    standalone = {k: v for k, v in BASE.items() if k != "database"} | {"mode": "standalone"}
    assert container(the_job(standalone))["image"] == "ghcr.io/echo-k8s/echo-standalone:0.1.0"


def test_the_job_name_carries_a_digest_of_what_it_connects_with() -> None:
    name = the_job()["metadata"]["name"]
    assert name.startswith("acme-openwebui-")
    assert len(name) == len("acme-openwebui-") + 10
    assert the_job()["metadata"]["name"] == name  # unchanged spec: the same Job, connect not run again
    unrelated = [
        spec_with(hooks={"replicas": 5}),
        spec_with(valves={"inline": {"echo_memory": {"WINDOW_SIZE": 3}}}),
        spec_with(openwebui__apiKeySecretRef={"name": "files"}),
        spec_with(networkPolicy={"openwebui": OPENWEBUI_PODS}),
    ]
    for spec in unrelated:
        assert the_job(spec)["metadata"]["name"] == name, spec
    changed = [
        spec_with(openwebui__url="http://other:8080"),
        spec_with(openwebui__connect__echoUrl="http://echo.example.com"),
        spec_with(openwebui__connect__adminKeySecretRef={"name": "owui-admin", "key": "other"}),
        spec_with(openwebui__connect__adminKeySecretRef={"name": "another"}),
        spec_with(openwebui__connect__timeoutSeconds=20),
        spec_with(hooks={"apiKeySecretRef": {"name": "mine"}}),
        spec_with(images={"echo": {"repository": "ghcr.io/echo-k8s/echo", "tag": "0.2.0"}}),
        spec_with(images={"pullPolicy": "Always"}),
    ]
    names = {the_job(spec)["metadata"]["name"] for spec in changed}
    assert name not in names
    assert len(names) == len(changed)


def test_the_job_name_fits_a_label_for_the_longest_tenant_name() -> None:
    longest = "a" * 40
    job = the_job(name=longest)
    assert len(job["metadata"]["name"]) <= 63  # the job-name label on its pods is at most 63


def test_render_stays_pure_with_connect() -> None:
    spec = copy.deepcopy(BASE)
    first = manifests(spec)
    assert manifests(spec) == first
    assert spec == BASE
    assert json.loads(json.dumps(first)) == first


# --- network -------------------------------------------------------------------------------------


def policy(rendered: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    found = [m for m in rendered if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] == name]
    return found[0] if found else None


def test_with_open_webui_s_pods_known_the_job_may_reach_them_and_dns_only() -> None:
    rendered = manifests(spec_with(networkPolicy={"openwebui": OPENWEBUI_PODS}))
    egress = policy(rendered, "acme-openwebui-connect")
    assert egress is not None
    kubernetes_validate.validate(egress, K8S_VERSION, strict=True)
    assert egress["spec"]["policyTypes"] == ["Egress"]
    assert egress["spec"]["egress"] == [
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {
            "to": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "owui"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/component": "open-webui"}},
                }
            ]
        },
    ]
    selector = egress["spec"]["podSelector"]["matchLabels"]
    pod_labels = [
        m["spec"]["template"]["metadata"]["labels"] for m in rendered if m["kind"] in ("Deployment", "Job")
    ]
    selected = [labels for labels in pod_labels if selector.items() <= labels.items()]
    assert [labels["app.kubernetes.io/component"] for labels in selected] == ["openwebui-connect"]


def test_the_job_s_pods_stay_under_the_tenant_s_ingress_policy() -> None:
    rendered = manifests(BASE)
    tenant_policy = policy(rendered, "acme-tenant")
    assert tenant_policy is not None
    labels = the_job()["spec"]["template"]["metadata"]["labels"]
    assert tenant_policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_without_open_webui_s_pods_or_policies_the_job_s_egress_is_not_narrowed() -> None:
    assert policy(manifests(BASE), "acme-openwebui-connect") is None  # Open WebUI may be anywhere
    off = spec_with(networkPolicy={"enabled": False, "openwebui": OPENWEBUI_PODS})
    assert not [m for m in manifests(off) if m["kind"] == "NetworkPolicy"]


def test_older_servers_get_the_job_without_its_pod_failure_policy() -> None:
    job = the_job()
    apis = frozenset(apply.DISCOVERED_APIS)
    assert apply.for_cluster(job, apply.Cluster(apis, 26)) == job
    older = apply.for_cluster(job, apply.Cluster(apis, 25))
    assert older is not None
    assert "podFailurePolicy" not in older["spec"]
    assert {k: v for k, v in job["spec"].items() if k != "podFailurePolicy"} == older["spec"]


def test_the_egress_namespace_is_named_on_a_server_that_does_not_label_namespaces() -> None:
    egress = policy(
        manifests(spec_with(networkPolicy={"openwebui": OPENWEBUI_PODS})), "acme-openwebui-connect"
    )
    assert egress is not None
    assert apply.unlabelled_namespaces(egress, apply.Cluster(frozenset(), 20)) == ["owui"]
    assert apply.unlabelled_namespaces(egress, apply.Cluster(frozenset(), 21)) == []


# --- status --------------------------------------------------------------------------------------


def tenant(spec: dict[str, Any] | None = None) -> Tenant:
    return Tenant("acme", "tenants", parse_spec("acme", BASE if spec is None else spec))


def job_state(*conditions: tuple[str, str, str], failed: int = 0, active: int = 0) -> dict[str, Any]:
    listed = [
        {"type": kind, "status": "True", "reason": reason, "message": message}
        for kind, reason, message in conditions
    ]
    return {
        "metadata": {"name": "acme-openwebui-x"},
        "status": {"conditions": listed, "failed": failed, "active": active},
    }


def pod(
    exit_code: int | None = None, finished: str = T0, waiting: tuple[str, str] | None = None
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if exit_code is not None:
        state["terminated"] = {"exitCode": exit_code, "finishedAt": finished, "reason": "Error"}
    if waiting is not None:
        state["waiting"] = {"reason": waiting[0], "message": waiting[1]}
    return {
        "metadata": {"name": f"p{exit_code}"},
        "status": {"containerStatuses": [{"name": "connect", "state": state}]},
    }


def outcome(job: dict[str, Any] | None, pods: list[dict[str, Any]] | None = None) -> status.Connection:
    return status.connection(tenant(), "acme-openwebui-x", job, pods or [])


def test_a_completed_job_is_connected() -> None:
    done = outcome(job_state(("Complete", "", "")))
    assert (done.connected, done.reason) == (True, "Connected")
    assert "kubectl -n tenants logs job/acme-openwebui-x" in done.message


@pytest.mark.parametrize(
    ("code", "reason"), [(1, "SomethingMissing"), (2, "UsageError"), (3, "OpenWebUICallFailed")]
)
def test_a_failed_job_says_why_from_connect_s_exit_code(code: int, reason: str) -> None:
    failed = job_state(("Failed", "PodFailurePolicy", "Container connect failed"), failed=1)
    said = outcome(failed, [pod(code)])
    assert (said.connected, said.reason) == (False, reason)
    assert "kubectl -n tenants delete job acme-openwebui-x" in said.message
    assert reason in status.SETTLED_CONNECT_REASONS


def test_the_last_attempt_s_exit_code_counts() -> None:
    failed = job_state(
        ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"), failed=4
    )
    pods = [pod(1, "2026-01-01T00:00:09Z"), pod(3, "2026-01-01T00:01:00Z"), pod(1, "2026-01-01T00:00:30Z")]
    assert outcome(failed, pods).reason == "OpenWebUICallFailed"


def test_a_failed_job_without_pods_keeps_the_job_s_own_reason() -> None:
    failed = job_state(("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"))
    said = outcome(failed)
    assert (said.connected, said.reason) == (False, "JobFailed")
    assert "DeadlineExceeded: Job was active longer than specified deadline" in said.message


def test_a_pod_that_cannot_start_is_reported_with_the_kubelet_s_reason() -> None:
    stuck = pod(waiting=("CreateContainerConfigError", 'secret "owui-admin" not found'))
    said = outcome(job_state(active=1), [stuck])
    assert (said.connected, said.reason) == (False, "CreateContainerConfigError")
    assert 'secret "owui-admin" not found' in said.message
    assert said.reason not in status.SETTLED_CONNECT_REASONS  # read again until the Secret exists


def test_a_running_or_absent_job_is_unknown() -> None:
    assert (outcome(None).connected, outcome(None).reason) == (None, "Pending")
    running = outcome(job_state(active=1))
    assert (running.connected, running.reason, running.message) == (
        None,
        "Connecting",
        "Job acme-openwebui-x is running",
    )
    retrying = outcome(job_state(active=1, failed=2), [pod(3)])
    assert retrying.connected is None
    assert "2 failed attempts, retrying" in retrying.message


def test_the_condition_is_reported_beside_ready_not_in_it() -> None:
    ready = status.Observation(True, "Available", "1/1 replicas ready")
    observations = dict.fromkeys(status.COMPONENT_CONDITIONS, ready)
    failed = status.Connection(False, "SomethingMissing", "Job x: missing")
    body = status.build_status(tenant(), observations, generation=2, previous=None, now=T0, connected=failed)
    by_type = {c["type"]: c for c in body["conditions"]}
    assert by_type["Ready"]["status"] == "True"
    assert by_type["OpenWebUIConnected"] == {
        "type": "OpenWebUIConnected",
        "status": "False",
        "reason": "SomethingMissing",
        "message": "Job x: missing",
        "lastTransitionTime": T0,
        "observedGeneration": 2,
    }
    unknown = status.Connection(None, "Connecting", "running")
    again = status.build_status(
        tenant(), observations, generation=2, previous=body["conditions"], now="later", connected=unknown
    )
    assert {c["type"]: c for c in again["conditions"]}["OpenWebUIConnected"]["status"] == "Unknown"
    gone = status.build_status(
        tenant(), observations, generation=3, previous=again["conditions"], now="later"
    )
    assert "OpenWebUIConnected" not in {c["type"] for c in gone["conditions"]}  # connect removed


@pytest.mark.parametrize(
    ("connect", "watched"),
    [
        (None, False),
        ({"status": "True", "reason": "Connected"}, False),
        ({"status": "Unknown", "reason": "Connecting"}, True),
        ({"status": "False", "reason": "CreateContainerConfigError"}, True),
        ({"status": "False", "reason": "SomethingMissing"}, False),
        ({"status": "False", "reason": "JobFailed"}, False),
    ],
)
def test_the_status_timer_runs_until_the_job_has_settled(
    connect: dict[str, str] | None, watched: bool
) -> None:
    conditions = [{"type": "Ready", "status": "True"}]
    if connect is not None:
        conditions.append({"type": "OpenWebUIConnected", **connect})
    assert handlers.not_ready(status={"conditions": conditions}) is watched
    assert handlers.not_ready(status={"conditions": [{"type": "Ready", "status": "False"}, *conditions[1:]]})
