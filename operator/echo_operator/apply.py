"""The operator's Kubernetes I/O: server-side apply, list by labels, delete, status patches.

A thin REST layer over `kubernetes_asyncio`'s ApiClient (in-cluster service account, else a
kubeconfig), so any kind is one path away and nothing depends on typed models.

Server-side apply uses the field manager `echo-operator` with `force`. A server that answers 404
to an apply of a missing object (the test emulator; a real API server creates it) gets a POST
instead, and a POST that meets 409 (created meanwhile) is applied again.

Children are rendered for current Kubernetes; `for_cluster` maps them onto an older server, as
Helm charts do with `.Capabilities`: a PodDisruptionBudget goes out as policy/v1beta1 before 1.21
and an HPA as autoscaling/v2beta2 before 1.23 (same fields for what the operator renders), and a
StatefulSet without its PVC retention policy before 1.23 (there, a server-side apply naming it is
a 500 "field not declared in schema"). `unlabelled_namespaces` names what a NetworkPolicy selects by
the `kubernetes.io/metadata.name` label on a server before 1.21, which does not set that label (the
handlers warn: label those namespaces by hand).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

__all__ = [
    "CHILD_KINDS",
    "FIELD_MANAGER",
    "NAMESPACE_NAME_LABEL",
    "NAMESPACE_NAME_LABEL_MINOR",
    "OLDER_APIS",
    "OPTIONAL_APIS",
    "PVC_RETENTION_MINOR",
    "ApiError",
    "ChildRejected",
    "Cluster",
    "Kube",
    "for_cluster",
    "path",
    "served_version",
    "unlabelled_namespaces",
]

FIELD_MANAGER = "echo-operator"
PLURALS: dict[tuple[str, str], str] = {
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Secret"): "secrets",
    ("v1", "Service"): "services",
    ("apps/v1", "Deployment"): "deployments",
    ("apps/v1", "StatefulSet"): "statefulsets",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudgets",
    ("policy/v1beta1", "PodDisruptionBudget"): "poddisruptionbudgets",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "horizontalpodautoscalers",
    ("autoscaling/v2beta2", "HorizontalPodAutoscaler"): "horizontalpodautoscalers",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicies",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitors",
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobjects",
    ("echo.dev/v1alpha1", "EchoDeployment"): "echodeployments",
    ("v1", "Pod"): "pods",  # read only: why a workload is not ready (status.pod_problem)
}
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
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
NAMESPACE_NAME_LABEL_MINOR = 21
"""The API server labels every namespace with its name (NAMESPACE_NAME_LABEL) from Kubernetes 1.21."""
_OBJECT = {200: "object", 201: "object", 202: "object"}


class ApiError(Exception):
    """An API call failed; `status` is the HTTP status (0 when there was no answer)."""

    def __init__(self, status: int, reason: str, method: str, url: str, message: str = "") -> None:
        super().__init__(f"{method} {url}: {status} {reason}" + (f": {message}" if message else ""))
        self.status = status
        self.reason = reason
        self.message = message


class ChildRejected(Exception):
    """The API server refused a rendered child as invalid (e.g. an immutable field changed).

    Permanent: applying it again gives the same answer until the spec changes.
    """


def _server_message(error: ApiException) -> str:
    """The `message` of the Status object the API server answered with, if any."""
    try:
        return str(json.loads(error.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        return ""


def path(api_version: str, kind: str, namespace: str | None, name: str | None = None, sub: str = "") -> str:
    """The REST path of a collection or an object (`sub`: a subresource such as `status`)."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(PLURALS[(api_version, kind)])
    if name:
        parts.append(name)
    if sub:
        parts.append(sub)
    return "/".join(parts)


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


def for_cluster(manifest: Mapping[str, Any], cluster: Cluster) -> dict[str, Any] | None:
    """`manifest` as `cluster` takes it (see the module doc), or None when its API is not served."""
    api_version = served_version(manifest["apiVersion"], cluster.apis)
    if api_version is None:
        return None
    out = {**manifest, "apiVersion": api_version}
    if manifest["kind"] == "StatefulSet" and cluster.minor < PVC_RETENTION_MINOR:
        spec = manifest["spec"]
        out["spec"] = {
            key: value for key, value in spec.items() if key != "persistentVolumeClaimRetentionPolicy"
        }
    return out


