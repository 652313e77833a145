"""The memory API and the tool server without backends: clear 503s naming what is missing, and the
checks of what they are sent (422 naming the field or header) before anything else."""

from __future__ import annotations

import httpx
import pytest
from fakes.live_server import LiveServer


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/memories?user_id=u1", None),
        ("GET", "/v1/memories?user_id=u1", None),
        ("POST", "/memories/search", {"user_id": "u1", "query": "cello"}),
        ("GET", "/memories/m1?user_id=u1", None),
        ("DELETE", "/memories/m1?user_id=u1", None),
        ("DELETE", "/users/u1", None),
    ],
)
def test_without_a_store_the_memory_api_answers_503(
    client: httpx.Client, admin: dict[str, str], method: str, path: str, body: object
) -> None:
    answer = client.request(method, path, json=body, headers=admin)
    assert answer.status_code == 503
    assert "no store" in answer.json()["detail"]


def test_the_tool_checks_its_request_before_its_backends(client: httpx.Client) -> None:
    no_user = client.post("/tools/search_memories", json={"query": "cello"})
    assert no_user.status_code == 422
    assert "x-openwebui-user-id" in no_user.json()["detail"]["message"]
    bad = client.post("/tools/search_memories", json={"query": ""}, headers={"x-openwebui-user-id": "u1"})
    assert bad.status_code == 422
    assert "query" in str(bad.json()["detail"])
    no_store = client.post(
        "/tools/search_memories", json={"query": "cello"}, headers={"x-openwebui-user-id": "u1"}
    )
    assert no_store.status_code == 503


def test_the_tool_openapi_is_public_and_names_its_operation(hooks_server: LiveServer) -> None:
    url = hooks_server.url
    spec = httpx.get(f"{url}/tools/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    operation = spec["paths"]["/tools/search_memories"]["post"]
    assert operation["operationId"] == "search_memories"
    assert spec["security"] == [{"bearer": []}]
    assert "x-openwebui-user-id" not in str(operation.get("parameters", []))  # Open WebUI sends it itself


def test_every_memory_api_answer_without_a_store_is_the_documented_one(
    client: httpx.Client, admin: dict[str, str]
) -> None:
    import jsonschema

    spec = client.get("/openapi.json").json()
    for method, path, template, params in [
        ("GET", "/memories", "/memories", {"user_id": "u1"}),
        ("GET", "/memories/m1", "/memories/{memory_id}", {"user_id": "u1"}),
        ("DELETE", "/memories/m1", "/memories/{memory_id}", {"user_id": "u1"}),
        ("DELETE", "/users/u1", "/users/{user_id}", {}),
        ("GET", "/memories", "/memories", {"user_id": "u1", "limit": "x"}),
        ("DELETE", "/users/u%00", "/users/{user_id}", {}),
    ]:
        answer = client.request(method, path, params=params, headers=admin)
        documented = spec["paths"][template][method.lower()]["responses"][str(answer.status_code)]
        schema = documented["content"]["application/json"]["schema"]
        jsonschema.validate(answer.json(), {**schema, "components": spec["components"]})
