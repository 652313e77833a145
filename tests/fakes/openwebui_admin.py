"""Open WebUI's admin API as `echoctl openwebui connect` calls it, over real HTTP, answering as 0.12.4
does (the routes of routers/functions.py, routers/configs.py, routers/models.py, routers/chats.py):

- the admin key `OWUI_ADMIN_KEY` is served; `OWUI_USER_KEY` (a user's) gets 401 "access prohibited",
  any other key 401 "invalid token", as `get_admin_user` answers;
- Functions are stored as Open WebUI stores them (`type` from the content, `is_active`/`is_global`
  false on creation, each toggle flips one, the valves update replaces the valves, None values
  dropped); `export?include_valves=true` lists them with their valves;
- `TOOL_SERVER_CONNECTIONS` is stored as `ToolServerConnection.model_dump()` stores it (defaults
  filled in); `…/verify` answers the OpenAPI document when `tools_reachable`, else 400 as Open WebUI
  does when it cannot fetch it;
- `serves_config=False` makes the model, chat and memory configuration calls 404 (an Open WebUI that
  does not have them), for the "cannot check" lines;
- `fail_valves=True` makes the valves update fail with 400 and a detail that quotes the input (as a
  pydantic error in Open WebUI's `detail` does), so a test can check no key leaks through it.

`writes` records every call that changes state (method and path), `calls` every call.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fakes.live_server import LiveServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["OWUI_ADMIN_KEY", "OWUI_USER_KEY", "FakeOpenWebUI", "fake_openwebui"]

OWUI_ADMIN_KEY = "sk-fake-owui-admin-0123456789"
OWUI_USER_KEY = "sk-fake-owui-user-9876543210"
TOOL_PATHS = ("/tools/search_memories", "/tools/search_session_context", "/tools/save_plan")
_CONNECTION_DEFAULTS = {"type": "openapi", "forward_cookies": False, "headers": None, "info": None}


@dataclass
class FakeOpenWebUI:
    version: str = "0.12.4"
    functions: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_servers: list[dict[str, Any]] = field(default_factory=list)
    default_params: dict[str, Any] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)
    compaction: bool = False
    memories: bool = True
    memory_review: bool = False
    tools_reachable: bool = True
    serves_config: bool = True
    fail_valves: bool = False
    calls: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    url: str = ""

    def add_function(self, function_id: str, content: str, **fields: Any) -> None:
        now = int(time.time())
        self.functions[function_id] = {
            "id": function_id,
            "user_id": "admin",
            "name": fields.pop("name", function_id),
            "type": "filter" if "class Filter" in content else "pipe",
            "content": content,
            "meta": {"description": fields.pop("description", ""), "manifest": {}},
            "valves": fields.pop("valves", None),
            "is_active": fields.pop("is_active", False),
            "is_global": fields.pop("is_global", False),
            "updated_at": now,
            "created_at": now,
            **fields,
        }

    def app(self) -> Starlette:
        def refused(request: Request) -> Response | None:
            self.calls.append(f"{request.method} {request.url.path}")
            key = request.headers.get("authorization", "").removeprefix("Bearer ")
            if key == OWUI_ADMIN_KEY:
                return None
            if key == OWUI_USER_KEY:
                detail = "You do not have permission to access this resource."
                return JSONResponse({"detail": detail}, status_code=401)
            return JSONResponse(
                {"detail": "Your session has expired or the token is invalid. Please sign in again."}, 401
            )

        def wrote(request: Request) -> None:
            self.writes.append(f"{request.method} {request.url.path}")

        def not_found() -> Response:
            return JSONResponse({"detail": "We could not find what you're looking for :/"}, status_code=401)

        async def version(request: Request) -> Response:
            self.calls.append("GET /api/version")
            return JSONResponse({"version": self.version, "deployment_id": "fake"})

        async def export(request: Request) -> Response:
            if (no := refused(request)) is not None:
                return no
            with_valves = request.query_params.get("include_valves") == "true"
            listed = [
                {k: v for k, v in f.items() if with_valves or k != "valves"} for f in self.functions.values()
            ]
            return JSONResponse(listed)

        async def create(request: Request) -> Response:
            if (no := refused(request)) is not None:
                return no
            form = await request.json()
            function_id = str(form["id"]).lower()
            if not function_id.isidentifier():
                return JSONResponse({"detail": "Only alphanumeric characters and underscores"}, 400)
            if function_id in self.functions:
                return JSONResponse({"detail": "Uh-oh! This id is already registered."}, 400)
            wrote(request)
            self.add_function(
                function_id, form["content"], name=form["name"], description=form["meta"].get("description")
            )
            return JSONResponse({k: v for k, v in self.functions[function_id].items() if k != "content"})

        async def update(request: Request) -> Response:
            if (no := refused(request)) is not None:
                return no
            found = self.functions.get(request.path_params["id"])
            if found is None:
                return not_found()
            form = await request.json()
            wrote(request)
            found.update(
                name=form["name"],
                content=form["content"],
                meta={"description": form["meta"].get("description"), "manifest": {}},
                type="filter" if "class Filter" in form["content"] else "pipe",
                updated_at=int(time.time()),
            )
            return JSONResponse(found)

        async def valves(request: Request) -> Response:
            if (no := refused(request)) is not None:
                return no
            found = self.functions.get(request.path_params["id"])
            if found is None:
                return not_found()
            form = await request.json()
            if self.fail_valves:
                return JSONResponse(
                    {"detail": f"[ERROR: 1 validation error for Valves input_value={form!r}]"}, 400
                )
            wrote(request)
            found["valves"] = {k: v for k, v in form.items() if v is not None}
            return JSONResponse(found["valves"])

        def toggler(flag: str) -> Any:
            async def toggle(request: Request) -> Response:
                if (no := refused(request)) is not None:
                    return no
                found = self.functions.get(request.path_params["id"])
                if found is None:
                    return not_found()
                wrote(request)
                found[flag] = not found[flag]
                return JSONResponse(found)

            return toggle

        async def tool_servers(request: Request) -> Response:
            if (no := refused(request)) is not None:
                return no
            if request.method == "POST":
                wrote(request)
                form = await request.json()
                self.tool_servers = [{**_CONNECTION_DEFAULTS, **c} for c in form["TOOL_SERVER_CONNECTIONS"]]
            return JSONResponse({"TOOL_SERVER_CONNECTIONS": self.tool_servers})

        async def verify(request: Request) -> Response:
            if (no := refused(request)) is not None:
                return no
            if not self.tools_reachable:
                return JSONResponse({"detail": "Failed to connect to the tool server"}, status_code=400)
            return JSONResponse({"openapi": "3.1.0", "paths": {path: {"post": {}} for path in TOOL_PATHS}})

        def config(answer: Any) -> Any:
            async def read(request: Request) -> Response:
                if (no := refused(request)) is not None:
                    return no
                if not self.serves_config:
                    return JSONResponse({"detail": "Not Found"}, status_code=404)
                return JSONResponse(answer())

            return read

        return Starlette(
            routes=[
                Route("/api/version", version),
                Route("/api/v1/functions/export", export),
                Route("/api/v1/functions/create", create, methods=["POST"]),
                Route("/api/v1/functions/id/{id}/update", update, methods=["POST"]),
                Route("/api/v1/functions/id/{id}/valves/update", valves, methods=["POST"]),
                Route("/api/v1/functions/id/{id}/toggle", toggler("is_active"), methods=["POST"]),
                Route("/api/v1/functions/id/{id}/toggle/global", toggler("is_global"), methods=["POST"]),
                Route("/api/v1/configs/tool_servers", tool_servers, methods=["GET", "POST"]),
                Route("/api/v1/configs/tool_servers/verify", verify, methods=["POST"]),
                Route(
                    "/api/v1/configs/models",
                    config(lambda: {"DEFAULT_MODELS": None, "DEFAULT_MODEL_PARAMS": self.default_params}),
                ),
                Route("/api/v1/models/all", config(lambda: self.models)),
                Route(
                    "/api/v1/chats/config",
                    config(
                        lambda: {"ENABLE_CONTEXT_COMPACTION": self.compaction, "ENABLE_TOOL_SEARCH": False}
                    ),
                ),
                Route(
                    "/api/v1/configs/namespace/memories",
                    config(
                        lambda: {
                            "memories.enable": self.memories,
                            "memories.background_review.enable": self.memory_review,
                            "memories.review_interval_turns": 10,
                        }
                    ),
                ),
            ]
        )


@contextmanager
def fake_openwebui(**state: Any) -> Iterator[FakeOpenWebUI]:
    fake = FakeOpenWebUI(**state)
    with LiveServer(fake.app(), name="open-webui-admin", lifespan="off") as live:
        fake.url = live.url
        yield fake
