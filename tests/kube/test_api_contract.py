"""One API contract, two servers: the test emulator (tests/fakes/kube_emulator.py) answers what a
real kube-apiserver answers to the requests the operator and kopf make, including their mistakes.

Each case runs against the emulator (in its Kubernetes 1.20 mode) always, and against the real
kube-apiserver v1.20.2 when it is built (marked `kube`). A fault the emulator lets through would
reach a real cluster unnoticed — the operator once sent `timeoutSeconds=300.0`, which every real API
server refuses. The one deliberate difference is at the end: the emulator refuses query booleans
that are not true/false/1/0, which a real server reads as true.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import kmock
import pytest
from fakes.kube_emulator import KubeEmulator

pytestmark = pytest.mark.timeout(60)

NS = "contract"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
ECHOS = f"/apis/echo.dev/v1alpha1/namespaces/{NS}/echodeployments"
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


@pytest.fixture
async def emulator() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator() as kube, kmock.Server(kube):
        kube.serve_kubernetes_1_20()
        yield kube


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.kube)])
async def api(request: pytest.FixtureRequest, emulator: KubeEmulator) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on one of the two servers, with namespace `contract` and the CRD in place."""
    if request.param == "emulator":
        async with httpx.AsyncClient(base_url=str(emulator.url).rstrip("/"), timeout=10) as client:
            yield client
        return
    real = request.getfixturevalue("echo_crd")
    headers = {"Authorization": f"Bearer {real.token}"}
    async with httpx.AsyncClient(base_url=real.url, headers=headers, verify=False, timeout=10) as client:
        answer = await client.post("/api/v1/namespaces", json={"metadata": {"name": NS}})
        assert answer.status_code in (201, 409), answer.text
        yield client


def refusal(answer: httpx.Response) -> tuple[int, str, str]:
    body = answer.json()
    assert body["kind"] == "Status", body
    assert body["code"] == answer.status_code
    return answer.status_code, body.get("reason", ""), body["message"]


async def configmap(api: httpx.AsyncClient, **data: str) -> dict[str, Any]:
    name = f"cm-{uuid.uuid4().hex[:8]}"
    answer = await api.post(CONFIGMAPS, json={"metadata": {"name": name}, "data": data})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"watch": "true", "timeoutSeconds": "300.0"}, 'strconv.ParseInt: parsing "300.0": invalid syntax'),
        ({"limit": "ten"}, 'strconv.ParseInt: parsing "ten": invalid syntax'),
        ({"watch": "true", "timeoutSeconds": "1e3"}, 'strconv.ParseInt: parsing "1e3": invalid syntax'),
    ],
)
async def test_integer_parameters_parse_as_integers(
    api: httpx.AsyncClient, query: dict[str, str], message: str
) -> None:
    assert refusal(await api.get(CONFIGMAPS, params=query)) == (400, "BadRequest", message)


async def test_integer_parameters_accept_whole_numbers(api: httpx.AsyncClient) -> None:
    answer = await api.get(CONFIGMAPS, params={"limit": "5", "timeoutSeconds": "30"})
    assert answer.status_code == 200
    assert answer.json()["metadata"]["resourceVersion"].isdigit()


async def test_a_resource_version_is_an_unsigned_integer(api: httpx.AsyncClient) -> None:
    """A 500 (not a 400) on Kubernetes 1.20, for a query and for a body alike."""
    code, _, message = refusal(await api.get(CONFIGMAPS, params={"resourceVersion": "abc"}))
    assert (code, message) == (
        500,
        'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
    )
    created = await configmap(api, a="1")
    url = f"{CONFIGMAPS}/{created['metadata']['name']}"
    body = {"metadata": {"resourceVersion": "abc"}, "data": {"a": "2"}}
    code, _, message = refusal(await api.patch(url, json=body, headers=MERGE))
    assert (code, message) == (500, 'strconv.ParseUint: parsing "abc": invalid syntax')


