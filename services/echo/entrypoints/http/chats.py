"""Chat operations: `POST /chats/{chat_id}/compact`, manual compaction (`/` and `/v1`; bearer auth with
the admin key `ECHO_ADMIN_KEY`, like the memory-management API).

Enqueues a summary of the chat's latest branch now, whatever `compression_threshold_tokens` says
(`echo.capabilities.compression.jobs.compact`; the job is the one the outlet would enqueue, under the
`echo_compression` valves in force). The user is named by `user_id` in the JSON body or by Open
WebUI's `x-openwebui-user-id` header (what its tool servers send, DESIGN §3); the body may be
empty when the header is there. An optional `model` names the chat's model (its summary window and,
when `summary_model` is empty, the model that summarises; without it, the worker's default).

Answers (every one a JSON object with `status` and `detail`):
- 202 `queued`: `job_id`, `state` (`pending`, or the state of the job already enqueued for this
  branch point), `start`/`stop` (the turns it folds) and `covered_hash`;
- 200 `already_summarised`: a summary of this branch point exists (`covered_hash`, `covered_count`);
- 200 `nothing`: the branch is all verbatim head and `keep_last` tail, nothing to summarise;
- 404 `unknown_chat`: ECHO never saw a completed turn of this chat for this user;
- 409 `incomplete`: the branch's messages are no longer all stored;
- 422: no user (`user_id` named), a body that is not the shape above, two different users, the
  user header sent twice, or a summary window that breaks the 80% rule; 503: no store, or the store
  is down.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, HTTPException, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from starlette.datastructures import Headers
from typing_extensions import TypedDict  # pydantic needs this TypedDict before Python 3.12

from echo.adapters.store import errors as store_errors
from echo.capabilities.compression import filter as compression
from echo.capabilities.compression import jobs as compression_jobs
from echo.config import live as live_config
from echo.config import valves as valves_module
from echo.domain import bodies
from echo.entrypoints.http import identity, openapi_docs, wire
from echo.entrypoints.http import memories as memories_api
from echo.errors import ConfigError

__all__ = ["USER_HEADER", "build_chats_router"]

log = structlog.get_logger("echo.hooks")

USER_HEADER = identity.USER_HEADER

_STATUS_CODES: Mapping[compression_jobs.Outcome, int] = {
    "queued": 202,
    "summarised": 200,
    "nothing": 200,
    "unknown_chat": 404,
    "incomplete": 409,
}


class CompactRequest(TypedDict, total=False):
    """The JSON body of `POST /chats/{chat_id}/compact` (optional when the user header is sent)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    user_id: Annotated[str, Field(min_length=1, pattern=wire.TEXT_WITHOUT_NUL)]
    model: Annotated[str, Field(min_length=1, pattern=wire.TEXT_WITHOUT_NUL)]


COMPACT_REQUEST: TypeAdapter[CompactRequest] = TypeAdapter(CompactRequest)
ChatId = Annotated[str, Path(pattern=wire.TEXT_WITHOUT_NUL, description="Open WebUI's chat id.")]


class CompactAnswer(BaseModel):
    """Every answer of the route but a 422 or a 503: its outcome and, by outcome, the job or summary."""

    model_config = ConfigDict(extra="allow")

    status: str = Field(description="queued, already_summarised, nothing, unknown_chat or incomplete.")
    detail: str


async def _body(request: Request, limit: int) -> Any:
    """The JSON body, `{}` when the request has none (no Content-Length nor Transfer-Encoding, or 0)."""
    length = request.headers.get("content-length")
    if length == "0" or (length is None and "transfer-encoding" not in request.headers):
        return {}
    return await wire.read_json(request, limit)


def _user_id(data: CompactRequest, headers: Headers) -> str:
    """The chat's user: `user_id` in the body or the user header (both: the same user). This route is
    the operator's (compaction on demand), not a browser's, so the body may name the user; the header
    sent twice is a 422 all the same (`echo.entrypoints.http.identity`)."""
    from_body = data.get("user_id")
    from_header = identity.single_header(headers, USER_HEADER, route="compact")
    if from_body and from_header and from_body != from_header:
        identity.report("compact", "call", from_header, [bodies.Claim("user_id", from_body)])
        raise wire.unprocessable(
            [
                {
                    "loc": ["body", "user_id"],
                    "msg": f"names another user than the {USER_HEADER} header; send one of them",
                    "type": "value_error",
                }
            ]
        )
    user_id = from_body or from_header
    if not user_id:
        raise wire.unprocessable(
            [
                {
                    "loc": ["body", "user_id"],
                    "msg": f"Field required: name the chat's user with user_id in the JSON body "
                    f"or the {USER_HEADER} header",
                    "type": "missing",
                }
            ]
        )
    return user_id


def build_chats_router(config: live_config.LiveConfig, *, max_body_bytes: int) -> APIRouter:
    router = APIRouter()

    @router.post(
        "/chats/{chat_id}/compact",
        status_code=202,
        responses={
            200: {"model": CompactAnswer, "description": "`already_summarised`, or `nothing` to summarise."},
            202: {"model": CompactAnswer, "description": "`queued`: the summary job (`job_id`, `state`)."},
            **openapi_docs.errors(404, 409, 413, 422, 503, models={404: CompactAnswer, 409: CompactAnswer}),
        },
        # Documented with `user_id` required: the header in its place is Open WebUI's convenience.
        openapi_extra=openapi_docs.json_body(COMPACT_REQUEST, require=["user_id"]),
    )
    async def compact_chat(chat_id: ChatId, request: Request) -> JSONResponse:
        data = await _body(request, max_body_bytes)
        wire.validate(COMPACT_REQUEST, data)
        user_id = _user_id(data, request.headers)
        structlog.contextvars.bind_contextvars(chat_id=chat_id, user_id=user_id)
        store = memories_api.store_of(request)  # 503 when the service runs without a store
        settings = config.valves(compression.CompressionFilter.id)
        if not isinstance(settings, valves_module.CompressionValves):  # pragma: no cover - by construction
            settings = valves_module.CompressionValves()
        try:
            done = await compression_jobs.compact(
                store, user_id=user_id, chat_id=chat_id, settings=settings, model=data.get("model")
            )
        except store_errors.StoreError as error:
            log.warning("compaction_store_failed", error=str(error))
            raise HTTPException(status_code=503, detail=f"the store is unavailable: {error}") from error
        except ConfigError as error:
            raise HTTPException(status_code=422, detail={"message": str(error)}) from error
        return JSONResponse(done.to_wire(), status_code=_STATUS_CODES[done.outcome])

    return router
