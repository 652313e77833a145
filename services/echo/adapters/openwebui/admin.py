"""`OpenWebUIAdmin`: the admin endpoints of Open WebUI's API that `echoctl openwebui connect` uses (httpx).

Each method is one call, as Open WebUI 0.12.4 defines it (the file that defines it in brackets):

- `version()`: `GET /api/version`, public (main.py);
- `functions()`: `GET /api/v1/functions/export?include_valves=true`, every Function with its
  content, valves, `is_active` and `is_global` (routers/functions.py) — one call, and no guessing:
  `GET /api/v1/functions/id/{id}` answers 401 both for a refused key and for a missing Function;
- `create_function`, `update_function`: `POST /api/v1/functions/create`, `…/id/{id}/update`;
- `set_function_valves`: `POST …/id/{id}/valves/update` (replaces the stored valves);
- `toggle_function`, `toggle_function_global`: `POST …/id/{id}/toggle`, `…/toggle/global` (each
  flips `is_active`, `is_global`: call them only when the flag is not yet set);
- `tool_servers`, `set_tool_servers`: `GET`/`POST /api/v1/configs/tool_servers` (the whole list of
  `TOOL_SERVER_CONNECTIONS`; routers/configs.py), `verify_tool_server`: `POST …/tool_servers/verify`
  (Open WebUI fetches the server's OpenAPI document itself, so it proves Open WebUI reaches it);
- `default_model_params`: `GET /api/v1/configs/models` → `DEFAULT_MODEL_PARAMS` (routers/configs.py);
  `models`: `GET /api/v1/models/all`, the model records with their `params` (routers/models.py);
- `chat_config`: `GET /api/v1/chats/config` (`ENABLE_CONTEXT_COMPACTION`…; routers/chats.py);
- `config_namespace(ns)`: `GET /api/v1/configs/namespace/{ns}` (`memories.*`; routers/configs.py).

The key is an admin's API key (`sk-…`, Open WebUI needs `ENABLE_API_KEYS=true`) or a session token.
Errors are `AdminError` (what failed: the method, the path, the status and Open WebUI's `detail`),
`AdminKeyRefused` for 401/403. No message ever holds the key, nor any string passed as ``redact``
(Open WebUI's error details may quote a request's input, valves included). A read that Open WebUI
does not serve (404, an older version) is None: the caller says "cannot check".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from echo.adapters.openwebui import client

__all__ = ["AdminError", "AdminKeyRefused", "OpenWebUIAdmin", "Verification"]

_DETAIL_CHARS = 300  # of Open WebUI's error detail kept in a message


class AdminError(client.OpenWebUIError):
    """A call of Open WebUI's admin API failed; the message names the call and why, never a key."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status


class AdminKeyRefused(AdminError):
    """Open WebUI answered 401/403: the key is wrong, expired, not an admin's, or API keys are off."""


@dataclass(frozen=True)
class Verification:
    """What `POST /api/v1/configs/tool_servers/verify` said: ``ok``, the OpenAPI paths Open WebUI
    read, or Open WebUI's ``detail`` of why it could not."""

    ok: bool
    paths: tuple[str, ...] = ()
    detail: str = ""


