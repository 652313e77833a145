"""Status conditions from the children's state (pure), and the operator's settings and metrics."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import kopf
import pytest

import echo_operator
from echo_operator import metrics, settings, status
from echo_operator.render.tenant import Tenant
from echo_operator.spec import parse_spec

BASE: dict[str, Any] = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}}
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def tenant(**changes: Any) -> Tenant:
    return Tenant("acme", "tenants", parse_spec("acme", {**BASE, **changes}))


def workload(
    replicas: int | None = 2, ready: int = 0, generation: int = 1, observed: int = 1
) -> dict[str, Any]:
    spec = {} if replicas is None else {"replicas": replicas}
    return {
        "metadata": {"generation": generation},
        "spec": spec,
        "status": {"readyReplicas": ready, "observedGeneration": observed},
    }


def conditions(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in body["conditions"]}


@pytest.mark.parametrize(
    ("obj", "ready", "reason"),
    [
        (None, False, "NotFound"),
        (workload(2, 0), False, "Unavailable"),
        (workload(2, 1), False, "Unavailable"),
        (workload(2, 2), True, "Available"),
        (workload(None, 1), True, "Available"),  # an HPA owns replicas: the default is 1
        (workload(2, 2, generation=3, observed=2), False, "Progressing"),
        (workload(0, 0), True, "ScaledToZero"),
        ({"metadata": {}, "spec": {"replicas": 1}}, False, "Unavailable"),  # no status yet
    ],
)
def test_observe_workload(obj: dict[str, Any] | None, ready: bool, reason: str) -> None:
    observed = status.observe(status.Workload("Deployment", "acme-hooks"), obj)
    assert (observed.ready, observed.reason) == (ready, reason)


def test_external_services_count_as_ready() -> None:
    spec = tenant(embedding={"externalUrl": "http://e:7997"}, qdrant={"externalUrl": "http://q:6333"})
    found = status.workloads(spec)
    assert found["EmbeddingReady"] is None
    assert found["QdrantReady"] is None
    observed = status.observe(None, None)
    assert (observed.ready, observed.reason) == (True, "External")


def test_workloads_of_a_managed_tenant() -> None:
    assert status.workloads(tenant()) == {
        "HooksReady": status.Workload("Deployment", "acme-hooks"),
        "DistillerReady": status.Workload("Deployment", "acme-distiller"),
        "EmbeddingReady": status.Workload("Deployment", "acme-embedding"),
        "QdrantReady": status.Workload("StatefulSet", "acme-qdrant"),
    }


def all_ready() -> dict[str, status.Observation]:
    return {kind: status.Observation(True, "Available", "ok") for kind in status.COMPONENT_CONDITIONS}


def test_ready_summary_when_every_component_is_ready() -> None:
    body = status.build_status(tenant(), all_ready(), generation=4, previous=None, now=T0)
    assert body["observedGeneration"] == 4
    assert body["hooksEndpoint"] == "http://acme-hooks.tenants.svc:9099"
    found = conditions(body)
    assert set(found) == {"Ready", *status.COMPONENT_CONDITIONS}
    assert found["Ready"]["status"] == "True"
    assert found["Ready"]["reason"] == "AllComponentsReady"
    for condition in found.values():
        assert condition["observedGeneration"] == 4
        assert condition["lastTransitionTime"] == T0


def test_ready_false_names_what_waits() -> None:
    observations = all_ready() | {
        "QdrantReady": status.Observation(False, "Unavailable", "0/1 replicas ready")
    }
    found = conditions(status.build_status(tenant(), observations, generation=1, previous=None, now=T0))
    assert found["Ready"]["status"] == "False"
    assert found["Ready"]["reason"] == "ComponentsNotReady"
    assert found["Ready"]["message"] == "not ready: QdrantReady (0/1 replicas ready)"
    assert found["QdrantReady"]["status"] == "False"


def test_transition_time_kept_while_status_is_unchanged() -> None:
    first = status.build_status(tenant(), all_ready(), generation=1, previous=None, now=T0)
    observations = all_ready() | {
        "HooksReady": status.Observation(False, "Unavailable", "1/2 replicas ready")
    }
    second = conditions(
        status.build_status(tenant(), observations, generation=1, previous=first["conditions"], now=T1)
    )
    assert second["DistillerReady"]["lastTransitionTime"] == T0
    assert second["HooksReady"]["lastTransitionTime"] == T1
    assert second["Ready"]["lastTransitionTime"] == T1


def standalone(**changes: Any) -> Tenant:
    return Tenant(
        "acme", "tenants", parse_spec("acme", {"mode": "standalone", "llm": BASE["llm"], **changes})
    )


def test_a_standalone_tenant_has_one_condition_beside_ready() -> None:
    assert status.workloads(standalone()) == {
        "StandaloneReady": status.Workload("StatefulSet", "acme-standalone")
    }
    ready = {"StandaloneReady": status.Observation(True, "Available", "1/1 replicas ready")}
    body = status.build_status(standalone(), ready, generation=3, previous=None, now=T0)
    found = conditions(body)
    assert set(found) == {"Ready", "StandaloneReady"}  # no EmbeddingReady, QdrantReady… waiting forever
    assert (found["Ready"]["status"], found["Ready"]["reason"]) == ("True", "AllComponentsReady")
    assert found["Ready"]["message"] == "every component is ready"
    assert body["hooksEndpoint"] == "http://acme-hooks.tenants.svc:9099"  # as in mode distributed
    waiting = {"StandaloneReady": status.Observation(False, "Unavailable", "0/1 replicas ready")}
    found = conditions(status.build_status(standalone(), waiting, generation=3, previous=None, now=T0))
    assert found["Ready"]["message"] == "not ready: StandaloneReady (0/1 replicas ready)"


def test_switching_modes_drops_the_other_modes_conditions() -> None:
    distributed = status.build_status(tenant(), all_ready(), generation=1, previous=None, now=T0)
    ready = {"StandaloneReady": status.Observation(True, "Available", "1/1 replicas ready")}
    body = status.build_status(standalone(), ready, generation=2, previous=distributed["conditions"], now=T1)
    assert set(conditions(body)) == {"Ready", "StandaloneReady"}
    assert conditions(body)["Ready"]["lastTransitionTime"] == T0  # Ready stayed True
    back = status.build_status(tenant(), all_ready(), generation=3, previous=body["conditions"], now=T1)
    assert set(conditions(back)) == {"Ready", *status.COMPONENT_CONDITIONS}


def test_the_ready_message_names_what_the_mode_ignores() -> None:
    ignoring = standalone(hooks={"replicas": 3}, distiller={"concurrency": 4}, images={"pullPolicy": "Never"})
    ready = {"StandaloneReady": status.Observation(True, "Available", "1/1 replicas ready")}
    found = conditions(status.build_status(ignoring, ready, generation=1, previous=None, now=T0))
    assert found["Ready"]["status"] == "True"
    assert found["Ready"]["message"] == (
        "every component is ready; ignored in mode standalone: spec.hooks.replicas, spec.distiller"
    )
    found = conditions(
        status.build_status(
            tenant(standalone={"workerConcurrency": 4}), all_ready(), generation=1, previous=None, now=T0
        )
    )
    assert found["Ready"]["message"].endswith("; ignored in mode distributed: spec.standalone")


def test_invalid_status_keeps_component_conditions() -> None:
    first = status.build_status(tenant(), all_ready(), generation=1, previous=None, now=T0)
    body = status.invalid_status(
        "spec.hooks.replicas: bad", generation=2, previous=first["conditions"], now=T1
    )
    found = conditions(body)
    assert found["Ready"] == {
        "type": "Ready",
        "status": "False",
        "reason": "InvalidSpec",
        "message": "spec.hooks.replicas: bad",
        "lastTransitionTime": T1,
        "observedGeneration": 2,
    }
    assert found["HooksReady"]["status"] == "True"
    assert body["observedGeneration"] == 2


# --- settings, metrics, the public API ------------------------------------------------------------


def test_configure_puts_kopf_state_in_annotations() -> None:
    kopf_settings = kopf.OperatorSettings()
    config = settings.OperatorConfig(backoff=3.0, posting_level=logging.WARNING)
    settings.configure(kopf_settings, config)
    assert kopf_settings.persistence.finalizer == "echo.dev/finalizer"
    assert isinstance(kopf_settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(kopf_settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert kopf_settings.persistence.progress_storage.prefix == "echo.dev"
    assert kopf_settings.execution.default_backoff == 3.0
    assert kopf_settings.posting.level == logging.WARNING
    assert kopf_settings.posting.loggers  # else posting_level posts nothing
    assert kopf_settings.watching.server_timeout == 300
    assert kopf_settings.watching.client_timeout == 330.0


def test_watch_server_timeout_is_whole_seconds() -> None:
    """kopf sends str(server_timeout) as timeoutSeconds, which a real API server parses with ParseInt
    ("300.0" is a 400 there): the setting is an int, and a bad one is refused at construction."""
    kopf_settings = kopf.OperatorSettings()
    settings.configure(kopf_settings, settings.OperatorConfig())
    assert str(kopf_settings.watching.server_timeout) == "300"
    for bad in (300.0, 2.5, 0, -1, True):
        with pytest.raises(ValueError, match="watch_server_timeout"):
            settings.OperatorConfig(watch_server_timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="watch_client_timeout"):
        settings.OperatorConfig(watch_server_timeout=60, watch_client_timeout=30.0)


def test_load_dashboards(tmp_path: Path) -> None:
    assert settings.load_dashboards(None) == {}
    assert settings.load_dashboards(tmp_path / "absent") == {}
    (tmp_path / "queue.json").write_text(json.dumps({"title": "Queue"}))
    (tmp_path / "notes.txt").write_text("ignored")
    assert settings.load_dashboards(tmp_path) == {"queue.json": '{"title": "Queue"}'}
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match=r"broken\.json"):
        settings.load_dashboards(tmp_path)


def sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_count_and_time_handler_runs() -> None:
    before = sample("echo_operator_reconciles_total", handler="test", result="success")
    with metrics.observe("test"):
        pass
    assert sample("echo_operator_reconciles_total", handler="test", result="success") == before + 1
    with pytest.raises(kopf.PermanentError), metrics.observe("test"):
        raise kopf.PermanentError("bad spec")
    assert sample("echo_operator_errors_total", handler="test", kind="invalid_spec") == 1
    assert sample("echo_operator_reconcile_seconds_count", handler="test") == before + 2


def test_public_api() -> None:
    from echo_operator import crd, render

    assert "render is pure" in (echo_operator.__doc__ or "")
    assert render.__all__ == ["InvalidSpec", "Manifest", "identity", "render", "render_tenant"]
    assert crd.__all__ == [
        "CEL_MIN_MINOR",
        "DEFAULT_PATHS",
        "GROUP",
        "KIND",
        "OUTPUTS",
        "PLURAL",
        "VERSION",
        "Output",
        "build_crd",
        "main",
        "render_yaml",
        "structural",
        "without_cel",
    ]


def test_child_events_cannot_clear_a_blocking_ready() -> None:
    blocked = status.invalid_status(
        "StatefulSet acme-qdrant was refused", generation=2, previous=None, now=T0, reason="ChildRejected"
    )
    fresh = status.build_status(tenant(), all_ready(), generation=2, previous=blocked["conditions"], now=T1)
    kept = conditions(status.keep_blocked_ready(fresh, blocked["conditions"]))
    assert kept["Ready"]["reason"] == "ChildRejected"
    assert kept["Ready"]["lastTransitionTime"] == T0
    assert kept["HooksReady"]["status"] == "True"
    not_blocked = status.build_status(tenant(), all_ready(), generation=2, previous=None, now=T1)
    assert status.keep_blocked_ready(not_blocked, fresh["conditions"]) == not_blocked


OPERATOR = Path(echo_operator.__file__).parent
# The spec models, the whole render package (every module in it, found, not listed) and the conditions.
PURE_MODULES = tuple(
    sorted(
        [*(f"{name}.py" for name in ("shapes", "models", "connections", "spec", "status"))]
        + [str(path.relative_to(OPERATOR)) for path in (OPERATOR / "render").glob("*.py")]
    )
)
IMPURE = (
    "kopf",
    "kubernetes_asyncio",
    "aiohttp",
    "httpx",
    "prometheus_client",
    "os",
    "socket",
    "subprocess",
    "time",
    "random",
    "secrets",
    "datetime",
    "echo_operator.apply",
    "echo_operator.children",
    "echo_operator.handlers",
    "echo_operator.runner",
    "echo_operator.metrics",
    "echo_operator.settings",
)


@pytest.mark.parametrize("module", PURE_MODULES)
def test_render_side_does_no_io(module: str) -> None:
    """render is pure: its modules import no I/O, clock, randomness or kopf (nor the modules that do)."""
    import ast

    source = (OPERATOR / module).read_text()
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    bad = {name for name in imported for banned in IMPURE if name == banned or name.startswith(banned + ".")}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_a_workload_not_ready_takes_the_kubelets_reason_from_its_pods() -> None:
    workload = status.Workload("StatefulSet", "t-qdrant")
    obj = {"metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": {"observedGeneration": 1}}
    pod = {
        "metadata": {"name": "t-qdrant-0"},
        "status": {
            "containerStatuses": [
                {
                    "state": {
                        "waiting": {
                            "reason": "ImagePullBackOff",
                            "message": 'Back-off pulling image "qdrant"',
                        }
                    },
                    "restartCount": 0,
                }
            ]
        },
    }
    observed = status.observe(workload, obj, [pod])
    assert observed == status.Observation(
        False,
        "ImagePullBackOff",
        '0/1 replicas ready; pod t-qdrant-0: ImagePullBackOff: Back-off pulling image "qdrant"',
    )
    assert status.observe(workload, obj).reason == "Unavailable"  # no pods read: the counts only
    creating = {
        "metadata": {"name": "p"},
        "status": {"containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]},
    }
    assert status.pod_problem([creating]) is None  # on its way: no problem
    unschedulable = {
        "metadata": {"name": "p"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
            ]
        },
    }
    assert status.pod_problem([unschedulable]) == ("Unschedulable", "pod p: Unschedulable: 0/1 nodes")
