"""The operator's one API client (echo_operator.kube): its requests, and errors translated in one place."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from echo_operator import apply
from echo_operator.kube import FIELD_MANAGER, PLURALS, ApiError, Kube, path


def api_exception(status: int, reason: str, message: str = "") -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "message": message}).encode() if message else None
    return error


class FakeApiClient:
    """Records each `call_api` and answers from `answers` in order (an exception is raised)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.closed = False

    async def call_api(self, url: str, method: str, **kwargs: Any) -> Any:
        self.calls.append({"url": url, "method": method, **kwargs})
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def close(self) -> None:
        self.closed = True

    def request(self, index: int = -1) -> tuple[str, str, dict[str, str], str]:
        call = self.calls[index]
        return call["method"], call["url"], dict(call["query_params"]), call["header_params"]["Content-Type"]


def kube(*answers: Any) -> tuple[Kube, FakeApiClient]:
    api = FakeApiClient(*answers)
    return Kube(api, timeout=7.0), api  # type: ignore[arg-type]


SECRET: Mapping[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "acme-key", "namespace": "tenants"},
}


def test_paths_of_core_and_group_kinds() -> None:
    assert path("v1", "Secret", "tenants", "acme-key") == "/api/v1/namespaces/tenants/secrets/acme-key"
    assert path("apps/v1", "Deployment", "tenants") == "/apis/apps/v1/namespaces/tenants/deployments"
    echo = path("echo.dev/v1alpha1", "EchoDeployment", "t", "acme", "status")
    assert echo == "/apis/echo.dev/v1alpha1/namespaces/t/echodeployments/acme/status"
    assert apply.PLURALS is PLURALS  # the chart's RBAC test reads them from apply


async def test_an_api_exception_becomes_an_api_error_with_the_servers_message() -> None:
    client, api = kube(api_exception(422, "Unprocessable Entity", "spec.selector: field is immutable"))
    with pytest.raises(ApiError) as raised:
        await client.apply({**SECRET, "kind": "Service"})
    assert (raised.value.status, raised.value.reason) == (422, "Unprocessable Entity")
    assert raised.value.message == "spec.selector: field is immutable"
    assert isinstance(raised.value.__cause__, ApiException)
    assert str(raised.value).startswith("PATCH /api/v1/namespaces/tenants/services/acme-key: 422")
    assert api.calls[0]["_request_timeout"] == 7.0


async def test_get_is_none_when_missing_and_raises_otherwise() -> None:
    client, _ = kube(api_exception(404, "Not Found"), api_exception(503, "Service Unavailable"))
    assert await client.get("v1", "Secret", "tenants", "acme-key") is None
    with pytest.raises(ApiError) as raised:
        await client.get("v1", "Secret", "tenants", "acme-key")
    assert raised.value.status == 503
    assert raised.value.message == ""


async def test_apply_is_a_forced_server_side_apply() -> None:
    client, api = kube({"metadata": {"name": "acme-key"}})
    assert await client.apply(SECRET) == {"metadata": {"name": "acme-key"}}
    method, url, query, content_type = api.request()
    assert (method, url) == ("PATCH", "/api/v1/namespaces/tenants/secrets/acme-key")
    assert query == {"fieldManager": FIELD_MANAGER, "force": "true"}
    assert content_type == "application/apply-patch+yaml"


async def test_apply_falls_back_to_create_then_to_apply_again() -> None:
    client, api = kube(api_exception(404, "Not Found"), api_exception(409, "Conflict"), {"ok": True})
    assert await client.apply(SECRET) == {"ok": True}
    assert [(c["method"], c["url"]) for c in api.calls] == [
        ("PATCH", "/api/v1/namespaces/tenants/secrets/acme-key"),
        ("POST", "/api/v1/namespaces/tenants/secrets"),
        ("PATCH", "/api/v1/namespaces/tenants/secrets/acme-key"),
    ]
    assert api.request(1)[2] == {"fieldManager": FIELD_MANAGER}


async def test_list_selects_by_labels_and_filters_them_again() -> None:
    items = [
        {"metadata": {"name": "a", "labels": {"app": "x"}}},
        {"metadata": {"name": "b", "labels": {"app": "y"}}},
        {"metadata": {"name": "c"}},
    ]
    client, api = kube({"items": items})
    found = await client.list("apps/v1", "Deployment", "tenants", {"app": "x"})
    assert [item["metadata"]["name"] for item in found] == ["a"]
    assert api.request()[2] == {"labelSelector": "app=x"}


async def test_delete_is_false_when_already_gone() -> None:
    client, api = kube(None, api_exception(404, "Not Found"))
    assert await client.delete("v1", "Secret", "tenants", "acme-key") is True
    assert api.request()[2] == {"propagationPolicy": "Background"}
    assert await client.delete("v1", "Secret", "tenants", "acme-key") is False


async def test_status_patch_carries_the_resource_version() -> None:
    client, api = kube({})
    await client.patch_status(
        "echo.dev/v1alpha1", "EchoDeployment", "t", "acme", {"a": 1}, resource_version="7"
    )
    assert api.calls[0]["body"] == {"status": {"a": 1}, "metadata": {"resourceVersion": "7"}}
    assert api.request()[3] == "application/merge-patch+json"


async def test_discovery_and_version() -> None:
    groups = {"groups": [{"versions": [{"groupVersion": "apps/v1"}, {"groupVersion": "policy/v1beta1"}]}]}
    client, api = kube(groups, {"minor": "27+"}, {"minor": ""})
    assert await client.served_apis() == {"v1", "apps/v1", "policy/v1beta1"}
    assert await client.server_minor() == 27
    with pytest.raises(ApiError) as raised:
        await client.server_minor()
    assert raised.value.status == 0
    await client.close()
    assert api.closed


async def test_cluster_of_asks_the_client() -> None:
    groups = {"groups": [{"versions": [{"groupVersion": "policy/v1beta1"}, {"groupVersion": "apps/v1"}]}]}
    client, _ = kube(groups, {"minor": "20"})
    assert await apply.cluster_of(client) == apply.Cluster(frozenset({"policy/v1beta1"}), 20)


def test_no_other_operator_module_talks_http_or_imports_the_client_library() -> None:
    """Every request the operator makes goes through echo_operator.kube (kopf's own aside)."""
    import ast
    from pathlib import Path

    import echo_operator

    clients = {"kubernetes_asyncio", "kubernetes", "aiohttp", "httpx", "requests", "urllib3"}
    package = Path(echo_operator.__file__).parent
    importers = set()
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(name.split(".")[0] in clients for name in names):
                importers.add(source.stem)
    assert importers == {"kube"}
