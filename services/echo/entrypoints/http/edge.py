"""The edge of echo-hooks: what every HTTP request meets before any route runs (issue 18, parts 1, 3, 5).

`Edge` is a pure ASGI middleware, the outermost of `create_app`'s. For each request, in this order,
each step answering without calling `receive` (not a byte of the body is read):

0. without the hooks' key (the explicit no-auth trial), the Host header: only a loopback name or one
   of `ECHO_ALLOWED_HOSTS` (421 otherwise), so that a web page whose domain a DNS-rebinding attack
   points at 127.0.0.1 — same-origin for the browser, so JSON and no preflight — gets nothing;
1. the key: the credential the path needs (`Rules`: public, the admin key for the memory-management
   API and compaction, else the hooks' key) is checked in constant time (`security.Keys`): 401 with
   `WWW-Authenticate: Bearer`, or 403 for the other key or a part that is off;
2. JSON only: a POST, PUT or PATCH with a body takes `application/json` (a `charset` other than UTF-8
   refused) or `application/*+json`; anything else, or no Content-Type with a body, is a 415 naming
   what was sent. A browser's cross-origin "simple request" (`text/plain`, no preflight) so never
   reaches a route, with or without auth;
3. the size: a Content-Length past `ECHO_MAX_BODY_BYTES` is a 413;
4. then the route runs with `receive` counted: past the limit the stream is cut (no further read) and
   the answer is a 413, whichever route reads the body (FastAPI's parser or `wire.read_json`).

A body left unread is discarded by the server as it arrives, never buffered. The answers are JSON
`{"detail": "…"}`, as FastAPI's own. `document` adds the statuses the edge answers to an OpenAPI
document; `validation_error` and `http_error` are the app's handlers that keep every error answer
short and encodable (`wire.field_errors`).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRouter
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from echo.entrypoints.http import security, wire

__all__ = ["BodyTooLarge", "Edge", "Rules", "document", "http_error", "validation_error"]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_UTF8 = frozenset({"utf-8", "utf8"})
_SHOWN = 100  # characters of a header value a refusal shows
_JSON = "send the body as JSON, 'Content-Type: application/json'"


class BodyTooLarge(HTTPException):
    """Raised by the counted `receive` past the limit; FastAPI's handlers answer it as the 413 it is."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=f"request body exceeds {limit} bytes")


class Rules:
    """Which credential a request needs: none on the public paths (whatever the method: they serve
    `GET`/`HEAD` only, so another method gets its 405 with `Allow`, and no route there reads a body),
    the admin key on the paths of the admin routers, the hooks' key everywhere else (an unknown path
    included: it gets its 404 only with the key)."""

    def __init__(self) -> None:
        self._public: set[str] = set()
        self._admin: list[re.Pattern[str]] = []
        self._unread: list[re.Pattern[str]] = []

    def public(self, *paths: str | None) -> None:
        self._public.update(path for path in paths if path)

    def admin(self, router: APIRouter, prefix: str = "") -> None:
        """Every path of `router` under `prefix` takes the admin key, whatever the method."""
        for route in router.routes:
            path = getattr(route, "path", None)
            if path is not None:
                self._admin.append(compile_path(prefix + path)[0])

    def unread(self, *paths: str) -> None:
        """Routes that never read a body (an answer that says why the operation does not exist):
        any Content-Type passes, so that they give their answer."""
        self._unread.extend(compile_path(path)[0] for path in paths)

    def reads_body(self, path: str) -> bool:
        return not any(pattern.match(path) for pattern in self._unread)

    def credential(self, method: str, path: str) -> security.Credential | None:
        if path in self._public:
            return None
        if any(pattern.match(path) for pattern in self._admin):
            return security.ADMIN
        return security.HOOKS


def route_path(scope: Scope) -> str:
    """The path the router matches: `scope["path"]` less the `root_path` a proxy mounts it under
    (as Starlette's routing strips it), so that a prefix cannot make an admin route look like another."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root or not path.startswith(root) or path == root:
        return path
    return path[len(root) :] if path[len(root)] == "/" else path


def _values(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [value for key, value in headers if key == name]


def _shown(value: str) -> str:
    return repr(value) if len(value) <= _SHOWN else f"{value[:_SHOWN]!r}… (truncated)"


def _parameter(parameters: str, name: str) -> str | None:
    for part in parameters.split(";"):
        key, found, value = part.partition("=")
        if found and key.strip().lower() == name:
            return value.strip().strip('"')
    return None


def media_type_refusal(method: str, headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """Why a request's body is not taken as JSON (a 415), or None."""
    if method not in _BODY_METHODS:
        return None
    types = _values(headers, b"content-type")
    if not types:
        lengths = _values(headers, b"content-length")
        has_body = bool(_values(headers, b"transfer-encoding")) or any(
            v.strip() not in (b"", b"0") for v in lengths
        )
        return f"no Content-Type for a request body: {_JSON}" if has_body else None
    if len(types) > 1:
        return f"Content-Type sent {len(types)} times: {_JSON}"
    sent = types[0].decode("latin-1")
    media, _, parameters = sent.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        return f"unsupported Content-Type {_shown(sent)}: every POST takes JSON only; {_JSON}"
    charset = _parameter(parameters, "charset")
    if charset is not None and charset.lower() not in _UTF8:
        return (
            f"unsupported Content-Type {_shown(sent)}: JSON is read as UTF-8 (charset=utf-8 or none); {_JSON}"
        )
    return None


