"""Faults on a real cluster, on the distributed tenant (docs/examples/echo-cpu.yaml) under a chat loop.

The loop talks to the hooks Service by its ClusterIP, as Open WebUI in the cluster would: the host of the
single-node tier routes to Services (kube-proxy), kind's host does not, so the loop tests run on `node`.
Each test adds a row to the fault table (e2e/artifacts/faults.md, printed at the end of the run).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from chatloop import ChatLoop
from conftest import OPERATOR_NAMESPACE, PLATFORM, REGISTRY, TAG, Tenant
from kube import ARTIFACTS, ROOT, Cluster, eventually

NAMESPACES = ["echo-test", "echo-broken"]
HOOKS = "app.kubernetes.io/component=hooks"
OPERATOR_SELECTOR = "app.kubernetes.io/name=echo-operator,app.kubernetes.io/component=operator"
ROWS: list[tuple[str, str, str]] = []

pytestmark = pytest.mark.timeout(900)
node_only = pytest.mark.skipif(
    PLATFORM != "node", reason="kind's host cannot reach ClusterIPs or the kubelet"
)


def row(fault: str, outcome: str, figures: str) -> None:
    ROWS.append((fault, outcome, figures))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    lines = ["| fault | outcome | figures |", "|---|---|---|", *(f"| {a} | {b} | {c} |" for a, b, c in ROWS)]
    (ARTIFACTS / "faults.md").write_text("\n".join(lines) + "\n")


def selector(tenant: Tenant, component: str) -> str:
    return f"app.kubernetes.io/instance={tenant.name},app.kubernetes.io/component={component}"


def patch(tenant: Tenant, spec: dict) -> None:
    tenant.cluster.kubectl(
        "-n", tenant.namespace, "patch", "echodeployment", tenant.name, "--type", "merge", "-p",
        json.dumps({"spec": spec}),
    )  # fmt: skip


@pytest.fixture(scope="module")
def two_hooks(distributed: Tenant) -> Tenant:
    patch(distributed, {"hooks": {"replicas": 2}})
    eventually(
        "two Ready hooks pods",
        lambda: (
            len(distributed.cluster.ready_pods(distributed.namespace, selector(distributed, "hooks"))) == 2
        ),
        300,
    )
    return distributed


def loop_for(tenant: Tenant) -> ChatLoop:
    return ChatLoop(tenant.service_url(), tenant.api_key)


@node_only
def test_a_hooks_pod_deleted_under_a_chat_loop(two_hooks: Tenant) -> None:
    cluster, namespace = two_hooks.cluster, two_hooks.namespace
    victim = cluster.ready_pods(namespace, selector(two_hooks, "hooks"))[0]["metadata"]["name"]
    with loop_for(two_hooks) as loop:
        loop.wait_turns(5)
        started = time.monotonic()
        cluster.kubectl("-n", namespace, "delete", "pod", victim, "--wait=false")

        def replaced() -> bool:
            names = [
                pod["metadata"]["name"] for pod in cluster.ready_pods(namespace, selector(two_hooks, "hooks"))
            ]
            return len(names) == 2 and victim not in names

        eventually("the deleted hooks pod replaced", replaced, 180)
        seconds = time.monotonic() - started
        loop.wait_turns(10)
    row("a hooks pod deleted (2 replicas)", f"{len(loop.failures)} of {loop.turns} turns failed",
        f"replaced and Ready in {seconds:.0f} s")  # fmt: skip
    assert len(loop.failures) <= 1, loop.failures  # at most the one request in flight on the killed pod


def test_the_operator_pod_deleted_mid_reconcile(distributed: Tenant) -> None:
    cluster = distributed.cluster
    generation = distributed.resource()["metadata"]["generation"]
    patch(distributed, {"distiller": {"replicas": 2}})
    old = cluster.ready_pods(OPERATOR_NAMESPACE, OPERATOR_SELECTOR)[0]["metadata"]["name"]
    started = time.monotonic()
    cluster.kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", old, "--wait=false")

    def converged() -> bool:
        resource = distributed.resource()
        deployment = cluster.get("-n", distributed.namespace, "deployment", f"{distributed.name}-distiller")
        return (
            resource["metadata"]["generation"] > generation
            and resource.get("status", {}).get("observedGeneration") == resource["metadata"]["generation"]
            and deployment["spec"]["replicas"] == 2
        )

    eventually("the new operator pod converged the change", converged, 300)
    new = eventually(
        "the new operator pod Ready",
        lambda: [
            p
            for p in cluster.ready_pods(OPERATOR_NAMESPACE, OPERATOR_SELECTOR)
            if p["metadata"]["name"] != old
        ],
        120,
    )
    assert new
    row("the operator pod deleted mid-reconcile", "the new pod converged (distiller replicas 1 -> 2)",
        f"{time.monotonic() - started:.0f} s")  # fmt: skip
    patch(distributed, {"distiller": {"replicas": 1}})


def test_a_child_deleted_by_hand_is_repaired(distributed: Tenant) -> None:
    cluster, namespace = distributed.cluster, distributed.namespace
    name = f"{distributed.name}-distiller"
    uid = cluster.get("-n", namespace, "deployment", name)["metadata"]["uid"]
    started = time.monotonic()
    cluster.kubectl("-n", namespace, "delete", "deployment", name, "--wait=true")

    def recreated() -> bool:
        if not cluster.exists("-n", namespace, "deployment", name):
            return False
        return cluster.get("-n", namespace, "deployment", name)["metadata"]["uid"] != uid

    # At once, by the operator's watch on its children (the drift timer of the chart is 5 minutes).
    eventually("the deleted Deployment recreated", recreated, 60)
    row("a child (the distiller Deployment) deleted by hand", "recreated by the operator",
        f"{time.monotonic() - started:.0f} s")  # fmt: skip


def docker_host() -> str:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    node_dir = Path(os.environ.get("ECHO_NODE_DIR") or cache / "echo-node")
    return (node_dir / "cluster.docker-host").read_text().strip()


@node_only
def test_a_rolling_update_to_a_rebuilt_image_loses_no_turn(two_hooks: Tenant, tmp_path: Path) -> None:
    cluster, namespace = two_hooks.cluster, two_hooks.namespace
    tag = f"{TAG}-rebuilt"
    (tmp_path / "Dockerfile").write_text(
        f"FROM {REGISTRY}/echo:{TAG}\nLABEL dev.echo.rebuilt={time.time():.0f}\n"
    )
    subprocess.run(
        [
            "/usr/bin/docker",
            "build",
            "-q",
            "--network",
            "none",
            "-t",
            f"{REGISTRY}/echo:{tag}",
            str(tmp_path),
        ],
        env={"DOCKER_HOST": docker_host(), "DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
    )
    with loop_for(two_hooks) as loop:
        loop.wait_turns(5)
        started = time.monotonic()
        patch(two_hooks, {"images": {"echo": {"repository": f"{REGISTRY}/echo", "tag": tag}}})

        def rolled() -> bool:
            pods = cluster.ready_pods(namespace, selector(two_hooks, "hooks"))
            images = {pod["spec"]["containers"][0]["image"] for pod in pods}
            return (
                len(pods) == 2
                and images == {f"{REGISTRY}/echo:{tag}"}
                and len(cluster.pods(namespace, HOOKS)) == 2
            )

        eventually("echo-hooks rolled to the rebuilt image", rolled, 420, every=2)
        seconds = time.monotonic() - started
        loop.wait_turns(10)
    outcome = f"{len(loop.failures)} of {loop.turns} turns failed"
    row("a rolling update of echo-hooks to a rebuilt image", outcome, f"rolled in {seconds:.0f} s")
    assert not loop.failures, loop.failures


@node_only
def test_the_kubelet_restarted_keeps_the_pods_running(two_hooks: Tenant) -> None:
    cluster, namespace = two_hooks.cluster, two_hooks.namespace

    def containers() -> dict[str, tuple[str, int]]:
        return {
            pod["metadata"]["name"]: (status["containerID"], status["restartCount"])
            for pod in cluster.pods(namespace, "app.kubernetes.io/part-of=echo")
            for status in pod["status"].get("containerStatuses", [])
            if status.get("containerID")
        }

    before = containers()
    with loop_for(two_hooks) as loop:
        loop.wait_turns(5)
        started = time.monotonic()
        restart = subprocess.run(
            [ROOT / "scripts" / "cluster.sh", "restart-kubelet"], capture_output=True, text=True
        )
        assert restart.returncode == 0, restart.stderr
        loop.wait_turns(10)
    after = containers()
    row("the kubelet restarted", f"{len(loop.failures)} of {loop.turns} turns failed; containers kept",
        f"back in {time.monotonic() - started:.0f} s")  # fmt: skip
    assert {name: before[name] for name in before if name in after} == {name: after[name] for name in before}
    assert not loop.failures, loop.failures


def test_an_invalid_echodeployment_is_refused_whole(cluster: Cluster, operator: str) -> None:
    """Both a managed Qdrant and an external URL: CEL refuses it where the API server has CEL (1.25+);
    on 1.20 the operator does — Ready=False with the reason, and not one child created."""
    namespace = "echo-broken"
    cluster.kubectl("create", "namespace", namespace)
    manifest = json.dumps({
        "apiVersion": "echo.dev/v1alpha1", "kind": "EchoDeployment", "metadata": {"name": "broken"},
        "spec": {"llm": {"provider": "offline", "models": []},
                 "qdrant": {"managed": {}, "externalUrl": "http://qdrant.example:6333"}},
    })  # fmt: skip
    applied = cluster.run("kubectl", "-n", namespace, "apply", "-f", "-", stdin=manifest, check=False)
    try:
        if applied.returncode != 0:
            assert "exactly one of qdrant.managed" in applied.stderr, applied.stderr
            row("an invalid EchoDeployment", "refused by the API server (CEL)", applied.stderr.strip()[:80])
            return
        condition = cluster.wait_condition(namespace, "echodeployment/broken", "Ready", "False", 120)
        assert condition["reason"] == "InvalidSpec", condition
        assert "exactly one of qdrant.managed" in condition["message"], condition
        children = cluster.kubectl(
            "-n", namespace, "get", "deployments,statefulsets,services,configmaps,secrets", "-l",
            "app.kubernetes.io/instance=broken", "-o", "name",
        )  # fmt: skip
        assert not children.strip(), children
        row(
            "an invalid EchoDeployment",
            "Ready=False, reason InvalidSpec, no child created",
            condition["message"][:80],
        )
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def memory_peak(container_id: str) -> int | None:
    """The container's peak memory from the host: its own cgroup (dockershim's cgroupfs layout,
    `memory/docker/<id>`), cgroup v1 max_usage_in_bytes or v2 memory.peak; None when not found."""
    full = container_id.split("//")[-1]
    if len(full) < 12:
        return None
    for root, name in (
        (Path("/sys/fs/cgroup/memory"), "memory.max_usage_in_bytes"),
        (Path("/sys/fs/cgroup"), "memory.peak"),
    ):
        for folder in (root / "docker" / full, *root.glob(f"**/docker-{full}.scope")):
            if (folder / name).is_file():
                return int((folder / name).read_text())
    return None


def bytes_of(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    return int(quantity)


@node_only
def test_the_limits_hold_under_the_chat_loop(distributed: Tenant) -> None:
    """Runs after the loops above: no pod of the tenant OOMKilled or restarted; each peak beside its limit."""
    cluster, namespace = distributed.cluster, distributed.namespace

    def restarts() -> dict[tuple[str, str], int]:
        return {
            (pod["metadata"]["name"], status["name"]): status["restartCount"]
            for pod in cluster.pods(namespace, "app.kubernetes.io/part-of=echo")
            for status in pod["status"].get("containerStatuses", [])
        }

    before = restarts()  # a pod that started before PostgreSQL was up restarted then: not the loop's doing
    with loop_for(distributed) as loop:
        loop.wait_turns(30)
    lines = []
    for pod in cluster.pods(namespace, "app.kubernetes.io/part-of=echo"):
        for spec, status in zip(
            pod["spec"]["containers"], pod["status"].get("containerStatuses", []), strict=False
        ):
            terminated = (status.get("lastState") or {}).get("terminated") or {}
            assert terminated.get("reason") != "OOMKilled", (pod["metadata"]["name"], terminated)
            key = (pod["metadata"]["name"], status["name"])
            assert status["restartCount"] == before.get(key, 0), (key, status)
            limit = (spec.get("resources") or {}).get("limits", {}).get("memory")
            peak = memory_peak(status.get("containerID", ""))
            if peak is not None and limit:
                assert peak < bytes_of(limit), (pod["metadata"]["name"], peak, limit)
            lines.append(
                f"{pod['metadata']['name']}/{spec['name']}: peak {peak and peak // 2**20} MiB, limit {limit}"
            )
    row("chat loop: requests and limits", f"no OOMKill, no restart, {loop.turns} turns", "; ".join(lines))
