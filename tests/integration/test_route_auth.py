"""Every route of echo-hooks, enumerated from the app itself, refuses a missing or wrong bearer key,
except the documented public ones (docs/http.md, "Public routes"). A route added later is
checked too: nothing has to remember to list it.

Two keys (DESIGN §3, §7): the hooks' key `ECHO_API_KEY` (Open WebUI's) for the Pipelines protocol, the
pipe and the tool server; the admin key `ECHO_ADMIN_KEY` for the memory-management API (`/memories…`,
`/users/…`) and `POST /chats/{chat_id}/compact`. Neither key opens the other's routes, and the key is
checked before a byte of the body is read.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from fakes import asgi
from fakes.shared_data import ADMIN_KEY, API_KEY
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from echo.config.settings import Settings
from echo.entrypoints.http import create_app

PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"), ("GET", "/tools/openapi.json")}
PUBLIC |= {("GET", "/openapi.json")}  # FastAPI's own document of the routes (no data; schemathesis reads it)
# The memory-management API and manual compaction, on `/` and `/v1` (DESIGN §3).
ADMIN_PATH = re.compile(r"^(/v1)?(/memories(/.*)?|/users/.*|/chats/\{chat_id\}/compact)$")
REFUSED = [
    {},
    {"Authorization": "Bearer wrong-key"},
    {"Authorization": f"Basic {API_KEY}"},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {API_KEY}x"},
    {"Authorization": f"Bearer {ADMIN_KEY}x"},
]
HOOKS = {"Authorization": f"Bearer {API_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


LOOPBACK = "http://127.0.0.1:9099"


def _settings(tmp_path: Path, **keys: Any) -> Settings:
    return Settings(
        data_dir=tmp_path / "echo",
        gemini_api_key="fake",  # so the echo.* pipe's routes are served too
        gemini_base_url="http://127.0.0.1:9",
        config_reload_seconds=60,
        **keys,
    )


@pytest.fixture
def app(tmp_path: Path) -> Any:
    return create_app(_settings(tmp_path, api_key=API_KEY, admin_key=ADMIN_KEY))


def _paths(route: object) -> list[tuple[set[str], str]]:
    """(methods, full path) of a route; an included router (FastAPI >= 0.165 keeps those lazily)
    gives its routes with their prefixes."""
    contexts = getattr(route, "effective_route_contexts", None)
    if contexts is not None:
        return [(set(c.methods or {"GET"}), c.path) for c in contexts()]
    assert isinstance(route, APIRoute) or getattr(route, "path", None) == "/openapi.json", route
    return [(set(getattr(route, "methods", None) or {"GET"}), route.path)]  # type: ignore[attr-defined]


def routes_of(app: object) -> list[tuple[str, str]]:
    found = []
    for route in app.routes:  # type: ignore[attr-defined]
        for methods, path in _paths(route):
            found += [(method, path) for method in sorted(methods) if method != "HEAD"]
    return found


def _url(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def test_every_route_but_the_public_ones_refuses_a_missing_or_wrong_key(app: Any) -> None:
    routes = routes_of(app)
    assert len(routes) > 30  # protocol, pipe, memories, chats, tools, ops, on / and /v1
    assert {path for _, path in routes} >= {"/chat/completions", "/v1/{hook_id}/filter/{phase}"}
    admin_routes = [(m, p) for m, p in routes if ADMIN_PATH.match(p)]
    assert {p for _, p in admin_routes} >= {"/memories", "/v1/users/{user_id}", "/chats/{chat_id}/compact"}
    with TestClient(app) as client:
        for method, path in routes:
            url = _url(path)
            for headers in REFUSED:
                answer = client.request(method, url, headers=headers, json={})
                if (method, path) in PUBLIC:
                    assert answer.status_code != 401, (method, path)
                else:
                    assert answer.status_code == 401, (method, path, headers, answer.text[:200])
                    assert answer.headers["www-authenticate"] == "Bearer"
                    assert "bearer key" in answer.json()["detail"]
            if (method, path) in PUBLIC:
                continue
            own, other = (ADMIN, HOOKS) if (method, path) in admin_routes else (HOOKS, ADMIN)
            assert client.request(method, url, headers=own, json={}).status_code not in (401, 403), path
            refused = client.request(method, url, headers=other, json={})
            assert refused.status_code == 403, (method, path, refused.text[:200])
            assert "ECHO_ADMIN_KEY" in refused.json()["detail"]


def test_the_hooks_key_cannot_list_or_forget_users(app: Any) -> None:
    with TestClient(app) as client:
        for method, url in (
            ("GET", "/memories?user_id=bob"),
            ("DELETE", "/users/bob"),
            ("DELETE", "/v1/users/bob"),
        ):
            answer = client.request(method, url, headers=HOOKS)
            assert answer.status_code == 403, (url, answer.text)
            assert "cannot" in answer.json()["detail"]
            assert "ECHO_ADMIN_KEY" in answer.json()["detail"]
        compact = client.post("/chats/c1/compact", headers=HOOKS, json={"user_id": "bob"})
        assert compact.status_code == 403


def test_the_key_is_checked_before_a_byte_of_the_body_is_read(app: Any) -> None:
    """A 1 GiB body without (or with the wrong) key: the answer comes and nothing was read."""
    huge = [
        ("content-type", "application/json"),
        ("content-length", str(2**30)),
    ]

    async def scenario() -> None:
        for method, path in routes_of(app):
            if (method, path) in PUBLIC:
                continue
            wrong = HOOKS if ADMIN_PATH.match(path) else ADMIN
            for headers in ([], [("authorization", "Bearer nope")], list(wrong.items())):
                exchange = await asgi.call(
                    app, method, _url(path), headers=[*huge, *headers], chunks=iter(lambda: b"x" * 65536, b"")
                )
                assert exchange.status in (401, 403), (method, path, exchange.status, exchange.body[:200])
                assert exchange.reads == 0, (method, path)

    asyncio.run(scenario())


def test_two_authorization_headers_are_refused(app: Any) -> None:
    async def scenario() -> asgi.Exchange:
        headers = [("authorization", f"Bearer {API_KEY}"), ("authorization", "Bearer other")]
        return await asgi.call(app, "GET", "/models", headers=headers)

    exchange = asyncio.run(scenario())
    assert exchange.status == 401
    assert "one Authorization header" in exchange.json()["detail"]


def test_a_proxy_prefix_cannot_make_an_admin_route_look_like_another(app: Any) -> None:
    async def scenario(path: str, headers: dict[str, str]) -> asgi.Exchange:
        return await asgi.call(app, "GET", path, headers=list(headers.items()), root_path="/echo")

    assert asyncio.run(scenario("/echo/memories?user_id=bob", HOOKS)).status == 403
    assert asyncio.run(scenario("/echo/v1/users/bob", {})).status == 401
    assert asyncio.run(scenario("/echo/memories?user_id=bob", ADMIN)).status == 503  # no store here
    assert asyncio.run(scenario("/echo/healthz", {})).status == 200


def test_without_an_admin_key_the_memory_management_api_is_off(tmp_path: Path) -> None:
    with TestClient(create_app(_settings(tmp_path, api_key=API_KEY))) as client:
        for headers in ({}, HOOKS, ADMIN):
            for method, url in (
                ("GET", "/memories?user_id=u1"),
                ("DELETE", "/users/u1"),
                ("POST", "/chats/c1/compact"),
            ):
                answer = client.request(method, url, headers=headers)
                assert answer.status_code == 403, (url, answer.text)
                assert "set ECHO_ADMIN_KEY to enable the memory-management API" in answer.json()["detail"]
        assert client.get("/models", headers=HOOKS).status_code == 200


def test_with_auth_off_every_route_is_open(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path, allow_unauthenticated=True))
    with TestClient(app, base_url=LOOPBACK) as client:
        for method, path in routes_of(app):
            answer = client.request(method, _url(path), json={})
            assert answer.status_code not in (401, 403), (method, path, answer.text[:200])


def test_an_admin_key_set_is_required_even_with_the_hooks_routes_open(tmp_path: Path) -> None:
    with TestClient(
        create_app(_settings(tmp_path, allow_unauthenticated=True, admin_key=ADMIN_KEY)), base_url=LOOPBACK
    ) as client:
        assert client.get("/models").status_code == 200
        assert client.get("/memories?user_id=u1").status_code == 401
        assert client.get("/memories?user_id=u1", headers=ADMIN).status_code == 503  # no store here


@pytest.mark.parametrize(
    ("host", "allowed", "status"),
    [
        ("127.0.0.1:9099", [], 200),
        ("localhost:9099", [], 200),
        ("[::1]:9099", [], 200),
        ("echo.localhost", [], 200),
        ("attacker.example:9099", [], 421),  # a page that rebound its domain to 127.0.0.1
        ("127.0.0.1.attacker.example", [], 421),
        ("host.docker.internal:9099", ["host.docker.internal"], 200),
    ],
)
def test_without_auth_only_loopback_or_allowed_host_names_are_served(
    tmp_path: Path, host: str, allowed: list[str], status: int
) -> None:
    """DNS rebinding: the browser calls it same-origin, so JSON goes through with no preflight; only
    the Host header tells that the page is not this service's."""
    app = create_app(_settings(tmp_path, allow_unauthenticated=True, allowed_hosts=allowed))
    with TestClient(app, base_url=LOOPBACK) as client:
        answer = client.post("/echo_compression/valves/update", json={"keep_last": 3}, headers={"host": host})
        assert answer.status_code == status, answer.text
        if status == 421:
            assert "ECHO_ALLOWED_HOSTS" in answer.json()["detail"]
            assert client.get("/echo_compression/valves").json()["keep_last"] != 3


