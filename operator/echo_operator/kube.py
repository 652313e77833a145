"""The operator's one Kubernetes API client: every request the operator makes itself goes here.

`Kube` owns a `kubernetes_asyncio` ApiClient (the in-cluster service account, else a kubeconfig)
and offers the few operations the handlers need: get, list by labels, create, server-side apply,
delete, status merge-patch, and the discovery of served APIs and of the server's version. Each is a
REST path away (`path`, from the kinds in `PLURALS`): nothing depends on typed models, so any kind,
built in or custom, is reached the same way. This is the only module that imports
`kubernetes_asyncio` (an import-linter contract says so); its errors become `ApiError` in one place
(`Kube._call`), and callers test `ApiError.status`.

Server-side apply uses the field manager `echo-operator` with `force`. A server that answers 404
to an apply of a missing object (the test emulator; a real API server creates it) gets a POST
instead, and a POST that meets 409 (created meanwhile) is applied again.

kopf keeps its own connection (its login handler, `handlers.login`) for what kopf does: watches,
the handlers' `patch` (status, finalizers, its progress annotations) and the Events it posts
from handler logs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

__all__ = ["FIELD_MANAGER", "PLURALS", "ApiError", "Kube", "path"]

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
    ("batch/v1", "Job"): "jobs",  # the Open WebUI connect Job (render_openwebui)
    ("echo.dev/v1alpha1", "EchoDeployment"): "echodeployments",
    ("v1", "Pod"): "pods",  # read only: why a workload is not ready (status.pod_problem)
}
"""(apiVersion, kind) -> resource name, for every kind the operator reads or writes (the chart's RBAC
grants exactly these: tests/integration/test_chart.py)."""
_OBJECT = {200: "object", 201: "object", 202: "object"}
_SERVER_SIDE_APPLY = "application/apply-patch+yaml"
_MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    """An API call failed; `status` is the HTTP status (0 when there was no answer)."""

    def __init__(self, status: int, reason: str, method: str, url: str, message: str = "") -> None:
        super().__init__(f"{method} {url}: {status} {reason}" + (f": {message}" if message else ""))
        self.status = status
        self.reason = reason
        self.message = message


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


def _where(manifest: Mapping[str, Any]) -> tuple[str, str, str | None, str]:
    meta = manifest["metadata"]
    return manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"]


class Kube:
    """Async access to the Kubernetes API for the handlers (one per operator process, in kopf's memo)."""

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
        """One request, its JSON answer decoded; the one place an ApiException becomes an ApiError."""
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
        """The object, or None when there is none."""
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
        """POST the object (field manager echo-operator); an existing one is an ApiError 409."""
        api_version, kind, namespace, _ = _where(manifest)
        url = path(api_version, kind, namespace)
        return await self._call("POST", url, body=dict(manifest), query={"fieldManager": FIELD_MANAGER})

    async def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply (field manager echo-operator, force); see the module doc for fallbacks."""
        url = path(*_where(manifest))
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        try:
            return await self._call(
                "PATCH", url, body=dict(manifest), query=query, content_type=_SERVER_SIDE_APPLY
            )
        except ApiError as error:
            if error.status != 404:
                raise
        try:
            return await self.create(manifest)
        except ApiError as error:
            if error.status != 409:
                raise
        return await self._call(
            "PATCH", url, body=dict(manifest), query=query, content_type=_SERVER_SIDE_APPLY
        )

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
        return await self._call("PATCH", url, body=body, content_type=_MERGE_PATCH)

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
