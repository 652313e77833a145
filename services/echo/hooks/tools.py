"""The tool server Open WebUI registers (DESIGN §3): `GET /tools/openapi.json` and its operations.

Register it in Open WebUI (Admin Settings → External Tools, type OpenAPI) with the hook service's URL,
path `tools/openapi.json` and auth "bearer" with `ECHO_API_KEY`; a chat that enables it lets the
model call, server-side in Open WebUI:

- `POST /tools/search_memories` `{"query", "k"}`: the calling user's long-term memories nearest to
  the query, with their date, importance and tags.
- `POST /tools/search_session_context` `{"source_id", "query", "k"}`: the passages of one ingested
  file of the calling user nearest to the query (`echo.filters.context_search`).
- `POST /tools/save_plan`, `update_plan`, `list_plans`, `commit_code`, `read_code`, `list_code`: the
  model's plans and code entries for the calling user's chat (`echo.hooks.registry_tools`).

The OpenAPI document is served without auth (Open WebUI fetches it so) and is generated from these
routes, so it always matches them. Every call carries the bearer key and Open WebUI's
`x-openwebui-user-id` header: a call without a user is refused with a 422 naming the header, and a
user only ever searches their own memories.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

import echo
from echo.errors import EchoError
from echo.filters import context_search
from echo.hooks import memories as memories_api
from echo.hooks import openapi_docs, registry_tools, security, wire

__all__ = ["USER_HEADER", "build_tools_router"]

USER_HEADER = "x-openwebui-user-id"


def _refuse_boolean(value: object) -> object:
    """`k` is a number: pydantic would take `true` as 1 (a model may send 5.0, which stays accepted)."""
    if isinstance(value, bool):
        raise ValueError("a number is required, not a boolean")
    return value


class SearchMemories(BaseModel):
    """Search the user's long-term memories."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=20000,
        description="What to look for in what you remember about the user (a question or keywords).",
    )
    k: int = Field(5, ge=1, le=20, description="How many memories to return.")

    @field_validator("k", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: object) -> object:
        return _refuse_boolean(value)


class RememberedItem(BaseModel):
    summary: str
    memory_importance: int | None = None
    tags: list[str] = []
    updated_at: float | None = None
    score: float


class SearchMemoriesAnswer(BaseModel):
    memories: list[RememberedItem]


class SearchSessionContext(BaseModel):
    """Search the content of a file attached to this conversation."""

    model_config = ConfigDict(extra="forbid")

    source_id: str = Field(
        min_length=1,
        max_length=500,
        pattern=wire.TEXT_WITHOUT_NUL,
        description="The file's source_id, as given in its <smart_context> block (U_…_C_…_T_…).",
    )
    query: str = Field(
        min_length=1,
        max_length=20000,
        description="What to find in the file: a precise question or keywords.",
    )
    k: int = Field(5, ge=1, le=20, description="How many passages to return.")

    @field_validator("k", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: object) -> object:
        return _refuse_boolean(value)


class ContextChunk(BaseModel):
    text: str
    score: float
    chunk_index: int | None = None


class SearchSessionContextAnswer(BaseModel):
    source_id: str
    status: str = Field(
        description="ready, pending (still being indexed), failed, or unknown (no such file)."
    )
    filename: str | None = None
    error: str | None = None
    chunks: list[ContextChunk]


def _user(value: str | None) -> str:
    if value is None or not value.strip():
        raise wire.unprocessable(
            [
                {
                    "loc": ["header", USER_HEADER],
                    "msg": "Field required: Open WebUI sends the calling user's id in this header when it"
                    " runs with ENABLE_FORWARD_USER_INFO_HEADERS=true",
                    "type": "missing",
                }
            ]
        )
    return value.strip()


def build_tools_router(auth: security.BearerAuth) -> APIRouter:
    """The tool routes (behind `auth`) and their OpenAPI document (public)."""
    router = APIRouter()
    operations = APIRouter(
        dependencies=auth.dependencies(), responses=openapi_docs.AUTH_ERRORS if auth.enabled else {}
    )

    @operations.post(
        "/tools/search_memories",
        operation_id="search_memories",
        summary="Search what you remember about the user",
        description="Long-term memories distilled from earlier conversations with this user, nearest to "
        "the query first. Use it when the user refers to something they told you before.",
        response_model=SearchMemoriesAnswer,
        responses=openapi_docs.errors(400, 422, 503),
    )
    async def search_memories(
        request: Request,
        call: SearchMemories,
        x_openwebui_user_id: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> JSONResponse:
        user_id = _user(x_openwebui_user_id)
        runtime = memories_api.backends_of(request)
        try:
            found = await memories_api.search_memories(runtime, user_id, call.query, call.k)
        except EchoError as error:
            raise HTTPException(status_code=503, detail=f"a backend is unavailable: {error}") from error
        items = [
            {k: item[k] for k in ("summary", "memory_importance", "tags", "updated_at", "score")}
            for item in found
        ]
        return JSONResponse({"memories": items})

    @operations.post(
        "/tools/search_session_context",
        operation_id="search_session_context",
        summary="Search a file attached to this conversation",
        description="The passages of a file (its source_id is in the file's <smart_context> block) nearest "
        "to the query, best first. Use it to answer from a large file whose summary is not enough.",
        response_model=SearchSessionContextAnswer,
        response_model_exclude_none=True,
        responses=openapi_docs.errors(400, 422, 503),
    )
    async def search_session_context(
        request: Request,
        call: SearchSessionContext,
        x_openwebui_user_id: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> JSONResponse:
        user_id = _user(x_openwebui_user_id)
        runtime = memories_api.backends_of(request)
        try:
            found = await context_search.search_session_context(
                runtime, user_id, call.source_id.strip(), call.query, call.k
            )
        except EchoError as error:
            raise HTTPException(status_code=503, detail=f"a backend is unavailable: {error}") from error
        return JSONResponse({k: v for k, v in found.items() if v is not None})

    operations.include_router(registry_tools.build_registry_operations(_user))
    document = get_openapi(
        title="ECHO tools",
        version=echo.__version__,
        description="Tools of ECHO for Open WebUI: long-term memory search, search in the files"
        " attached to a conversation, and the model's own plans and code registry for a conversation.",
        routes=operations.routes,
    )
    document["components"] = {
        **document.get("components", {}),
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    }
    document["security"] = [{"bearer": []}]

    @router.get("/tools/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(document)

    router.include_router(operations)
    return router
