"""How the operator's children meet the cluster they are applied to: API versions, fields, labels.

Children are rendered for current Kubernetes; `for_cluster` maps them onto an older server, as
Helm charts do with `.Capabilities`: a PodDisruptionBudget goes out as policy/v1beta1 before 1.21
and an HPA as autoscaling/v2beta2 before 1.23 (same fields for what the operator renders), and a
StatefulSet without its PVC retention policy before 1.23 (there, a server-side apply naming it is
a 500 "field not declared in schema"), and a Job without its pod failure policy before 1.26 (beta
and on by default from 1.26; without it the Job retries every failure up to its backoffLimit).
`unlabelled_namespaces` names what a NetworkPolicy selects by the `kubernetes.io/metadata.name`
label on a server before 1.21, which does not set that label (the handlers warn: label those
namespaces by hand). `cluster_of` asks the server (through `kube.Kube`,
the operator's one API client) what it offers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from echo_operator.kube import PLURALS, Kube

__all__ = [
    "CHILD_KINDS",
    "DISCOVERED_APIS",
    "NAMESPACE_NAME_LABEL",
    "NAMESPACE_NAME_LABEL_MINOR",
    "OLDER_APIS",
    "OPTIONAL_APIS",
    "PLURALS",
    "POD_FAILURE_POLICY_MINOR",
    "PVC_RETENTION_MINOR",
    "ChildRejected",
    "Cluster",
    "cluster_of",
    "for_cluster",
    "served_version",
    "unlabelled_namespaces",
]

OLDER_APIS = {"policy/v1": "policy/v1beta1", "autoscaling/v2": "autoscaling/v2beta2"}
"""API -> what a server from before its GA serves instead (policy/v1: 1.21, autoscaling/v2: 1.23)."""
CHILD_KINDS = tuple(
    key for key in PLURALS if key[1] not in ("EchoDeployment", "Pod") and key[0] not in OLDER_APIS.values()
)
"""Every (apiVersion, kind) the operator renders, so every kind pruning looks at (then mapped by
`served_version`)."""
OPTIONAL_APIS = frozenset({"monitoring.coreos.com/v1", "keda.sh/v1alpha1"})
"""APIs of add-ons (Prometheus Operator, KEDA) that a cluster may lack."""
DISCOVERED_APIS = OPTIONAL_APIS | OLDER_APIS.keys() | frozenset(OLDER_APIS.values())
"""The APIs whose presence the operator asks the server about; every other one is always served."""
PVC_RETENTION_MINOR = 23
"""StatefulSet.spec.persistentVolumeClaimRetentionPolicy is in the API from Kubernetes 1.23."""
POD_FAILURE_POLICY_MINOR = 26
"""Job.spec.podFailurePolicy is served (beta, on by default) from Kubernetes 1.26."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
NAMESPACE_NAME_LABEL_MINOR = 21
"""The API server labels every namespace with its name (NAMESPACE_NAME_LABEL) from Kubernetes 1.21."""


class ChildRejected(Exception):
    """The API server refused a rendered child as invalid (e.g. an immutable field changed).

    Permanent: applying it again gives the same answer until the spec changes.
    """


def served_version(api_version: str, served: Collection[str]) -> str | None:
    """The API version to write a child of `api_version` as on a server that serves `served` (of
    DISCOVERED_APIS): itself, the older version that server has instead, or None (not served)."""
    if api_version not in DISCOVERED_APIS or api_version in served:
        return api_version
    older = OLDER_APIS.get(api_version)
    return older if older is not None and older in served else None


@dataclass(frozen=True)
class Cluster:
    """What the API server offers, as far as writing children for it goes."""

    apis: frozenset[str]
    """The APIs of DISCOVERED_APIS it serves."""
    minor: int
    """Kubernetes 1.<minor>, from its /version."""


async def cluster_of(kube: Kube) -> Cluster:
    """The add-on APIs and API versions this cluster serves, and its Kubernetes minor version."""
    return Cluster(await kube.served_apis() & DISCOVERED_APIS, await kube.server_minor())


def for_cluster(manifest: Mapping[str, Any], cluster: Cluster) -> dict[str, Any] | None:
    """`manifest` as `cluster` takes it (see the module doc), or None when its API is not served."""
    api_version = served_version(manifest["apiVersion"], cluster.apis)
    if api_version is None:
        return None
    out = {**manifest, "apiVersion": api_version}
    if manifest["kind"] == "StatefulSet" and cluster.minor < PVC_RETENTION_MINOR:
        out["spec"] = _without(manifest["spec"], "persistentVolumeClaimRetentionPolicy")
    if manifest["kind"] == "Job" and cluster.minor < POD_FAILURE_POLICY_MINOR:
        out["spec"] = _without(manifest["spec"], "podFailurePolicy")
    return out


def _without(spec: Mapping[str, Any], field: str) -> dict[str, Any]:
    return {key: value for key, value in spec.items() if key != field}


def unlabelled_namespaces(manifest: Mapping[str, Any], cluster: Cluster) -> list[str]:
    """The namespaces a NetworkPolicy selects by NAMESPACE_NAME_LABEL on a server too old to set that
    label: they match nothing until someone labels them."""
    if manifest["kind"] != "NetworkPolicy" or cluster.minor >= NAMESPACE_NAME_LABEL_MINOR:
        return []
    spec = manifest["spec"]
    peers = [peer for rule in spec.get("ingress") or () for peer in rule.get("from") or ()]
    peers += [peer for rule in spec.get("egress") or () for peer in rule.get("to") or ()]
    labels = [((peer.get("namespaceSelector") or {}).get("matchLabels") or {}) for peer in peers]
    return sorted({selected[NAMESPACE_NAME_LABEL] for selected in labels if NAMESPACE_NAME_LABEL in selected})
