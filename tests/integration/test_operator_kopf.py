"""The operator's handlers under kopf, against an emulated Kubernetes API (tests/fakes/kube_emulator.py).

kopf runs in its own thread and event loop (stopping kopf cancels every task created after it
started, pytest's included); the test's loop serves the emulator, so tests only await here
(sync clients and thread joins go through asyncio.to_thread).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kmock
import kopf
import pytest
import yaml
from fakes.eventually import eventually
from fakes.kube_emulator import ECHO_RESOURCE, KubeEmulator

from echo_operator import handlers, metrics
from echo_operator.settings import OperatorConfig

pytestmark = pytest.mark.timeout(60)

NS = "tenants"
CRS = f"/apis/echo.dev/v1alpha1/namespaces/{NS}/echodeployments"
BASE: dict[str, Any] = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}}
DEPLOYMENTS = {"acme-hooks", "acme-distiller", "acme-embedding"}


class OperatorThread:
    """kopf.operator in a thread with its own loop, started and stopped by flags."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self.stop_flag = threading.Event()
        self.ready_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kopf", daemon=True)

    def _run(self) -> None:
        asyncio.run(
            kopf.operator(
                registry=handlers.build_registry(),
                memo=kopf.Memo(config=self.config),
                standalone=True,
                clusterwide=True,
                stop_flag=self.stop_flag,
                ready_flag=self.ready_flag,
            )
        )

    async def start(self) -> None:
        self.thread.start()
        assert await asyncio.to_thread(self.ready_flag.wait, 10), "kopf did not start"

    async def stop(self) -> None:
        self.stop_flag.set()
        await asyncio.to_thread(self.thread.join, 15)
        assert not self.thread.is_alive(), "kopf did not stop"


@pytest.fixture
async def emulator() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator() as kube, kmock.Server(kube):
        yield kube


