"""Children written for the server at hand: older API versions and fields on older Kubernetes."""

from __future__ import annotations

from typing import Any

import pytest

from echo_operator import apply

MODERN = apply.Cluster(frozenset(apply.DISCOVERED_APIS - set(apply.OLDER_APIS.values())), 33)
K8S_1_20 = apply.Cluster(frozenset({"policy/v1beta1", "autoscaling/v2beta2"}), 20)
RETENTION = {"whenDeleted": "Delete", "whenScaled": "Retain"}


def manifest(api_version: str, kind: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "acme-x"}, "spec": spec}


@pytest.mark.parametrize(
    ("api_version", "kind", "on_1_20"),
    [
        ("policy/v1", "PodDisruptionBudget", "policy/v1beta1"),
        ("autoscaling/v2", "HorizontalPodAutoscaler", "autoscaling/v2beta2"),
        ("apps/v1", "Deployment", "apps/v1"),
        ("v1", "ConfigMap", "v1"),
        ("monitoring.coreos.com/v1", "ServiceMonitor", None),
    ],
)
def test_api_versions_per_server(api_version: str, kind: str, on_1_20: str | None) -> None:
    rendered = manifest(api_version, kind)
    assert apply.for_cluster(rendered, MODERN) == rendered
    adapted = apply.for_cluster(rendered, K8S_1_20)
    assert (adapted or {}).get("apiVersion") == on_1_20


def test_the_pvc_retention_policy_is_left_out_before_1_23() -> None:
    statefulset = manifest(
        "apps/v1", "StatefulSet", replicas=1, persistentVolumeClaimRetentionPolicy=RETENTION
    )
    assert apply.for_cluster(statefulset, MODERN) == statefulset
    old = apply.for_cluster(statefulset, K8S_1_20)
    assert old is not None
    assert old["spec"] == {"replicas": 1}
    assert statefulset["spec"]["persistentVolumeClaimRetentionPolicy"] == RETENTION  # not mutated
    assert apply.for_cluster(statefulset, apply.Cluster(K8S_1_20.apis, 23)) == statefulset


def test_pruning_looks_at_one_version_per_kind() -> None:
    kinds = [kind for _, kind in apply.CHILD_KINDS]
    assert len(kinds) == len(set(kinds))
    assert apply.served_version("policy/v1", {"policy/v1", "policy/v1beta1"}) == "policy/v1"
    assert apply.served_version("policy/v1", set()) is None


def test_namespaces_selected_by_their_name_label_are_named_before_1_21() -> None:
    """1.20 does not label namespaces with kubernetes.io/metadata.name: the handlers warn which ones a
    NetworkPolicy selects that way (Open WebUI's, Prometheus')."""
    from echo_operator import render

    spec = {
        "database": {"dsnSecretRef": {"name": "db"}},
        "llm": {"provider": "offline"},
        "networkPolicy": {"openwebui": {"namespace": "chat", "podLabels": {"app": "open-webui"}}},
        "monitoring": {"serviceMonitor": True},
    }
    policies = [m for m in render.render("acme", "tenants", spec) if m["kind"] == "NetworkPolicy"]
    named = {m["metadata"]["name"]: apply.unlabelled_namespaces(m, K8S_1_20) for m in policies}
    assert named == {"acme-tenant": [], "acme-hooks-ingress": ["chat"], "acme-metrics": ["monitoring"]}
    assert all(apply.unlabelled_namespaces(m, apply.Cluster(K8S_1_20.apis, 21)) == [] for m in policies)
    assert apply.unlabelled_namespaces(manifest("v1", "ConfigMap"), K8S_1_20) == []
