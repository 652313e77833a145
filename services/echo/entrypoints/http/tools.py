"""The tool server Open WebUI registers (DESIGN §3): `GET /tools/openapi.json` and its operations.

Register it in Open WebUI (Admin Settings → External Tools, type OpenAPI) with the hook service's URL,
path `tools/openapi.json` and auth "bearer" with `ECHO_API_KEY`; a chat that enables it lets the
model call, server-side in Open WebUI:

- `POST /tools/search_memories` `{"query", "k"}`: the calling user's long-term memories nearest to
  the query, with their id, date, importance and tags.
- `POST /tools/list_memories` `{"limit", "offset"}` (body optional): what ECHO remembers about the
  calling user, most recently updated first, with ids and dates; `POST /tools/forget_memory` `{"id"}`
  deletes one of them (404 for an id the user has not: another user's memory is never touched),
  `POST /tools/forget_all_memories` every one (`echo.capabilities.memory.user_tools`; the memory
  rows and their vector points, as the admin API deletes them).
- `POST /tools/search_session_context` `{"source_id", "query", "k"}`: the passages of one ingested
  file of the calling user nearest to the query (`echo.capabilities.context.search`).
- `POST /tools/save_plan`, `update_plan`, `list_plans`, `commit_code`, `read_code`, `list_code`: the
  model's plans and code entries for the calling user's chat (`echo.entrypoints.http.registry_tools`).

The OpenAPI document is served without auth (Open WebUI fetches it so) and is generated from these
routes, so it always matches them. Every call carries the bearer key and Open WebUI's
`x-openwebui-user-id` header: a call without a user, or with the header twice, is refused with a
422 naming the header, and a user only ever searches their own memories.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

import echo
from echo.capabilities.context import search as context_search
from echo.capabilities.memory import search as memory_search
from echo.capabilities.memory import user_tools
from echo.entrypoints.http import edge, identity, openapi_docs, registry_tools, security, wire
from echo.entrypoints.http import memories as memories_api
from echo.errors import EchoError

__all__ = ["OPENAPI_PATH", "USER_HEADER", "build_tools_router"]

OPENAPI_PATH = "/tools/openapi.json"  # public: Open WebUI fetches it without the key

USER_HEADER = identity.USER_HEADER


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
    id: str = Field(description="The memory's id, for forget_memory.")
    summary: str
    memory_importance: int | None = None
    tags: list[str] = []
    updated_at: float | None = None
    score: float


class SearchMemoriesAnswer(BaseModel):
    memories: list[RememberedItem]


class ListMemories(BaseModel):
    """Page through the user's long-term memories."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(50, ge=1, le=100, description="How many memories to return.")
    offset: int = Field(
        0, ge=0, le=100_000, description="How many of the newest to skip (for the next page)."
    )

    @field_validator("limit", "offset", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: object) -> object:
        return _refuse_boolean(value)


class ListedMemory(BaseModel):
    id: str = Field(description="The memory's id, for forget_memory.")
    summary: str = Field(description="What ECHO remembers.")
    memory_importance: int
    tags: list[str]
    created_at: str = Field(description="When it was first remembered (ISO 8601, UTC).")
    updated_at: str = Field(description="When it was last confirmed or changed (ISO 8601, UTC).")


class ListMemoriesAnswer(BaseModel):
    memories: list[ListedMemory] = Field(description="Most recently updated first.")
    total: int = Field(description="How many memories ECHO keeps about the user in all.")
    offset: int