def test_with_a_key_the_host_is_not_checked(app: Any) -> None:
    with TestClient(app) as client:  # Host: testserver
        assert client.get("/models", headers=HOOKS).status_code == 200


def test_the_openapi_names_the_key_each_route_takes(app: Any) -> None:
    with TestClient(app) as client:
        spec = client.get("/openapi.json").json()
        tools = client.get("/tools/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"]["scheme"] == "bearer"
    assert "ECHO_API_KEY" in schemes["bearer"]["description"]
    assert schemes["admin"]["scheme"] == "bearer"
    assert "ECHO_ADMIN_KEY" in schemes["admin"]["description"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if (method.upper(), path) in PUBLIC:
                assert "security" not in operation, path
            elif ADMIN_PATH.match(path):
                assert operation["security"] == [{"admin": []}], (method, path)
                assert {"401", "403"} <= set(operation["responses"]), (method, path)
            else:
                assert operation["security"] == [{"bearer": []}], (method, path)
                assert "401" in operation["responses"], (method, path)
    assert tools["security"] == [{"bearer": []}]
    assert set(tools["components"]["securitySchemes"]) == {"bearer"}


def test_the_public_routes_are_what_the_docs_say(app: Any) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text(encoding="utf-8")
    said = page.split("Public (no key", 1)[1].split("\n\n", 1)[0]
    served = {path for method, path in routes_of(app) if (method, path) in PUBLIC}
    assert served == {path for _, path in PUBLIC}
    for path in served:
        assert f"`GET {path}`" in said, path
