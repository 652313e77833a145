"""The memory API (on `/` and `/v1`): list, search, read, delete memories; forget a user. Bearer auth
with the admin key `ECHO_ADMIN_KEY`, not the hooks' key (`echo.entrypoints.http.security`, checked at the
edge).

- `GET /memories?user_id=…&limit=&offset=`: the user's memories, most recently updated first.
- `POST /memories/search` `{"user_id", "query", "k"}` (k: 1–100, default 10): the user's memories
  nearest to the query
  (through the embedder and vector store the recall uses; `score` is the cosine similarity).
- `GET /memories/{id}?user_id=…`: one memory with its provenance (the chat windows it came from)
  and its history (every version a merge replaced).
- `DELETE /memories/{id}?user_id=…`: delete one memory (its history and its vector go too).
- `DELETE /users/{user_id}`: forget everything about a user (`echo.capabilities.memory.forgetting`): memories
and
  their history, summaries, stored messages, chat heads, vectors (memories and ephemeral files) and
  every job about them.

Every read and delete is scoped to the user named: another user's memory id answers 404. Bad input
is a 422 naming the field, always `{"detail": {"message", "errors"}}` (a query parameter's too:
`_FieldErrorsRoute`); 503 when the store, the embedder or the vector store is not there. A method a
path does not serve is a 405 whose `Allow` lists the ones it does.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any, NotRequired

import structlog
from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict  # pydantic needs this TypedDict before Python 3.12

from echo.adapters.store import errors as store_errors
from echo.adapters.store import memories
from echo.capabilities.memory import forgetting, user_tools
from echo.capabilities.memory import search as memory_search
from echo.entrypoints.http import openapi_docs, wire
from echo.errors import EchoError
from echo.ports import backends as backends_port

__all__ = [
    "SEARCH_REQUEST",
    "Forgotten",
    "MemoryDeleted",
    "MemorySearch",
    "backends_of",
    "build_memories_router",
]

log = structlog.get_logger("echo.hooks")

_NOT_FOUND = "no memory with this id for this user"
UserId = Annotated[
    str, Query(min_length=1, pattern=wire.TEXT_WITHOUT_NUL, description="The user whose memories these are.")
]
MemoryId = Annotated[str, Path(pattern=wire.TEXT_WITHOUT_NUL, description="The memory's id.")]
ForgottenUser = Annotated[str, Path(pattern=wire.TEXT_WITHOUT_NUL, description="The user to forget.")]
Limit = Annotated[int, Query(ge=1, le=1000)]
# PostgreSQL's OFFSET is a bigint: a larger one is a 422 naming it, not a store error (a 503).
Offset = Annotated[int, Query(ge=0, le=2**63 - 1)]


class MemorySearch(TypedDict):
    """The JSON body of `POST /memories/search`."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    user_id: Annotated[str, Field(min_length=1)]
    query: Annotated[str, Field(min_length=1, max_length=20000)]
    k: NotRequired[Annotated[int, Field(ge=1, le=100)]]


SEARCH_REQUEST: TypeAdapter[Any] = TypeAdapter(MemorySearch)


class Forgotten(BaseModel):
    """What `DELETE /users/{user_id}` forgot (200), or what it could not (503: `failed` names each part
    that failed, with why; call again to finish, every part is idempotent)."""

    user_id: str = Field(description="The user forgotten.")
    deleted: dict[str, dict[str, int]] = Field(
        description="By part (`jobs_and_memories`, `conversations`, `attachments`, `shadow`,"
        " `registries`, `vectors`), the rows or points it deleted by kind, such as"
        ' `{"jobs_and_memories": {"jobs": 2, "memories": 5}}`; a part that failed is not here.'
    )
    failed: dict[str, str] = Field(
        description="By part that failed, why (empty when everything was forgotten: the answer is a 200)."
    )


class MemoryDeleted(BaseModel):
    """What `DELETE /memories/{memory_id}` deleted."""

    deleted: str = Field(description="The memory's id.")
    user_id: str


