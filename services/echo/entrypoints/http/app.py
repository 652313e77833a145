"""The hook service application factory."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import structlog
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

import echo
from echo.adapters.llm import gemini_chat, retries
from echo.adapters.openwebui import client as openwebui_client
from echo.capabilities import registry
from echo.capabilities.masking import metrics as masking_metrics
from echo.capabilities.shadow import server_tools
from echo.capabilities.shadow import turn as pipe_turn
from echo.config import live as live_config
from echo.config import settings as settings_module
from echo.entrypoints.http import (
    chats,
    edge,
    hot,
    memories,
    openapi_docs,
    ops,
    pipe,
    protocol,
    security,
    tools,
    wire,
)
from echo.ports import backends as backends_port
from echo.support import metrics, supervision

__all__ = ["create_app"]

log = structlog.get_logger("echo.hooks")


def _count_masked(where: str) -> Callable[[Mapping[str, int]], None]:
    def record(counts: Mapping[str, int]) -> None:
        for kind, count in counts.items():
            masking_metrics.SECRETS_MASKED.labels(kind, where).inc(count)
        log.info("secrets_masked", where=where, counts=dict(counts))

    return record


def _on_reload(ok: bool, error: str | None) -> None:
    metrics.CONFIG_RELOADS.labels("ok" if ok else "error").inc()
    metrics.CONFIG_LAST_RELOAD_OK.set(1 if ok else 0)


class _RequestContext:
    """Fresh log context per request, so one request's chat id never leaks into the next, and the
    request's arrival time (`request.state.received_at`), from which hook deadlines count."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            structlog.contextvars.clear_contextvars()
            scope.setdefault("state", {})["received_at"] = time.monotonic()
        await self.app(scope, receive, send)


