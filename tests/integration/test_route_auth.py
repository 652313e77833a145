"""Every route of echo-hooks, enumerated from the app itself, refuses a missing or wrong bearer key,
except the documented public ones (README, HTTP interface: "Without auth"). A route added later is
checked too: nothing has to remember to list it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fakes.shared_data import API_KEY
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from echo.config.settings import Settings
from echo.hooks import create_app

PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"), ("GET", "/tools/openapi.json")}
PUBLIC |= {("GET", "/openapi.json")}  # FastAPI's own document of the routes (no data; schemathesis reads it)
REFUSED = [
    {},
    {"Authorization": "Bearer wrong-key"},
    {"Authorization": f"Basic {API_KEY}"},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {API_KEY}x"},
]


@pytest.fixture
def app(tmp_path: Path) -> object:
    settings = Settings(
        data_dir=tmp_path / "echo",
        api_key=API_KEY,
        gemini_api_key="fake",  # so the echo.* pipe's routes are served too
        gemini_base_url="http://127.0.0.1:9",
        config_reload_seconds=60,
    )
    return create_app(settings)


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


def test_every_route_but_the_public_ones_refuses_a_missing_or_wrong_key(app: object) -> None:
    routes = routes_of(app)
    assert len(routes) > 30  # protocol, pipe, memories, chats, tools, ops, on / and /v1
    assert {path for _, path in routes} >= {"/chat/completions", "/v1/{hook_id}/filter/{phase}"}
    with TestClient(app) as client:  # type: ignore[arg-type]
        for method, path in routes:
            url = re.sub(r"\{[^}]+\}", "x", path)
            for headers in REFUSED:
                answer = client.request(method, url, headers=headers, json={})
                if (method, path) in PUBLIC:
                    assert answer.status_code != 401, (method, path)
                else:
                    assert answer.status_code == 401, (method, path, headers, answer.text[:200])
                    assert answer.headers["www-authenticate"] == "Bearer"
                    assert "bearer key" in answer.json()["detail"]


def test_the_public_routes_are_what_the_readme_says(app: object) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    said = readme.split("Without auth:", 1)[1].split("\n\n", 1)[0]
    served = {path for method, path in routes_of(app) if (method, path) in PUBLIC}
    assert served == {path for _, path in PUBLIC}
    for path in served:
        assert f"`GET {path}`" in said, path