class _FieldErrorsRoute(APIRoute):
    """A route whose 422 for a query or path parameter is `wire.unprocessable`'s `{"message",
    "errors"}`, as its body's, not FastAPI's bare list: one documented shape for every 422."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_with_field_errors(request: Request) -> Response:
            try:
                return await handle(request)
            except RequestValidationError as error:
                raise wire.unprocessable(list(error.errors())) from error

        return handle_with_field_errors


def backends_of(request: Request) -> backends_port.Backends:
    """The running service's backends (`echo.ports.backends`, as `create_app` keeps them); 503 when
    it runs without a store."""
    backends: backends_port.Backends = request.app.state.backends
    if backends.store is None:
        raise HTTPException(status_code=503, detail="no store: this service runs without backends")
    return backends


def store_of(request: Request) -> backends_port.Repositories:
    """The running service's repositories and job queue; 503 when it runs without a store."""
    store = backends_of(request).store
    assert store is not None  # backends_of answered 503 otherwise
    return store


def _unavailable(error: EchoError) -> HTTPException:
    log.warning("memory_api_backend_failed", error=str(error))
    return HTTPException(status_code=503, detail=f"a backend is unavailable: {error}")


def _errors(*codes: int, **options: Any) -> dict[int | str, Any]:
    return openapi_docs.errors(*codes, field_errors=True, **options)


def build_memories_router(*, max_body_bytes: int) -> APIRouter:
    router = APIRouter(route_class=_FieldErrorsRoute)

    @router.get("/memories", responses=_errors(422, 503))
    async def list_memories(
        request: Request,
        user_id: UserId,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> JSONResponse:
        store = store_of(request).memories
        try:
            rows = await store.list(user_id, limit=limit, offset=offset)
            total = await store.count(user_id)
        except store_errors.StoreError as error:
            raise _unavailable(error) from error
        data = [memories.to_json(row.memory) for row in rows]
        return JSONResponse({"data": data, "total": total, "limit": limit, "offset": offset})

    @router.post(
        "/memories/search",
        responses=_errors(413, 422, 503),
        openapi_extra=openapi_docs.json_body(SEARCH_REQUEST),
    )
    async def search(request: Request) -> JSONResponse:
        data = await wire.read_json(request, max_body_bytes)
        wire.validate(SEARCH_REQUEST, data)
        try:
            found = await memory_search.search_memories(
                backends_of(request), data["user_id"], data["query"], int(data.get("k", 10)), max_tokens=None
            )
        except memory_search.BackendsNotReady as error:
            raise HTTPException(status_code=503, detail=str(error)) from error
        except EchoError as error:
            raise _unavailable(error) from error
        return JSONResponse({"data": found})

    @router.get("/memories/{memory_id}", responses=_errors(404, 422, 503))
    async def get_memory(request: Request, memory_id: MemoryId, user_id: UserId) -> JSONResponse:
        try:
            row = await store_of(request).memories.get(user_id, memory_id, with_history=True)
        except store_errors.StoreError as error:
            raise _unavailable(error) from error
        if row is None:
            raise HTTPException(status_code=404, detail=_NOT_FOUND)
        answer = memories.to_json(row.memory)
        answer["history"] = [
            {
                "version": v.version,
                "summary": v.summary,
                "memory_importance": v.importance,
                "tags": list(v.tags),
                "replaced_at": v.replaced_at,
                "replaced_by_window": v.window,
            }
            for v in row.memory.history
        ]
        return JSONResponse(answer)

    @router.delete("/memories/{memory_id}", response_model=MemoryDeleted, responses=_errors(404, 422, 503))
    async def delete_memory(request: Request, memory_id: MemoryId, user_id: UserId) -> MemoryDeleted:
        try:  # the vector store not ready yet: the point goes with its user (DELETE /users/{id})
            deleted = await user_tools.forget_memory(
                backends_of(request), user_id, memory_id, vectors_required=False
            )
        except EchoError as error:
            raise _unavailable(error) from error
        if not deleted:
            raise HTTPException(status_code=404, detail=_NOT_FOUND)
        return MemoryDeleted(deleted=memory_id, user_id=user_id)

    @router.delete(
        "/users/{user_id}",
        response_model=Forgotten,
        responses={
            **_errors(422),
            503: {
                "model": Forgotten | openapi_docs.Problem,
                "description": "A part could not forget (`failed` names it, with why: call again), or"
                " the service runs without a store (`detail`).",
            },
        },
    )
    async def forget_user(request: Request, response: Response, user_id: ForgottenUser) -> Forgotten:
        backends = backends_of(request)
        vectors = await backends.index.vectors() if backends.index is not None else None  # None: not ready
        parts = forgetting.builtin_forgetting(store_of(request), lambda: vectors)
        done = await parts.forget(user_id)
        if done.failed:
            response.status_code = 503
        return Forgotten(user_id=user_id, deleted=done.deleted, failed=done.failed)

    openapi_docs.allow_documented_methods(router)
    return router