def unlabelled_namespaces(manifest: Mapping[str, Any], cluster: Cluster) -> list[str]:
    """The namespaces a NetworkPolicy selects by NAMESPACE_NAME_LABEL on a server too old to set that
    label: they match nothing until someone labels them."""
    if manifest["kind"] != "NetworkPolicy" or cluster.minor >= NAMESPACE_NAME_LABEL_MINOR:
        return []
    peers = [peer for rule in manifest["spec"].get("ingress") or () for peer in rule.get("from") or ()]
    labels = [((peer.get("namespaceSelector") or {}).get("matchLabels") or {}) for peer in peers]
    return sorted({selected[NAMESPACE_NAME_LABEL] for selected in labels if NAMESPACE_NAME_LABEL in selected})


def _where(manifest: Mapping[str, Any]) -> tuple[str, str, str | None, str]:
    meta = manifest["metadata"]
    return manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"]


class Kube:
    """Async access to the Kubernetes API for the handlers."""

    def __init__(self, api: client.ApiClient, *, timeout: float = 60.0) -> None:
        self._api = api
        self._timeout = timeout

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, *, request_timeout: float = 60.0) -> Kube:
        """The in-cluster service account when there is one, else `kubeconfig` (or ~/.kube/config)."""
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        return cls(client.ApiClient(configuration), timeout=request_timeout)

    async def close(self) -> None:
        await self._api.close()

    async def _call(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        try:
            return await self._api.call_api(
                url,
                method,
                query_params=list((query or {}).items()),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                response_types_map=_OBJECT,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _request_timeout=self._timeout,
            )
        except ApiException as error:
            message = _server_message(error)
            raise ApiError(error.status or 0, str(error.reason), method, url, message) from error

    async def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        try:
            return await self._call("GET", path(api_version, kind, namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def list(
        self, api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """Objects carrying all `labels` (checked here too, for servers that ignore the selector)."""
        selector = ",".join(f"{key}={value}" for key, value in labels.items())
        answer = await self._call(
            "GET", path(api_version, kind, namespace), query={"labelSelector": selector}
        )
        items = (answer or {}).get("items") or []
        return [
            item
            for item in items
            if all(((item.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in labels.items())
        ]

    async def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        api_version, kind, namespace, _ = _where(manifest)
        url = path(api_version, kind, namespace)
        return await self._call("POST", url, body=dict(manifest), query={"fieldManager": FIELD_MANAGER})

    async def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply (field manager echo-operator, force); see the module doc for fallbacks."""
        url = path(*_where(manifest))
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        ssa = "application/apply-patch+yaml"
        try:
            return await self._call("PATCH", url, body=dict(manifest), query=query, content_type=ssa)
        except ApiError as error:
            if error.status != 404:
                raise
        try:
            return await self.create(manifest)
        except ApiError as error:
            if error.status != 409:
                raise
        return await self._call("PATCH", url, body=dict(manifest), query=query, content_type=ssa)

    async def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> bool:
        """Delete (children first, in the background); False when it was already gone."""
        try:
            url = path(api_version, kind, namespace, name)
            await self._call("DELETE", url, query={"propagationPolicy": "Background"})
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Merge-patch the status; with `resource_version`, only if the object is still at that
        version (else an ApiError 409, as for any update carrying metadata.resourceVersion)."""
        url = path(api_version, kind, namespace, name, "status")
        body: dict[str, Any] = {"status": dict(status)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self._call("PATCH", url, body=body, content_type="application/merge-patch+json")

    async def served_apis(self) -> frozenset[str]:
        """Every `group/version` the server serves (discovery, one request), plus the core `v1`."""
        answer = await self._call("GET", "/apis")
        groups = (answer or {}).get("groups") or []
        versions = (
            version.get("groupVersion") for group in groups for version in group.get("versions") or []
        )
        return frozenset({"v1", *(v for v in versions if isinstance(v, str))})

    async def server_minor(self) -> int:
        """The minor version of the server's Kubernetes (its /version; "27+" on some clouds is 27)."""
        answer = await self._call("GET", "/version")
        found = re.match(r"\d+", str((answer or {}).get("minor") or ""))
        if found is None:
            raise ApiError(0, "unreadable /version", "GET", "/version", str(answer))
        return int(found.group())