@pytest.fixture
def config(emulator: KubeEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OperatorConfig:
    server = str(emulator.url).rstrip("/")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "emulator", "cluster": {"server": server}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
                "contexts": [{"name": "test", "context": {"cluster": "emulator", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))  # kopf's login reads it at login time
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return OperatorConfig(kubeconfig=str(kubeconfig), backoff=0.3, posting_level=logging.WARNING)


@pytest.fixture
async def operator(config: OperatorConfig) -> AsyncIterator[OperatorThread]:
    running = OperatorThread(config)
    await running.start()
    yield running
    await running.stop()


async def create(emulator: KubeEmulator, spec: dict[str, Any], name: str = "acme") -> None:
    body = {
        "apiVersion": "echo.dev/v1alpha1",
        "kind": "EchoDeployment",
        "metadata": {"name": name},
        "spec": spec,
    }
    response = await emulator.post(CRS, json=body)
    assert response.status == 201, await response.text()


async def patch_spec(emulator: KubeEmulator, changes: dict[str, Any], name: str = "acme") -> None:
    response = await emulator.patch(f"{CRS}/{name}", json={"spec": changes})
    assert response.status == 200, await response.text()


def cr(emulator: KubeEmulator, name: str = "acme") -> dict[str, Any] | None:
    return emulator.get(ECHO_RESOURCE, NS, name)


def ready_condition(emulator: KubeEmulator) -> dict[str, Any] | None:
    body = cr(emulator) or {}
    found = [c for c in (body.get("status") or {}).get("conditions") or () if c["type"] == "Ready"]
    return found[0] if found else None


def conditions(emulator: KubeEmulator) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((cr(emulator) or {}).get("status") or {}).get("conditions") or ()}


def names(emulator: KubeEmulator, resource: str) -> set[str]:
    return emulator.names(resource, NS)


async def reconciled(emulator: KubeEmulator, generation: int = 1) -> dict[str, Any]:
    """Wait until kopf has handled `generation` (status written by the reconcile handler)."""

    def done() -> dict[str, Any] | None:
        body = cr(emulator) or {}
        status = body.get("status") or {}
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        handled = "echo.dev/last-handled-configuration" in annotations
        return body if handled and status.get("observedGeneration") == generation else None

    return await eventually(done, what=f"generation {generation} reconciled", within=30)


async def make_ready(emulator: KubeEmulator) -> None:
    """Play the controllers: every workload reports all its replicas ready."""
    for resource, name in [("apps/v1/deployments", n) for n in names(emulator, "apps/v1/deployments")] + [
        ("apps/v1/statefulsets", n) for n in names(emulator, "apps/v1/statefulsets")
    ]:
        obj = emulator.get(resource, NS, name)
        assert obj is not None
        replicas = obj["spec"].get("replicas", 1)
        status = {
            "readyReplicas": replicas,
            "replicas": replicas,
            "observedGeneration": obj["metadata"]["generation"],
        }
        url = f"/apis/{resource.rsplit('/', 1)[0]}/namespaces/{NS}/{resource.rsplit('/', 1)[1]}/{name}/status"
        response = await emulator.patch(url, json={"status": status})
        assert response.status == 200


# --- the tests ---------------------------------------------------------------------------------


async def test_create_renders_adopted_children_and_status(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    await create(emulator, BASE)
    body = await reconciled(emulator)
    assert names(emulator, "apps/v1/deployments") == DEPLOYMENTS
    assert names(emulator, "apps/v1/statefulsets") == {"acme-qdrant"}
    assert names(emulator, "v1/services") == {"acme-hooks", "acme-embedding", "acme-qdrant"}
    assert names(emulator, "v1/configmaps") == {"acme-valves", "acme-model-thresholds"}
    assert names(emulator, "v1/secrets") == {"acme-api-key"}
    assert names(emulator, "policy/v1/poddisruptionbudgets") == {"acme-hooks"}
    assert names(emulator, "autoscaling/v2/horizontalpodautoscalers") == set()  # KEDA by default, absent here
    assert names(emulator, "networking.k8s.io/v1/networkpolicies") == {"acme-tenant", "acme-hooks-ingress"}

    uid = body["metadata"]["uid"]
    hooks = emulator.get("apps/v1/deployments", NS, "acme-hooks")
    assert hooks is not None
    (owner,) = hooks["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "EchoDeployment",
        "acme",
        uid,
        True,
    )
    key = emulator.get("v1/secrets", NS, "acme-api-key")
    assert key is not None
    assert len(key["stringData"]["api-key"]) >= 40

    assert body["metadata"]["finalizers"] == ["echo.dev/finalizer"]
    assert "kopf" not in body["status"]  # kopf's own state lives in annotations
    assert body["status"]["hooksEndpoint"] == "http://acme-hooks.tenants.svc:9099"
    ready = await eventually(lambda: ready_condition(emulator), within=30)
    assert (ready["status"], ready["reason"]) == ("False", "ComponentsNotReady")
    assert conditions(emulator)["HooksReady"]["message"] == "0/2 replicas ready"


async def test_status_follows_the_children(emulator: KubeEmulator, operator: OperatorThread) -> None:
    await create(emulator, BASE)
    await reconciled(emulator)
    first = await eventually(lambda: ready_condition(emulator), within=30)
    await make_ready(emulator)
    ready = await eventually(
        lambda: (c := ready_condition(emulator)) and c["status"] == "True" and c, what="Ready", within=30
    )
    assert ready["reason"] == "AllComponentsReady"
    assert ready["lastTransitionTime"] >= first["lastTransitionTime"]
    assert {c["status"] for c in conditions(emulator).values()} == {"True"}


async def test_update_changes_the_children(emulator: KubeEmulator, operator: OperatorThread) -> None:
    await create(emulator, BASE)
    await reconciled(emulator)
    await patch_spec(
        emulator, {"hooks": {"replicas": 3, "image": "registry.local/echo:next"}, "logLevel": "DEBUG"}
    )
    await reconciled(emulator, generation=2)
    hooks = emulator.get("apps/v1/deployments", NS, "acme-hooks")
    assert hooks is not None
    assert hooks["spec"]["replicas"] == 3
    main = hooks["spec"]["template"]["spec"]["containers"][0]
    assert main["image"] == "registry.local/echo:next"
    assert {"name": "ECHO_LOG_LEVEL", "value": "DEBUG"} in main["env"]
    assert (await eventually(lambda: ready_condition(emulator), within=30))["observedGeneration"] == 2


async def test_removed_sections_prune_their_children(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    await create(emulator, {**BASE, "hooks": {"autoscaling": {"enabled": True}}})
    await reconciled(emulator)
    assert "acme-hooks" in names(emulator, "autoscaling/v2/horizontalpodautoscalers")
    assert "replicas" not in emulator.get("apps/v1/deployments", NS, "acme-hooks")["spec"]  # type: ignore[index]
    await patch_spec(
        emulator,
        {
            "hooks": {"autoscaling": None},
            "qdrant": {"managed": None, "externalUrl": "http://qdrant.shared.svc:6333"},
            "valves": {"configMapRef": {"name": "team-valves", "key": "valves.yaml"}},
        },
    )
    await reconciled(emulator, generation=2)
    assert names(emulator, "autoscaling/v2/horizontalpodautoscalers") == set()
    assert names(emulator, "apps/v1/statefulsets") == set()
    assert "acme-qdrant" not in names(emulator, "v1/services")
    assert names(emulator, "v1/configmaps") == {"acme-model-thresholds"}
    hooks = emulator.get("apps/v1/deployments", NS, "acme-hooks")
    assert hooks is not None
    assert hooks["spec"]["replicas"] == 2
    env = {e["name"]: e.get("value") for e in hooks["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ECHO_QDRANT_URL"] == "http://qdrant.shared.svc:6333"
    assert (await eventually(lambda: conditions(emulator).get("QdrantReady"), within=30))[
        "reason"
    ] == "External"


async def test_switching_to_standalone_and_back_prunes_the_other_modes_children(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    await create(emulator, BASE)
    first = await reconciled(emulator)
    await patch_spec(emulator, {"mode": "standalone", "database": None})
    body = await reconciled(emulator, generation=2)
    assert names(emulator, "apps/v1/deployments") == set()
    assert names(emulator, "apps/v1/statefulsets") == {"acme-standalone"}
    assert names(emulator, "v1/services") == {"acme-hooks"}  # the one Open WebUI knows, kept
    assert names(emulator, "policy/v1/poddisruptionbudgets") == set()
    assert names(emulator, "v1/secrets") == {"acme-api-key"}  # the same key
    assert body["status"]["hooksEndpoint"] == first["status"]["hooksEndpoint"]
    assert set(conditions(emulator)) == {"Ready", "StandaloneReady"}
    service = emulator.get("v1/services", NS, "acme-hooks")
    assert service is not None
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "standalone"
    await make_ready(emulator)
    ready = await eventually(
        lambda: (c := ready_condition(emulator)) and c["status"] == "True" and c, what="Ready", within=30
    )
    assert ready["message"] == "every component is ready"
    await patch_spec(emulator, {"mode": "distributed", "database": {"dsnSecretRef": {"name": "db"}}})
    await reconciled(emulator, generation=3)
    assert names(emulator, "apps/v1/deployments") == DEPLOYMENTS
    assert names(emulator, "apps/v1/statefulsets") == {"acme-qdrant"}
    assert set(conditions(emulator)) == {
        "Ready",
        "HooksReady",
        "DistillerReady",
        "EmbeddingReady",
        "QdrantReady",
    }


async def test_delete_removes_children_then_the_finalizer(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    await create(emulator, BASE)
    await reconciled(emulator)
    response = await emulator.delete(f"{CRS}/acme")
    assert response.status == 200
    await eventually(lambda: cr(emulator) is None, what="the EchoDeployment gone", within=30)
    for resource in (
        "apps/v1/deployments",
        "apps/v1/statefulsets",
        "v1/services",
        "v1/configmaps",
        "v1/secrets",
    ):
        assert names(emulator, resource) == set(), resource


async def test_api_errors_are_retried(emulator: KubeEmulator, operator: OperatorThread) -> None:
    before = metrics.REGISTRY.get_sample_value(
        "echo_operator_errors_total", {"handler": "reconcile", "kind": "api"}
    )
    emulator.fail("PATCH", "/deployments/acme-hooks", status=500, times=2)
    emulator.fail("POST", "/configmaps", status=503, times=1)
    await create(emulator, BASE)
    await reconciled(emulator)
    assert names(emulator, "apps/v1/deployments") == DEPLOYMENTS
    assert names(emulator, "v1/configmaps") == {"acme-valves", "acme-model-thresholds"}
    after = metrics.REGISTRY.get_sample_value(
        "echo_operator_errors_total", {"handler": "reconcile", "kind": "api"}
    )
    assert (after or 0) - (before or 0) >= 2


async def test_reruns_are_idempotent(emulator: KubeEmulator, config: OperatorConfig) -> None:
    first = OperatorThread(config)
    await first.start()
    await create(emulator, BASE)
    await reconciled(emulator)
    await eventually(lambda: ready_condition(emulator), within=30)
    snapshot = {
        (resource, name): emulator.get(resource, NS, name)
        for resource in ("apps/v1/deployments", "apps/v1/statefulsets", "v1/secrets", "v1/configmaps")
        for name in names(emulator, resource)
    }
    await first.stop()

    resumes = metrics.REGISTRY.get_sample_value(
        "echo_operator_reconciles_total", {"handler": "reconcile", "result": "success"}
    )
    second = OperatorThread(config)  # on.resume reconciles the existing EchoDeployment again
    await second.start()
    try:
        await eventually(
            lambda: (
                metrics.REGISTRY.get_sample_value(
                    "echo_operator_reconciles_total", {"handler": "reconcile", "result": "success"}
                )
                > (resumes or 0)
            ),
            what="the resume reconcile",
            within=30,
        )
        for (resource, name), before in snapshot.items():
            after = emulator.get(resource, NS, name)
            assert after is not None, (resource, name)
            assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], (
                resource,
                name,
            )  # type: ignore[index]
            assert after == before
    finally:
        await second.stop()


async def test_invalid_spec_is_reported_then_fixed(emulator: KubeEmulator, operator: OperatorThread) -> None:
    await create(emulator, {**BASE, "llm": {"provider": "gemini"}})  # the CEL rule the emulator cannot run
    ready = await eventually(lambda: ready_condition(emulator), what="Ready=False", within=30)
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "llm.apiKeySecretRef is required" in ready["message"]
    assert names(emulator, "apps/v1/deployments") == set()

    await patch_spec(emulator, {"llm": {"apiKeySecretRef": {"name": "gemini"}}})
    await reconciled(emulator, generation=2)
    assert names(emulator, "apps/v1/deployments") == DEPLOYMENTS
    assert (await eventually(lambda: ready_condition(emulator), within=30))["reason"] == "ComponentsNotReady"


async def test_add_on_children_only_where_their_api_exists(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    await create(emulator, {**BASE, "monitoring": {"serviceMonitor": True}, "distiller": {"keda": True}})
    await reconciled(emulator)
    assert "acme-metrics" in names(emulator, "networking.k8s.io/v1/networkpolicies")
    assert names(emulator, "autoscaling/v2/horizontalpodautoscalers") == set()
    assert not any(key[0].group in ("monitoring.coreos.com", "keda.sh") for key in emulator.objects)

    emulator.add_addons()  # the Prometheus Operator and KEDA get installed
    await patch_spec(emulator, {"monitoring": {"interval": "15s"}})
    await reconciled(emulator, generation=2)
    monitors = names(emulator, "monitoring.coreos.com/v1/servicemonitors")
    assert monitors == {"acme-hooks", "acme-distiller", "acme-embedding", "acme-qdrant"}
    assert names(emulator, "keda.sh/v1alpha1/scaledobjects") == {"acme-distiller"}

    await patch_spec(emulator, {"monitoring": {"serviceMonitor": False}, "distiller": {"keda": False}})
    await reconciled(emulator, generation=3)
    assert names(emulator, "monitoring.coreos.com/v1/servicemonitors") == set()
    assert names(emulator, "keda.sh/v1alpha1/scaledobjects") == set()
    assert names(emulator, "autoscaling/v2/horizontalpodautoscalers") == {"acme-distiller"}


async def test_a_refused_child_is_reported_not_retried(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    await create(emulator, BASE)
    await reconciled(emulator)
    # As a real server answers a change of an immutable field (volumeClaimTemplates of a StatefulSet).
    emulator.fail("PATCH", "/statefulsets/acme-qdrant", status=422, times=100)
    await patch_spec(emulator, {"qdrant": {"managed": {"storage": {"size": "99Gi"}}}})
    ready = await eventually(
        lambda: (c := ready_condition(emulator)) and c["reason"] == "ChildRejected" and c,
        what="ChildRejected",
        within=30,
    )
    assert ready["status"] == "False"
    assert "StatefulSet acme-qdrant was refused" in ready["message"]
    assert ready["observedGeneration"] == 2
    remaining = emulator.faults[0].times
    await make_ready(emulator)  # child events refresh the components, not the blocking Ready
    await eventually(
        lambda: conditions(emulator)["HooksReady"]["status"] == "True", what="HooksReady", within=30
    )
    await asyncio.sleep(1.0)  # backoff is 0.3 s: a retried handler would have applied it again
    assert emulator.faults[0].times == remaining
    assert ready_condition(emulator)["reason"] == "ChildRejected"  # type: ignore[index]


def status_refreshes() -> float:
    return (
        metrics.REGISTRY.get_sample_value("echo_operator_reconcile_seconds_count", {"handler": "status"})
        or 0.0
    )


async def quiet(within: float = 10.0) -> None:
    """Wait until no child-event status refresh has finished for 0.5 s."""
    deadline = asyncio.get_running_loop().time() + within
    seen = status_refreshes()
    while True:
        await asyncio.sleep(0.5)
        now = status_refreshes()
        if now == seen:
            return
        assert asyncio.get_running_loop().time() < deadline, "status refreshes never settled"
        seen = now


async def test_a_stale_status_refresh_cannot_clear_invalid_spec(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    """A child event's refresh reads the EchoDeployment; before it writes, the spec turns invalid and
    kopf reports InvalidSpec (then never retries). The refresh's write from its stale read must lose
    (409 on its resourceVersion), and its fresh read must leave the InvalidSpec alone."""
    await create(emulator, BASE)
    await reconciled(emulator)
    await make_ready(emulator)
    await eventually(
        lambda: (c := ready_condition(emulator)) and c["status"] == "True", what="Ready", within=30
    )
    await quiet()
    after_hook: list[int] = []

    async def invalidate_meanwhile(_: Any) -> None:
        await patch_spec(emulator, {"llm": {"provider": "gemini"}})  # no apiKeySecretRef: invalid
        await eventually(
            lambda: (c := ready_condition(emulator)) and c["reason"] == "InvalidSpec",
            what="InvalidSpec",
            within=30,
        )
        after_hook.append(len(emulator.answers))

    emulator.after_next("GET", f"{CRS}/acme", invalidate_meanwhile)
    hooks_status = f"/apis/apps/v1/namespaces/{NS}/deployments/acme-hooks/status"
    response = await emulator.patch(hooks_status, json={"status": {"readyReplicas": 1}})  # a child event
    assert response.status == 200

    stale_write = ("PATCH", f"{CRS}/acme/status", 409)

    def stale_write_refused() -> bool:
        if not after_hook:
            return False
        refused = stale_write in emulator.answers[after_hook[0] :]
        return refused or (ready_condition(emulator) or {}).get("reason") != "InvalidSpec"

    await eventually(stale_write_refused, what="the stale refresh to write", within=30)
    await quiet()  # the refresh's fresh read and recompute, if any, have happened
    ready = ready_condition(emulator)
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec"), ready
    assert stale_write in emulator.answers[after_hook[0] :]


CPU_ONLY: dict[str, Any] = {"embedding": {"gpu": {"count": 0}}}


async def test_a_kubernetes_1_20_server_gets_the_older_pdb_and_hpa_versions(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    emulator.serve_kubernetes_1_20()
    spec = {**BASE, **CPU_ONLY, "hooks": {"autoscaling": {"enabled": True}}, "distiller": {"keda": False}}
    await create(emulator, spec)
    await reconciled(emulator)
    assert names(emulator, "policy/v1beta1/poddisruptionbudgets") == {"acme-hooks"}
    hpas = names(emulator, "autoscaling/v2beta2/horizontalpodautoscalers")
    assert hpas == {"acme-hooks", "acme-distiller"}
    assert not any(
        key[0].version in ("v1", "v2") and key[0].group in ("policy", "autoscaling")
        for key in emulator.objects
    )
    qdrant = emulator.get("apps/v1/statefulsets", NS, "acme-qdrant")
    assert qdrant is not None
    assert "persistentVolumeClaimRetentionPolicy" not in qdrant["spec"]  # 1.20 refuses to apply it

    await patch_spec(emulator, {"hooks": {"autoscaling": None, "podDisruptionBudget": {"enabled": False}}})
    await reconciled(emulator, generation=2)  # pruning lists the versions this server has
    assert names(emulator, "policy/v1beta1/poddisruptionbudgets") == set()
    assert names(emulator, "autoscaling/v2beta2/horizontalpodautoscalers") == {"acme-distiller"}


async def test_a_gpu_tenant_on_kubernetes_1_20(emulator: KubeEmulator, operator: OperatorThread) -> None:
    emulator.serve_kubernetes_1_20()
    await create(emulator, BASE)  # the default embedding asks for one GPU
    await reconciled(emulator)
    assert "acme-embedding" in names(emulator, "apps/v1/deployments")


async def test_watches_the_server_ends_are_reopened_without_losing_events(
    emulator: KubeEmulator, config: OperatorConfig
) -> None:
    """As a real server, the emulator ends each watch after its timeoutSeconds (an integer)."""
    short = dataclasses.replace(config, watch_server_timeout=1, watch_client_timeout=10.0)
    running = OperatorThread(short)
    await running.start()
    try:
        await create(emulator, BASE)
        await reconciled(emulator)
        await asyncio.sleep(1.5)  # every watch has been ended by the server once
        await patch_spec(emulator, {"logLevel": "DEBUG"})
        await reconciled(emulator, generation=2)
    finally:
        await running.stop()
    watches = [
        r
        for r in emulator.history
        if r.url.path.endswith("/echodeployments") and r.params.get("watch") == "true"
    ]
    assert len(watches) >= 2
    assert {r.params.get("timeoutSeconds") for r in watches} == {"1"}


async def test_the_open_webui_connect_job_follows_the_spec_and_reports_its_outcome(
    emulator: KubeEmulator, operator: OperatorThread
) -> None:
    """spec.openwebui.connect: a Job whose name follows what it connects with, the old one pruned,
    and OpenWebUIConnected from the Job's status (written here as the Job controller would)."""
    connect = {"url": "http://owui:8080", "connect": {"adminKeySecretRef": {"name": "owui-admin"}}}
    await create(emulator, {**BASE, "openwebui": connect})
    await reconciled(emulator)
    (first,) = names(emulator, "batch/v1/jobs")
    job = emulator.get("batch/v1/jobs", NS, first)
    assert job is not None
    assert job["spec"]["podFailurePolicy"]["rules"][0]["action"] == "FailJob"  # 1.33 serves it
    assert (job["metadata"]["ownerReferences"][0]["kind"], job["metadata"]["ownerReferences"][0]["name"]) == (
        "EchoDeployment",
        "acme",
    )
    running = await eventually(lambda: conditions(emulator).get("OpenWebUIConnected"), within=30)
    assert (running["status"], running["reason"]) == ("Unknown", "Connecting")

    done = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    response = await emulator.patch(
        f"/apis/batch/v1/namespaces/{NS}/jobs/{first}/status", json={"status": done}
    )
    assert response.status == 200
    connected = await eventually(
        lambda: (c := conditions(emulator)["OpenWebUIConnected"]) and c["status"] == "True" and c, within=30
    )
    assert connected["reason"] == "Connected"

    await patch_spec(emulator, {"openwebui": {"url": "http://owui.other:8080"}})
    await reconciled(emulator, generation=2)
    (second,) = await eventually(
        lambda: (n := names(emulator, "batch/v1/jobs")) != {first} and len(n) == 1 and n, within=30
    )
    assert second != first
    again = await eventually(
        lambda: (c := conditions(emulator)["OpenWebUIConnected"]) and c["status"] == "Unknown" and c,
        within=30,
    )
    assert second in again["message"]

    await patch_spec(emulator, {"openwebui": {"connect": None}})
    await reconciled(emulator, generation=3)
    await eventually(lambda: not names(emulator, "batch/v1/jobs"), within=30, what="the Job pruned")
    assert "OpenWebUIConnected" not in conditions(emulator)