@pytest.mark.parametrize(
    ("query", "field"),
    [
        (
            {"resourceVersionMatch": "Exact"},
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        ({"resourceVersion": "1", "resourceVersionMatch": "Sometimes"}, 'Unsupported value: "Sometimes"'),
        (
            {"watch": "true", "resourceVersion": "1", "resourceVersionMatch": "NotOlderThan"},
            "forbidden for watch",
        ),
    ],
)
async def test_resource_version_match_rules(
    api: httpx.AsyncClient, query: dict[str, str], field: str
) -> None:
    code, reason, message = refusal(await api.get(CONFIGMAPS, params=query))
    assert (code, reason) == (422, "Invalid")
    assert field in message


async def test_watch_true_in_any_case_is_a_watch_that_ends_at_its_timeout(api: httpx.AsyncClient) -> None:
    await configmap(api, a="1")
    started = asyncio.get_running_loop().time()
    events = []
    params = {"watch": "True", "timeoutSeconds": "1"}  # kubernetes_asyncio's spelling
    async with api.stream("GET", CONFIGMAPS, params=params, timeout=15) as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.strip():
                events.append(json.loads(line))
    assert events
    assert events[0]["type"] == "ADDED"
    assert 0.5 < asyncio.get_running_loop().time() - started < 10


async def test_a_stale_resource_version_is_a_conflict(api: httpx.AsyncClient) -> None:
    created = await configmap(api, a="1")
    url = f"{CONFIGMAPS}/{created['metadata']['name']}"
    current = created["metadata"]["resourceVersion"]
    moved = await api.patch(url, json={"data": {"a": "2"}}, headers=MERGE)
    assert moved.status_code == 200
    stale = {"metadata": {"resourceVersion": current}, "data": {"a": "3"}}
    code, reason, message = refusal(await api.patch(url, json=stale, headers=MERGE))
    assert (code, reason) == (409, "Conflict")
    assert "the object has been modified" in message
    fresh = {"metadata": {"resourceVersion": moved.json()["metadata"]["resourceVersion"]}, "data": {"a": "3"}}
    answer = await api.patch(url, json=fresh, headers=MERGE)
    assert answer.status_code == 200
    assert answer.json()["data"] == {"a": "3"}


async def test_status_patches_honour_the_resource_version(api: httpx.AsyncClient) -> None:
    body: dict[str, Any] = {
        "apiVersion": "echo.dev/v1alpha1",
        "kind": "EchoDeployment",
        "metadata": {"name": f"e-{uuid.uuid4().hex[:8]}"},
        "spec": {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}},
    }
    created = await api.post(ECHOS, json=body)
    assert created.status_code == 201, created.text
    status_url = f"{ECHOS}/{body['metadata']['name']}/status"
    version = created.json()["metadata"]["resourceVersion"]
    first: dict[str, Any] = {"metadata": {"resourceVersion": version}, "status": {"observedGeneration": 1}}
    assert (await api.patch(status_url, json=first, headers=MERGE)).status_code == 200
    assert refusal(await api.patch(status_url, json=first, headers=MERGE))[:2] == (409, "Conflict")

    typo = {"status": {"observedGeneration": "one"}}
    code, reason, message = refusal(await api.patch(status_url, json=typo, headers=MERGE))
    assert (code, reason) == (422, "Invalid")
    assert "status.observedGeneration in body must be of type integer" in message


async def test_metadata_is_typed(api: httpx.AsyncClient) -> None:
    body = {"metadata": {"name": "typed", "labels": {"replicas": 3}}, "data": {}}
    code, reason, message = refusal(await api.post(CONFIGMAPS, json=body))
    assert (code, reason) == (400, "BadRequest")
    assert 'ObjectMeta.Labels: ReadString: expects " or n' in message
    created = await configmap(api, a="1")
    url = f"{CONFIGMAPS}/{created['metadata']['name']}"
    patch = {"metadata": {"resourceVersion": 5}}
    assert refusal(await api.patch(url, json=patch, headers=MERGE))[:2] == (422, "Invalid")