class ForgetMemory(BaseModel):
    """Forget one memory of the user."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1,
        max_length=200,
        pattern=wire.TEXT_WITHOUT_NUL,
        description="The memory's id, as list_memories or search_memories gave it.",
    )


class MemoryForgotten(BaseModel):
    forgotten: str = Field(description="The id of the memory deleted.")


class AllMemoriesForgotten(BaseModel):
    forgotten: int = Field(description="How many memories were deleted.")


_ALL_NEWEST = ListMemories()  # list_memories without a body


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


def _user(request: Request) -> str:
    """The calling user, from Open WebUI's `x-openwebui-user-id` header: a 422 naming the header when it
    is missing or blank, or sent twice (`echo.entrypoints.http.identity`; never resolved by picking one)."""
    user_id = identity.single_header(request.headers, USER_HEADER, route="tools")
    if user_id is None:
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
    return user_id


def _instant(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def _unavailable(error: EchoError) -> HTTPException:
    if isinstance(error, memory_search.BackendsNotReady):
        return HTTPException(status_code=503, detail=str(error))
    return HTTPException(status_code=503, detail=f"a backend is unavailable: {error}")


def build_tools_router(keys: security.Keys) -> APIRouter:
    """The tool routes (behind the hooks' key of `keys`) and their OpenAPI document (public)."""
    router = APIRouter()
    operations = APIRouter(
        dependencies=keys.dependencies(security.HOOKS),
        responses=openapi_docs.AUTH_ERRORS if keys.required(security.HOOKS) else {},
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
    ) -> JSONResponse:
        user_id = _user(request)
        backends = memories_api.backends_of(request)
        try:
            found = await memory_search.search_memories(backends, user_id, call.query, call.k)
        except memory_search.BackendsNotReady as error:
            raise HTTPException(status_code=503, detail=str(error)) from error
        except EchoError as error:
            raise HTTPException(status_code=503, detail=f"a backend is unavailable: {error}") from error
        items = [
            {k: item[k] for k in ("id", "summary", "memory_importance", "tags", "updated_at", "score")}
            for item in found
        ]
        return wire.JSONAnswer({"memories": items})

    @operations.post(
        "/tools/list_memories",
        operation_id="list_memories",
        summary="List everything you remember about the user",
        description="Every long-term memory ECHO keeps about this user, most recently updated first, with "
        "its id and dates. Call it when the user asks what you remember, know or have saved about them "
        '("what do you remember about me?"), and to find the id of a memory to forget. Show the user '
        "what it returns; `total` says how many there are, `offset` pages on.",
        response_model=ListMemoriesAnswer,
        responses=openapi_docs.errors(400, 422, 503),
    )
    async def list_memories(
        request: Request, call: Annotated[ListMemories, Body()] = _ALL_NEWEST
    ) -> JSONResponse:
        user_id = _user(request)
        try:
            listed = await user_tools.list_memories(
                memories_api.backends_of(request), user_id, limit=call.limit, offset=call.offset
            )
        except EchoError as error:
            raise _unavailable(error) from error
        items = [
            {
                "id": memory.id,
                "summary": memory.summary,
                "memory_importance": memory.importance,
                "tags": list(memory.tags),
                "created_at": _instant(memory.created_at),
                "updated_at": _instant(memory.updated_at),
            }
            for memory in listed.memories
        ]
        return wire.JSONAnswer({"memories": items, "total": listed.total, "offset": call.offset})

    @operations.post(
        "/tools/forget_memory",
        operation_id="forget_memory",
        summary="Forget one thing you remember about the user",
        description="Delete one long-term memory of this user for good, by its id. When the user asks you "
        'to forget something ("forget that I …"), first find the memory with search_memories or '
        "list_memories, then call this with its id; tell the user what you forgot. A 404 means no such "
        "memory of this user (list again).",
        response_model=MemoryForgotten,
        responses=openapi_docs.errors(400, 404, 422, 503),
    )
    async def forget_memory(request: Request, call: ForgetMemory) -> JSONResponse:
        user_id = _user(request)
        memory_id = call.id.strip()
        try:
            deleted = await user_tools.forget_memory(memories_api.backends_of(request), user_id, memory_id)
        except EchoError as error:
            raise _unavailable(error) from error
        if not deleted:
            raise HTTPException(
                status_code=404,
                detail=f"no memory {memory_id!r} for this user: list_memories gives the ids",
            )
        return wire.JSONAnswer({"forgotten": memory_id})

    @operations.post(
        "/tools/forget_all_memories",
        operation_id="forget_all_memories",
        summary="Forget everything you remember about the user",
        description="Delete every long-term memory of this user for good. Only when the user asks you to "
        "forget everything you remember about them; to forget one thing use forget_memory.",
        response_model=AllMemoriesForgotten,
        responses=openapi_docs.errors(422, 503),
    )
    async def forget_all_memories(request: Request) -> JSONResponse:
        user_id = _user(request)
        try:
            deleted = await user_tools.forget_all_memories(memories_api.backends_of(request), user_id)
        except EchoError as error:
            raise _unavailable(error) from error
        return wire.JSONAnswer({"forgotten": deleted})

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
    ) -> JSONResponse:
        user_id = _user(request)
        backends = memories_api.backends_of(request)
        try:
            found = await context_search.search_session_context(
                memories_api.store_of(request),
                backends.index,
                user_id,
                call.source_id.strip(),
                call.query,
                call.k,
            )
        except EchoError as error:
            raise HTTPException(status_code=503, detail=f"a backend is unavailable: {error}") from error
        return wire.JSONAnswer({k: v for k, v in found.items() if v is not None})

    operations.include_router(registry_tools.build_registry_operations(_user))
    document = get_openapi(
        title="ECHO tools",
        version=echo.__version__,
        description="Tools of ECHO for Open WebUI: the user's long-term memories (search, list, forget),"
        " search in the files attached to a conversation, and the model's own plans and code registry for"
        " a conversation.",
        routes=operations.routes,
    )
    document["components"] = {
        **document.get("components", {}),
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    }
    document["security"] = [{"bearer": []}]
    edge.document(document, openapi_docs.Problem.model_json_schema())  # the 413 and 415 of every POST

    @router.get(OPENAPI_PATH, include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(document)

    router.include_router(operations)
    return router
