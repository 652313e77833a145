"""The hot routes: `POST /hooks/inlet` and `/hooks/outlet` (and under `/v1`), what the Open WebUI
Function calls twice per turn, answered ahead of FastAPI's routing.

`HotRoutes` is what `create_app` puts in front of the app: a POST to one of these paths goes through
the same edge (`echo.entrypoints.http.edge`: Host, key, media type, size, the counted body) and the
same per-request context as every route, then straight to its endpoint
(`protocol.build_combined_hooks`), without FastAPI's router, its dependency solving or its request
telemetry; every other request goes to the FastAPI app unchanged. The same endpoints are FastAPI
routes too (documented in `/openapi.json`, and what an app built without `create_app` serves), so
both ways answer alike: an `HTTPException` as the app's handler answers it (`edge.http_error`:
`{"detail": …}`, bounded), anything else a logged 500 `{"detail": "internal error; see the service
logs"}`. A hook's own spans (`echo.inlet`, `echo.outlet`: `runner`) continue the caller's
`traceparent` either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import structlog
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from echo.entrypoints.http import edge

__all__ = ["INTERNAL_ERROR", "Endpoint", "HotRoutes"]

log = structlog.get_logger("echo.hooks")

Endpoint = Callable[[Request], Awaitable[Response]]
INTERNAL_ERROR = "internal error; see the service logs"


class HotRoutes:
    """`routes` (path → endpoint, POST only) behind `wrap` (the edge and the request context), before
    `app` (the FastAPI app, which answers everything else)."""

    def __init__(self, routes: Mapping[str, Endpoint], wrap: Callable[[ASGIApp], ASGIApp]) -> None:
        self._routes = dict(routes)
        self._served = wrap(self._endpoint)

    def serves(self, scope: Scope) -> bool:
        return scope.get("method") == "POST" and edge.route_path(scope) in self._routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._served(scope, receive, send)

    async def _endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        endpoint = self._routes[edge.route_path(scope)]
        try:
            response = await endpoint(request)
        except HTTPException as error:  # a 413 from the counted body included
            response = await edge.http_error(request, error)
        except Exception:
            log.exception("unhandled_error", path=request.url.path)
            response = JSONResponse({"detail": INTERNAL_ERROR}, status_code=500)
        await response(scope, receive, send)