class OpenWebUIAdmin:
    """Open WebUI at ``base_url`` (its root) with an admin ``key``. Pass ``client`` to inject a
    transport (tests); it is then not closed by ``aclose``."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout_s: float = 10.0,
        redact: Iterable[str] = (),
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.strip().rstrip("/")
        self._own = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout_s)
        self._headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
        self._secrets = tuple(s for s in (key, *redact) if s)
        self.timeout_s = timeout_s

    async def __aenter__(self) -> OpenWebUIAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    def redacted(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    # -- the calls

    async def version(self) -> str | None:
        body = await self._call("GET", "/api/version", auth=False, missing_ok=True)
        return str(body.get("version")) if isinstance(body, dict) and body.get("version") else None

    async def functions(self) -> list[dict[str, Any]]:
        body = await self._call("GET", "/api/v1/functions/export", params={"include_valves": "true"})
        return _objects(body, "GET /api/v1/functions/export")

    async def create_function(
        self, function_id: str, name: str, content: str, description: str
    ) -> dict[str, Any]:
        form = _function_form(function_id, name, content, description)
        return _object(await self._call("POST", "/api/v1/functions/create", json=form), "the new Function")

    async def update_function(
        self, function_id: str, name: str, content: str, description: str
    ) -> dict[str, Any]:
        form = _function_form(function_id, name, content, description)
        path = f"/api/v1/functions/id/{quote(function_id, safe='')}/update"
        return _object(await self._call("POST", path, json=form), "the updated Function")

    async def set_function_valves(self, function_id: str, valves: dict[str, Any]) -> dict[str, Any]:
        path = f"/api/v1/functions/id/{quote(function_id, safe='')}/valves/update"
        return _object(await self._call("POST", path, json=valves), "the Function's valves")

    async def toggle_function(self, function_id: str) -> dict[str, Any]:
        path = f"/api/v1/functions/id/{quote(function_id, safe='')}/toggle"
        return _object(await self._call("POST", path), "the Function")

    async def toggle_function_global(self, function_id: str) -> dict[str, Any]:
        path = f"/api/v1/functions/id/{quote(function_id, safe='')}/toggle/global"
        return _object(await self._call("POST", path), "the Function")

    async def tool_servers(self) -> list[dict[str, Any]]:
        body = _object(await self._call("GET", "/api/v1/configs/tool_servers"), "the tool servers")
        return _objects(body.get("TOOL_SERVER_CONNECTIONS") or [], "TOOL_SERVER_CONNECTIONS")

    async def set_tool_servers(self, connections: list[dict[str, Any]]) -> list[dict[str, Any]]:
        form = {"TOOL_SERVER_CONNECTIONS": connections}
        body = _object(
            await self._call("POST", "/api/v1/configs/tool_servers", json=form), "the tool servers"
        )
        return _objects(body.get("TOOL_SERVER_CONNECTIONS") or [], "TOOL_SERVER_CONNECTIONS")

    async def verify_tool_server(self, connection: dict[str, Any]) -> Verification:
        """Open WebUI's own check of a tool server: a 4xx other than 401 (400: "Failed to connect to
        the tool server", 403: "Tool servers are disabled") is an answer, not an error. Given 20 s
        more than the other calls: Open WebUI itself waits up to 10 s for the server
        (`AIOHTTP_CLIENT_TIMEOUT_TOOL_SERVER_DATA`), and its answer says more than a timeout here."""
        path = "/api/v1/configs/tool_servers/verify"
        answer = await self._send("POST", path, json=connection, timeout_s=self.timeout_s + 20)
        if answer.status_code == 200:
            spec = _json(answer, f"POST {path}")
            paths = spec.get("paths") if isinstance(spec, dict) else None
            return Verification(True, paths=tuple(sorted(paths)) if isinstance(paths, dict) else ())
        if answer.status_code == 401:
            raise self._refused("POST", path, answer)
        if 400 <= answer.status_code < 500:
            return Verification(False, detail=self._detail(answer) or f"HTTP {answer.status_code}")
        raise self._failed("POST", path, answer)

    async def default_model_params(self) -> dict[str, Any] | None:
        """`DEFAULT_MODEL_PARAMS` ({} when none are set); None if Open WebUI does not serve the call."""
        body = await self._call("GET", "/api/v1/configs/models", missing_ok=True)
        if body is None:
            return None
        params = _object(body, "the models configuration").get("DEFAULT_MODEL_PARAMS")
        return params if isinstance(params, dict) else {}

    async def models(self) -> list[dict[str, Any]] | None:
        body = await self._call("GET", "/api/v1/models/all", missing_ok=True)
        return None if body is None else _objects(body, "GET /api/v1/models/all")

    async def chat_config(self) -> dict[str, Any] | None:
        body = await self._call("GET", "/api/v1/chats/config", missing_ok=True)
        return None if body is None else _object(body, "the chat configuration")

    async def config_namespace(self, namespace: str) -> dict[str, Any] | None:
        path = f"/api/v1/configs/namespace/{quote(namespace, safe='')}"
        body = await self._call("GET", path, missing_ok=True)
        return None if body is None else _object(body, f"the {namespace} configuration")

    # -- HTTP

    async def _send(
        self,
        method: str,
        path: str,
        *,
        auth: bool = True,
        json: Any = None,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        url = f"{self.base_url}{path}"
        try:
            return await self._client.request(
                method,
                url,
                headers=self._headers if auth else None,
                json=json,
                params=params,
                timeout=timeout_s if timeout_s is not None else self.timeout_s,
            )
        except httpx.TimeoutException as error:
            raise AdminError(f"{method} {url}: Open WebUI did not answer in time", retryable=True) from error
        except httpx.HTTPError as error:
            reason = self.redacted(f"{type(error).__name__}: {error}")
            raise AdminError(
                f"{method} {url}: Open WebUI is unreachable ({reason})", retryable=True
            ) from error

    async def _call(
        self,
        method: str,
        path: str,
        *,
        auth: bool = True,
        json: Any = None,
        params: dict[str, str] | None = None,
        missing_ok: bool = False,
    ) -> Any:
        answer = await self._send(method, path, auth=auth, json=json, params=params)
        if answer.status_code in (401, 403):
            raise self._refused(method, path, answer)
        if answer.status_code in (404, 405) and missing_ok:
            return None
        if answer.status_code != 200:
            raise self._failed(method, path, answer)
        return _json(answer, f"{method} {path}")

    def _detail(self, answer: httpx.Response) -> str:
        try:
            body = answer.json()
        except ValueError:
            text = answer.text
        else:
            text = str(body.get("detail", body)) if isinstance(body, dict) else str(body)
        return self.redacted(" ".join(text.split()))[:_DETAIL_CHARS]

    def _refused(self, method: str, path: str, answer: httpx.Response) -> AdminKeyRefused:
        detail = self._detail(answer)
        return AdminKeyRefused(
            f"{method} {self.base_url}{path}: Open WebUI refused the admin key (HTTP {answer.status_code}"
            f"{': ' + detail if detail else ''}); give an admin's API key (Open WebUI needs "
            "ENABLE_API_KEYS=true) or an admin's session token",
            status=answer.status_code,
        )

    def _failed(self, method: str, path: str, answer: httpx.Response) -> AdminError:
        detail = self._detail(answer)
        return AdminError(
            f"{method} {self.base_url}{path}: HTTP {answer.status_code}{': ' + detail if detail else ''}",
            retryable=answer.status_code >= 500 or answer.status_code == 429,
            status=answer.status_code,
        )


def _function_form(function_id: str, name: str, content: str, description: str) -> dict[str, Any]:
    """A `FunctionForm` (models/functions.py); Open WebUI fills `meta.manifest` from the frontmatter."""
    return {"id": function_id, "name": name, "content": content, "meta": {"description": description}}


def _json(answer: httpx.Response, what: str) -> Any:
    try:
        return answer.json()
    except ValueError as error:
        raise AdminError(f"{what}: Open WebUI's answer is not JSON") from error


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise AdminError(f"{what}: Open WebUI answered a JSON {type(body).__name__}, not an object")
    return body


def _objects(body: Any, what: str) -> list[dict[str, Any]]:
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise AdminError(f"{what}: Open WebUI answered something other than a list of objects")
    return body
