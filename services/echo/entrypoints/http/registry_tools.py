"""The registry tools (issue 10): the model keeps its plans and its code entries, per chat.

`build_registry_operations` returns the routes without an auth dependency of their own:
`echo.entrypoints.http.tools` mounts them under its authenticated tool routes, so they are in the one
`/tools/openapi.json`. Each is a `POST` whose JSON body the handler reads itself (bounded: 413 past
`MAX_BODY_BYTES`) and checks against its model in `registry_calls` (422 naming the field, the value
not echoed back); its schema is in the OpenAPI document all the same.

- `save_plan` `{"id"?, "goal", "status", "steps"?, "model"?}`, `update_plan` `{"id", "status"?,
  "goal"?, "steps"?}` (404 naming the id when the chat has no such plan), `list_plans`;
- `commit_code` `{"id", "lang", "content", "message"}` (a new entry or its next version; lines are
  counted here), `read_code` `{"id"}` (404 naming the id), `list_code`.

Every call names its user (`x-openwebui-user-id`) and its chat (`x-openwebui-chat-id`), as Open WebUI
sends them: without one, or with one of them twice, a 422 names the header (`echo.entrypoints.http.identity`).
A user only ever reads and writes their own rows of that chat. 503 when the service has no store or
the store is down. Counted in `echo_tool_calls_total{tool, outcome}`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from echo.entrypoints.http import identity, openapi_docs, wire
from echo.entrypoints.http import memories as memories_api
from echo.entrypoints.http import registry_calls as calls
from echo.errors import EchoError
from echo.ports import store as store_port
from echo.support import metrics

__all__ = ["CHAT_HEADER", "MAX_BODY_BYTES", "build_registry_operations"]

CHAT_HEADER = "x-openwebui-chat-id"
# A JSON body escapes what it carries (aiohttp sends \uXXXX for every non-ASCII character): six
# bytes per byte of content at worst, so a content within MAX_CODE_BYTES always gets to its check.
MAX_BODY_BYTES = 6 * calls.MAX_CODE_BYTES + 64 * 1024

Model = TypeVar("Model", bound=BaseModel)
UserCheck = Callable[[Request], str]

_OUTCOMES = {404: "not_found", 413: "invalid", 422: "invalid", 503: "unavailable"}


def _chat(request: Request) -> str:
    value = identity.single_header(request.headers, CHAT_HEADER, route=None)  # twice: a 422
    if value is None:
        raise wire.unprocessable(
            [
                {
                    "loc": ["header", CHAT_HEADER],
                    "msg": "Field required: Open WebUI sends the chat's id in this header (plans and code"
                    " belong to a saved chat)",
                    "type": "missing",
                }
            ]
        )
    return value.strip()


async def _body(request: Request, model: type[Model]) -> Model:
    data = await wire.read_json(request, MAX_BODY_BYTES)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise wire.unprocessable(_field_errors(error)) from error


def _field_errors(error: ValidationError) -> list[dict[str, Any]]:
    """The errors of a flat body model, each at `body.<field>[.<index>]`. An optional field is a union
    with None: its errors name the union's branches (`steps.list[constrained-str].1`, and `steps.none:
    Input should be None`); the branch names and the None branch's error are left out."""
    described = []
    for found in error.errors():
        if found["type"] == "none_required":
            continue
        loc = found["loc"]
        where = [*loc[:1], *(part for part in loc[1:] if isinstance(part, int))]
        described.append({"loc": ["body", *where], "msg": found["msg"], "type": found["type"]})
    return described


def _registries(request: Request) -> store_port.RegistryStore:
    return memories_api.store_of(request).registries


@contextmanager
def _counted(tool: str) -> Iterator[None]:
    """Count the call by outcome; a store error becomes a 503 that says so."""
    outcome = "ok"
    try:
        yield
    except HTTPException as error:
        outcome = _OUTCOMES.get(error.status_code, "error")
        raise
    except EchoError as error:
        outcome = "unavailable"
        raise HTTPException(status_code=503, detail=f"the store is unavailable: {error}") from error
    finally:
        metrics.TOOL_CALLS.labels(tool, outcome).inc()


def _instant(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def _plan(plan: store_port.Plan) -> dict[str, Any]:
    return {
        "id": plan.id,
        "goal": plan.goal,
        "status": plan.status,
        "steps": list(plan.steps),
        "model": plan.model,
        "created_at": _instant(plan.created_at),
        "updated_at": _instant(plan.updated_at),
    }


def _entry(entry: store_port.CodeEntry) -> dict[str, Any]:
    found = {
        "id": entry.id,
        "lang": entry.lang,
        "lines": entry.lines,
        "version": entry.version,
        "last_commit": entry.last_commit,
        "updated_at": _instant(entry.updated_at),
    }
    if entry.content is not None:
        found["content"] = entry.content
    return found


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def build_registry_operations(user: UserCheck) -> APIRouter:
    """The six registry operations; `user` reads the user header (the tool server's own check: 422 when
    it is missing or sent twice)."""
    router = APIRouter()

    @router.post(
        "/tools/save_plan",
        operation_id="save_plan",
        responses=openapi_docs.errors(413, 422, 503),
        summary="Save your plan for this conversation",
        description="Create a plan (leave out id: a new id is returned) or replace the plan with this id."
        " Your plans are listed in registre_plan of the <environnement_contexte> block on every turn; keep"
        " the status current with update_plan as you work.",
        openapi_extra=_body_schema(calls.SavePlan),
    )
    async def save_plan(request: Request) -> JSONResponse:
        with _counted("save_plan"):
            user_id, chat_id = user(request), _chat(request)
            call = await _body(request, calls.SavePlan)
            plan = await _registries(request).save_plan(
                user_id, chat_id, plan_id=call.id, goal=call.goal, status=call.status, steps=call.steps,
                model=call.model,
            )  # fmt: skip
            return JSONResponse(_plan(plan))

    @router.post(
        "/tools/update_plan",
        operation_id="update_plan",
        responses=openapi_docs.errors(404, 413, 422, 503),
        summary="Update one of your plans",
        description="Change the status, the goal or the steps of a plan of this conversation (what you"
        " leave out stays as it is).",
        openapi_extra=_body_schema(calls.UpdatePlan),
    )
    async def update_plan(request: Request) -> JSONResponse:
        with _counted("update_plan"):
            user_id, chat_id = user(request), _chat(request)
            call = await _body(request, calls.UpdatePlan)
            plan = await _registries(request).update_plan(
                user_id, chat_id, call.id, goal=call.goal, status=call.status, steps=call.steps
            )
            if plan is None:
                raise HTTPException(
                    status_code=404,
                    detail=f"no plan {call.id!r} in this conversation: list_plans lists its plans,"
                    " save_plan creates one",
                )
            return JSONResponse(_plan(plan))

    @router.post(
        "/tools/list_plans",
        operation_id="list_plans",
        responses=openapi_docs.errors(422, 503),
        summary="List your plans for this conversation",
        description="Every plan of this conversation with its goal, status and steps, oldest first.",
    )
    async def list_plans(request: Request) -> JSONResponse:
        with _counted("list_plans"):
            user_id, chat_id = user(request), _chat(request)
            plans = await _registries(request).list_plans(user_id, chat_id)
            return JSONResponse({"plans": [_plan(plan) for plan in plans]})

    @router.post(
        "/tools/commit_code",
        operation_id="commit_code",
        responses=openapi_docs.errors(413, 422, 503),
        summary="Commit a code file to your code registry",
        description="Store the whole content of a file you wrote in this conversation, under its file"
        " name, with a commit message: a new entry, or the next version of it. Your entries are listed in"
        " registre_codex of the <environnement_contexte> block; read_code gives a content back.",
        openapi_extra=_body_schema(calls.CommitCode),
    )
    async def commit_code(request: Request) -> JSONResponse:
        with _counted("commit_code"):
            user_id, chat_id = user(request), _chat(request)
            call = await _body(request, calls.CommitCode)
            entry = await _registries(request).commit_code(
                user_id, chat_id, call.id, lang=call.lang, content=call.content, message=call.message
            )
            return JSONResponse(_entry(entry))

    @router.post(
        "/tools/read_code",
        operation_id="read_code",
        responses=openapi_docs.errors(404, 413, 422, 503),
        summary="Read a file of your code registry",
        description="The latest content of a code entry of this conversation, with its version and lines.",
        openapi_extra=_body_schema(calls.ReadCode),
    )
    async def read_code(request: Request) -> JSONResponse:
        with _counted("read_code"):
            user_id, chat_id = user(request), _chat(request)
            call = await _body(request, calls.ReadCode)
            entry = await _registries(request).read_code(user_id, chat_id, call.id)
            if entry is None:
                raise HTTPException(
                    status_code=404,
                    detail=f"no code entry {call.id!r} in this conversation: list_code lists its entries,"
                    " commit_code creates one",
                )
            return JSONResponse(_entry(entry))

    @router.post(
        "/tools/list_code",
        operation_id="list_code",
        responses=openapi_docs.errors(422, 503),
        summary="List your code registry for this conversation",
        description="Every code entry of this conversation (file name, language, lines, version, last"
        " commit message), without contents; read_code reads one.",
    )
    async def list_code(request: Request) -> JSONResponse:
        with _counted("list_code"):
            user_id, chat_id = user(request), _chat(request)
            entries = await _registries(request).list_code(user_id, chat_id)
            return JSONResponse({"entries": [_entry(entry) for entry in entries]})

    return router
