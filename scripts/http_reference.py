"""The HTTP route reference (docs/http-api.md), written from echo-hooks' own `/openapi.json`.

    .venv/bin/python scripts/http_reference.py docs/http-api.md

The app is built as `echoctl serve` builds it (`create_app`) with fixed settings — both keys set, so
every route names the key it takes, and a Gemini key, so the `echo.<model>` pipe's routes are
served — and nothing read from the environment, so the page is the same on every machine.
`tests/integration/test_http_reference.py` fails when the page is stale.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from echo.config.settings import Settings
from echo.entrypoints.http import create_app

__all__ = ["openapi", "render"]

# Served without a key besides what the document lists (the document leaves itself out).
UNDOCUMENTED = ("/openapi.json", "/tools/openapi.json")
METHODS = ("get", "post", "put", "patch", "delete")


class _Pinned(Settings):
    """Settings from the constructor's arguments only: no `ECHO_*` variable, no file."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def openapi() -> dict[str, Any]:
    """The app's `/openapi.json`, as a client fetches it, and checks that the undocumented public
    documents are served."""
    with tempfile.TemporaryDirectory() as data_dir:
        settings = _Pinned(
            data_dir=Path(data_dir),
            api_key="reference-hooks-key",
            admin_key="reference-admin-key",
            gemini_api_key="reference-gemini-key",
            gemini_base_url="http://127.0.0.1:9",  # never called
        )
        with TestClient(create_app(settings)) as client:
            document: dict[str, Any] = client.get("/openapi.json").json()
            for path in UNDOCUMENTED:
                answer = client.get(path)
                if answer.status_code != 200 or path in document["paths"]:
                    raise SystemExit(f"{path}: expected served without a key and not in the document")
    return document


def _one_line(text: str | None) -> str:
    """The first paragraph of a description, on one line, safe in a table cell."""
    first = (text or "").strip().split("\n\n", 1)[0]
    return " ".join(first.split()).replace("|", "\\|")


def _schema_name(schema: Mapping[str, Any] | None) -> str:
    if not schema:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return f"[`{name}`](#schema-{name.lower()})"
    title = schema.get("title", "")
    named = f"`{title}` " if title and not title.startswith("Response ") else ""  # FastAPI's own titles
    kind = schema.get("type")
    if kind == "array":
        return f"{named}array of {_schema_name(schema.get('items'))}"
    if "properties" in schema:
        return f"{named or 'object '}{{{_fields(schema)}}}"
    return named.strip() or (f"`{kind}`" if kind else "any")


def _fields(schema: Mapping[str, Any]) -> str:
    """`name` for a required field, `name?` for an optional one."""
    required = schema.get("required", ())
    return ", ".join(f"`{name}`" + ("" if name in required else "?") for name in schema.get("properties", {}))


def _bodies(content: Mapping[str, Any] | None) -> str:
    if not content:
        return "—"
    return "; ".join(f"{_schema_name(item.get('schema'))} (`{media}`)" for media, item in content.items())


def _auth(operation: Mapping[str, Any], schemes: Mapping[str, Any]) -> str:
    names = [name for requirement in operation.get("security", []) for name in requirement]
    if not names:
        return "none (public)"
    keys = []
    for name in names:
        found = re.search(r"ECHO_[A-Z_]+", schemes.get(name, {}).get("description", ""))
        keys.append(f"`{found.group(0)}` ({name})" if found else f"`{name}`")
    return ", ".join(keys)


def _anchor(method: str, path: str) -> str:
    return f"{method}-" + re.sub(r"[^a-z0-9_]+", "-", path.lower()).strip("-")


def _operations(document: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], bool]]:
    """(method, path, operation, also under /v1), the /v1 twin of a route folded into it."""
    paths = document["paths"]
    for path, item in paths.items():
        for method in METHODS:
            if method not in item:
                continue
            twin = paths.get(f"/v1{path}", {}).get(method)
            if path.startswith("/v1/") and method in paths.get(path[3:], {}):
                continue  # shown with its twin
            yield method, path, item[method], twin is not None


def _parameters(operation: Mapping[str, Any]) -> str:
    found = []
    for parameter in operation.get("parameters", []):
        required = "" if parameter.get("required") else ", optional"
        found.append(f"`{parameter['name']}` ({parameter['in']}{required})")
    return ", ".join(found) or "—"


def render(document: Mapping[str, Any]) -> str:
    schemes = document.get("components", {}).get("securitySchemes", {})
    operations = list(_operations(document))
    lines = [
        "# Route reference",
        "",
        f"Every route of echo-hooks {document['info']['version']}, from the app's own `/openapi.json`.",
        "Generated by `scripts/http_reference.py`; do not edit by hand. How the routes behave: "
        "[The HTTP interface](http.md).",
        "",
        "A route marked `/v1` is served on `/` and `/v1` alike (Open WebUI calls `{base}/models`). "
        "Auth names the bearer key a route takes: `ECHO_API_KEY` (Open WebUI's) or `ECHO_ADMIN_KEY` "
        "(operators'). Also served without a key, and not in the document: "
        + ", ".join(f"`GET {path}`" for path in UNDOCUMENTED)
        + ".",
        "",
        "Bodies are named by their schema; `{a, b?}` lists an object's fields, `?` marking an optional one.",
        "",
        "| method | path | summary | auth |",
        "|---|---|---|---|",
    ]
    for method, path, operation, twin in operations:
        shown = f"`{path}`" + (" + `/v1`" if twin else "")
        link = f"[{method.upper()}](#{_anchor(method, path)})"
        summary = _one_line(operation.get("summary"))
        lines.append(f"| {link} | {shown} | {summary} | {_auth(operation, schemes)} |")
    for method, path, operation, twin in operations:
        lines += ["", f"## `{method.upper()} {path}` {{#{_anchor(method, path)}}}", ""]
        summary, description = _one_line(operation.get("summary")), _one_line(operation.get("description"))
        lines += [summary + (f". {description}" if description and description != summary else ""), ""]
        lines.append(f"- Auth: {_auth(operation, schemes)}")
        if twin:
            lines.append(f"- Also served as `/v1{path}`")
        lines.append(f"- Parameters: {_parameters(operation)}")
        lines.append(f"- Request body: {_bodies(operation.get('requestBody', {}).get('content'))}")
        lines += ["", "| status | body | meaning |", "|---|---|---|"]
        for status, response in operation.get("responses", {}).items():
            meaning = _one_line(response.get("description"))
            lines.append(f"| {status} | {_bodies(response.get('content'))} | {meaning} |")
    lines += ["", "## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        fields = _fields(schema)
        lines += [f"### `{name}` {{#schema-{name.lower()}}}", ""]
        lines.append(_one_line(schema.get("description")) or "—")
        if fields:
            lines += ["", f"Fields: {{{fields}}}"]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":  # pragma: no cover - regenerating the page
    Path(sys.argv[1]).write_text(render(openapi()), encoding="utf-8")