def _host_name(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The Host header's name (port and IPv6 brackets off, lower case); None without one."""
    hosts = _values(headers, b"host")
    if len(hosts) != 1:
        return None
    host = hosts[0].decode("latin-1").strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def loopback_host(name: str) -> bool:
    """Whether a Host name can only mean this machine (what a DNS-rebinding page cannot send)."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _declared_length(headers: Sequence[tuple[bytes, bytes]]) -> int | None:
    """The largest Content-Length declared (the server refuses malformed or conflicting ones)."""
    lengths = [int(value) for value in _values(headers, b"content-length") if value.strip().isdigit()]
    return max(lengths) if lengths else None


async def _answer(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()  # ASCII: encodable whatever the detail holds
    response = Response(body, status_code=status, headers=headers, media_type="application/json")
    await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": body})


class _Counted:
    """`receive` counting the body's bytes: past `limit`, raises `BodyTooLarge` and never reads again."""

    def __init__(self, receive: Receive, limit: int) -> None:
        self._receive = receive
        self._limit = limit
        self.size = 0
        self.exceeded = False

    async def __call__(self) -> Message:
        if self.exceeded:
            raise BodyTooLarge(self._limit)
        message = await self._receive()
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            if self.size > self._limit:
                self.exceeded = True
                raise BodyTooLarge(self._limit)
        return message


class Edge:
    """The ASGI middleware (see the module's docstring): key, media type, size, then the counted body."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: security.Keys,
        rules: Rules,
        max_body_bytes: int,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.keys = keys
        self.rules = rules
        self.limit = max_body_bytes
        # a key stops a rebinding page by itself (the page cannot know it); without one, the Host does
        self.check_host = not keys.required(security.HOOKS)
        self.allowed_hosts = frozenset(host.strip().lower() for host in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method: str = scope["method"]
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        path = route_path(scope)
        if self.check_host:
            host = _host_name(headers)
            if host is None or not (loopback_host(host) or host in self.allowed_hosts):
                shown = _shown(host) if host is not None else "none (or several)"
                await _answer(
                    send,
                    421,
                    f"Host {shown} is not this service's: without ECHO_API_KEY only loopback names and "
                    "ECHO_ALLOWED_HOSTS are served (set a key, or add the name to ECHO_ALLOWED_HOSTS)",
                )
                return
        credential = self.rules.credential(method, path)
        if credential is not None:
            refused = self.keys.refusal(credential, _values(headers, b"authorization"))
            if refused is not None:
                await _answer(send, refused.status, refused.detail, refused.headers)
                return
            scope[security.GRANTED] = credential
        media = media_type_refusal(method, headers) if self.rules.reads_body(path) else None
        if media is not None:
            await _answer(send, 415, media)
            return
        declared = _declared_length(headers)
        if declared is not None and declared > self.limit:
            await _answer(send, 413, f"request body of {declared} bytes exceeds {self.limit} bytes")
            return
        counted = _Counted(receive, self.limit)
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as error:  # the app let it through: answer it here, if nothing was sent yet
            if started:
                raise
            await _answer(send, 413, str(error.detail))


# -- error answers: short, encodable ----------------------------------------------------------------


async def validation_error(request: Request, error: Exception) -> Response:
    """FastAPI's 422 for a request it parsed (the tool routes' bodies, query and path parameters),
    each value it refuses shown as a short prefix at most, the errors counted past a few."""
    assert isinstance(error, RequestValidationError)
    return wire.JSONAnswer({"detail": wire.field_errors(error.errors())}, status_code=422)


async def http_error(request: Request, error: Exception) -> Response:
    """FastAPI's answer to an HTTPException, rendered so that no text (a lone surrogate) can fail it."""
    assert isinstance(error, StarletteHTTPException)
    headers = getattr(error, "headers", None)
    if error.status_code < 200 or error.status_code in (204, 205, 304):
        return Response(status_code=error.status_code, headers=headers)
    return wire.JSONAnswer(
        {"detail": wire.bounded_detail(error.detail)}, status_code=error.status_code, headers=headers
    )


# -- the OpenAPI document ---------------------------------------------------------------------------

_PROBLEM = {"$ref": "#/components/schemas/Problem"}
_EDGE_ANSWERS = {
    "413": "Request body larger than the service accepts (`ECHO_MAX_BODY_BYTES`), refused while it is read.",
    "415": "The body is not JSON: every POST takes `application/json` (or `application/*+json`).",
}


def document(schema: dict[str, Any], problem: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an OpenAPI document) with the 413 and 415 that the edge answers on every POST;
    `problem` is the JSON schema of their body (`openapi_docs.Problem`)."""
    for operations in schema.get("paths", {}).values():
        post = operations.get("post")
        if post is None:
            continue
        responses = post.setdefault("responses", {})
        for status, description in _EDGE_ANSWERS.items():
            responses.setdefault(
                status, {"description": description, "content": {"application/json": {"schema": _PROBLEM}}}
            )
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Problem", problem)
    return schema