class _HooksApp(FastAPI):
    """echo-hooks: a FastAPI app whose hot routes (`echo.entrypoints.http.hot`: the combined hooks)
    are answered ahead of FastAPI's routing, behind the same edge and request context."""

    hot: hot.HotRoutes | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lean = self.hot
        if lean is not None and scope["type"] == "http":
            if self.root_path:
                scope["root_path"] = self.root_path
            if lean.serves(scope):
                await lean(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


class Service(Protocol):
    """What the app runs with for its lifetime (`echo.entrypoints.runtime.Runtime`): the backends its
    filters and routes reach, and how each outside part answers (`/readyz`)."""

    def backends(self) -> backends_port.Backends: ...

    async def readiness(self) -> dict[str, dict[str, Any]]: ...


BackendsFactory = Callable[[settings_module.Settings], contextlib.AbstractAsyncContextManager[Service]]


def create_app(
    settings: settings_module.Settings,
    *,
    config: live_config.LiveConfig | None = None,
    chat: gemini_chat.GeminiChat | None = None,
    backends: BackendsFactory | None = None,
    supervisor: supervision.Supervisor | None = None,
) -> FastAPI:
    """Build echo-hooks. `config` must be loaded already (the CLI loads it to fail fast).

    `backends` opens the store, embedder and vectors for the app's lifetime
    (`echo.entrypoints.runtime.open_runtime` in `echoctl serve`): `app.state.service` is what it
    yields, `app.state.backends` the backends port the filters and routes reach (`echo.ports.backends`,
    with the Open WebUI client when configured). Without it `/readyz` checks the configuration only
    and the backends have no store, embedder or vectors. `supervisor` runs the background tasks (the
    config watcher; give `backends` the same one so /readyz shows theirs too).
    """
    supervisor = supervisor or supervision.Supervisor()
    if config is None:
        config = live_config.LiveConfig(settings, on_reload=_on_reload)
        config.load()
    if chat is None and settings.gemini_api_key is not None:
        chat = gemini_chat.GeminiChat(
            settings.gemini_api_key.get_secret_value(),
            base_url=settings.gemini_base_url,
            timeout_s=settings.llm_timeout_seconds,
        )
    secrets = tuple(key.get_secret_value() if key else None for key in (settings.api_key, settings.admin_key))
    keys = security.Keys(*secrets)
    if not keys.required(security.HOOKS):
        log.warning("auth_disabled", reason="ECHO_API_KEY is not set: every caller of the hooks is trusted")
    if settings.admin_key is None and keys.required(security.ADMIN):
        log.info(
            "memory_api_off", reason="ECHO_ADMIN_KEY is not set: /memories, /users and compact answer 403"
        )
    openwebui = None
    if settings.openwebui_url and settings.openwebui_api_key is not None:
        openwebui = openwebui_client.OpenWebUI(
            settings.openwebui_url, settings.openwebui_api_key.get_secret_value()
        )
    if chat is None:
        log.warning("pipes_disabled", reason="no Gemini key (ECHO_GEMINI_API_KEY): no echo.* pipe models")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        supervisor.keep_running("config-watch", config.watch)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if backends is not None:
                    service = await stack.enter_async_context(backends(settings))
                    app.state.service = service
                    app.state.backends = dataclasses.replace(service.backends(), openwebui=openwebui)
                yield
        finally:
            await supervisor.aclose()
            if chat is not None:
                await chat.aclose()
            if openwebui is not None:
                await openwebui.aclose()

    app = _HooksApp(
        title="echo-hooks",
        version=echo.__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        default_response_class=wire.JSONAnswer,  # a lone surrogate in an answer is escaped, never a 500
    )
    app.add_middleware(_RequestContext)
    rules = edge.Rules()
    # Outermost: the key, the media type and the body limit come before anything reads the body.
    app.add_middleware(
        edge.Edge,
        keys=keys,
        rules=rules,
        max_body_bytes=settings.max_body_bytes,
        allowed_hosts=settings.allowed_hosts,
    )

    def behind_the_edge(endpoint: ASGIApp) -> ASGIApp:  # what the hot routes meet, as every route does
        return edge.Edge(
            _RequestContext(endpoint),
            keys=keys,
            rules=rules,
            max_body_bytes=settings.max_body_bytes,
            allowed_hosts=settings.allowed_hosts,
        )

    app.state.config = config
    app.state.settings = settings
    app.state.service = None
    app.state.backends = backends_port.Backends(openwebui=openwebui)
    app.state.supervisor = supervisor

    def current_backends() -> backends_port.Backends:
        found: backends_port.Backends = app.state.backends
        return found

    filter_set = registry.build_filters(
        settings.pipe_models, _count_masked("outlet"), backends=current_backends
    )

    app.add_exception_handler(RequestValidationError, edge.validation_error)
    app.add_exception_handler(StarletteHTTPException, edge.http_error)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled_error", path=request.url.path)
        return JSONResponse({"detail": hot.INTERNAL_ERROR}, status_code=500)

    pipe_options = pipe_turn.PipeOptions(
        max_tool_rounds=settings.pipe_max_tool_rounds,
        shadow_deadline_s=settings.pipe_shadow_deadline_ms / 1000,
        retry=retries.RetryPolicy(
            max_retries=settings.llm_max_retries, max_total_wait_s=settings.llm_retry_max_wait_seconds
        ),
    )
    pipe_tools = server_tools.builtin_server_tools()
    protected = keys.dependencies(security.HOOKS)
    unauthorized = openapi_docs.AUTH_ERRORS if keys.required(security.HOOKS) else {}
    administered = keys.dependencies(security.ADMIN)
    admin_errors = _ADMIN_ERRORS if keys.required(security.ADMIN) else {}
    ops_router = ops.build_ops_router(config)
    rules.public(
        *(getattr(route, "path", None) for route in ops_router.routes), tools.OPENAPI_PATH, app.openapi_url
    )
    app.include_router(ops_router)
    app.include_router(_tools_router(*secrets))
    # Each router is built once and included under both prefixes (building its routes is most of
    # what making the app costs; an included router is referenced, not copied).
    memories_router = memories.build_memories_router(max_body_bytes=settings.max_body_bytes)
    chats_router = chats.build_chats_router(config, max_body_bytes=settings.max_body_bytes)
    combined = protocol.build_combined_hooks(
        filter_set=filter_set, config=config, max_body_bytes=settings.max_body_bytes
    )
    protocol_router = protocol.build_protocol_router(
        filter_set=filter_set,
        config=config,
        max_body_bytes=settings.max_body_bytes,
        pipes_enabled=chat is not None,
        combined=combined,
    )
    pipe_router = None
    if chat is not None:
        pipe_router = pipe.build_pipe_router(
            chat=chat,
            pipe_ids=set(filter_set.pipes),
            max_body_bytes=settings.max_body_bytes,
            on_masked=_count_masked("pipe"),
            options=pipe_options,
            tools=pipe_tools,
        )
    for prefix in ("", "/v1"):
        rules.admin(memories_router, prefix)
        app.include_router(memories_router, prefix=prefix, dependencies=administered, responses=admin_errors)
        rules.admin(chats_router, prefix)
        rules.unread(f"{prefix}/pipelines/{{action}}")  # always a 405 saying why (Open WebUI's upload form)
        # before the protocol's `/{id}/filter/{phase}`, which `/chats/filter/…` matches
        app.include_router(chats_router, prefix=prefix, dependencies=administered, responses=admin_errors)
        app.include_router(protocol_router, prefix=prefix, dependencies=protected, responses=unauthorized)
        if pipe_router is not None:
            app.include_router(pipe_router, prefix=prefix, dependencies=protected, responses=unauthorized)
    # The combined hooks (two calls per turn) skip FastAPI's routing; the routes above document them.
    app.hot = hot.HotRoutes(
        {f"{prefix}/hooks/{phase}": combined[phase] for prefix in ("", "/v1") for phase in combined},
        behind_the_edge,
    )
    _document_the_edge(app)
    return app


@functools.lru_cache(maxsize=8)
def _tools_router(hooks_key: str | None, admin_key: str | None) -> APIRouter:
    """The tool routes and their OpenAPI document for these keys, built once per process and shared by
    every app made with the same keys: they keep nothing of an app (a call reaches the backends of its
    request's app), and building them is a third of what making an app costs."""
    return tools.build_tools_router(security.Keys(hooks_key, admin_key))


# The memory-management API's refusals (DESIGN §3): its own key, apart from the hooks' key.
_ADMIN_ERRORS: dict[int | str, Any] = {
    401: {
        "model": openapi_docs.Problem,
        "description": "Missing or wrong bearer key (`Authorization: Bearer <ECHO_ADMIN_KEY>`).",
    },
    403: {
        "model": openapi_docs.Problem,
        "description": "The hooks' key (ECHO_API_KEY) was sent, or ECHO_ADMIN_KEY is not set (the API is"
        " off).",
    },
}


def _document_the_edge(app: FastAPI) -> None:
    """`/openapi.json` says what the edge answers too: 413 and 415 on every POST."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = edge.document(generate(), openapi_docs.Problem.model_json_schema())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