async def test_kubernetes_1_20_serves_the_older_pdb_and_hpa_versions(api: httpx.AsyncClient) -> None:
    assert (await api.get("/version")).json()["minor"] == "20"
    assert (await api.get("/apis/policy/v1")).status_code == 404
    assert (await api.get("/apis/autoscaling/v2")).status_code == 404
    pdbs = f"/apis/policy/v1beta1/namespaces/{NS}/poddisruptionbudgets"
    hpas = f"/apis/autoscaling/v2beta2/namespaces/{NS}/horizontalpodautoscalers"
    assert (await api.get(pdbs)).status_code == 200
    assert (await api.get(hpas)).status_code == 200
    discovered = (await api.get("/apis")).json()["groups"]
    versions = {v["groupVersion"] for group in discovered for v in group["versions"]}
    assert {"policy/v1beta1", "autoscaling/v2beta2"} <= versions
    assert not {"policy/v1", "autoscaling/v2"} & versions


async def test_a_numeric_quantity_breaks_a_server_side_apply(api: httpx.AsyncClient) -> None:
    """Before 1.21 a server-side apply wants quantities as strings; a create takes numbers."""
    name = f"d-{uuid.uuid4().hex[:8]}"
    labels = {"app": name}
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    url = f"/apis/apps/v1/namespaces/{NS}/deployments"
    query = {"fieldManager": "contract", "force": "true"}
    answer = await api.patch(f"{url}/{name}", params=query, content=json.dumps(manifest), headers=APPLY)
    code, _, message = refusal(answer)
    assert code == 500
    assert message.endswith(
        ".resources.limits.nvidia.com/gpu: expected string, got &value.valueUnstructured{Value:1}"
    )
    assert (await api.post(url, json=manifest)).status_code == 201


async def test_a_field_the_schema_lacks_breaks_a_server_side_apply(api: httpx.AsyncClient) -> None:
    """1.20 has no StatefulSet PVC retention policy: an apply naming it is a 500, a create drops it."""
    name = f"s-{uuid.uuid4().hex[:8]}"
    labels = {"app": name}
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    url = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
    query = {"fieldManager": "contract", "force": "true"}
    code, _, message = refusal(
        await api.patch(f"{url}/{name}", params=query, content=json.dumps(manifest), headers=APPLY)
    )
    assert code == 500
    assert message.endswith(".spec.persistentVolumeClaimRetentionPolicy: field not declared in schema")
    created = await api.post(url, json=manifest)
    assert created.status_code == 201
    assert "persistentVolumeClaimRetentionPolicy" not in created.json()["spec"]


async def test_patch_options(api: httpx.AsyncClient) -> None:
    created = await configmap(api, a="1")
    url = f"{CONFIGMAPS}/{created['metadata']['name']}"
    forced = await api.patch(url, params={"force": "true"}, json={"data": {"a": "2"}}, headers=MERGE)
    assert refusal(forced)[:2] == (422, "Invalid")
    assert "may not be specified for non-apply patch" in refusal(forced)[2]
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": created["metadata"]["name"]}}
    unnamed = await api.patch(url, content=json.dumps(manifest), headers=APPLY)
    assert refusal(unnamed)[:2] == (422, "Invalid")
    assert "fieldManager" in refusal(unnamed)[2]


async def test_delete_options(api: httpx.AsyncClient) -> None:
    created = await configmap(api, a="1")
    url = f"{CONFIGMAPS}/{created['metadata']['name']}"
    code, reason, message = refusal(await api.delete(url, params={"propagationPolicy": "Sometimes"}))
    assert (code, reason) == (422, "Invalid")
    assert 'Unsupported value: "Sometimes"' in message
    assert (await api.delete(url, params={"propagationPolicy": "Background"})).status_code == 200


@pytest.mark.parametrize("value", ["yes", "banana", ""])
async def test_the_emulator_refuses_booleans_a_real_server_would_misread(
    emulator: KubeEmulator, value: str
) -> None:
    """A real server takes `watch=yes` (and `watch=no`!) as true; the emulator refuses both (400)."""
    async with httpx.AsyncClient(base_url=str(emulator.url).rstrip("/"), timeout=10) as client:
        answer = await client.get(CONFIGMAPS, params={"watch": value})
    assert refusal(answer)[:2] == (400, "BadRequest")
