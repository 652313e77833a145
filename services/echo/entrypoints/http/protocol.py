"""Pipelines protocol routes: `/models`, filter inlet/outlet, valves (served on `/` and `/v1`), and
the combined hooks `POST /hooks/inlet` and `/hooks/outlet` (every filter in one call, for the Function).

A filter hook answers the new body, as Open WebUI expects; a caller that sends `X-Echo-Events: 1` (the
Open WebUI Function) gets the body and its status events instead (`wire.render_hook_answer`).
A hook's user is the `user` object of the call, never a user id written in the body
(`echo.entrypoints.http.identity`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import structlog
from fastapi import APIRouter, HTTPException, Path, Request
from fastapi.responses import Response
from opentelemetry import propagate
from pydantic import ValidationError

from echo.capabilities import base, registry
from echo.config import live as live_config
from echo.config import valves as valves_module
from echo.config.valves import Valves
from echo.domain import bodies
from echo.entrypoints.http import identity, openapi_docs, runner, wire
from echo.errors import ConfigError

__all__ = ["CombinedHook", "build_combined_hooks", "build_protocol_router"]

log = structlog.get_logger("echo.hooks")


def _editor_view(valves: Valves) -> dict[str, Any]:
    """Valves as Open WebUI's editor shows them: it puts every valve in a text field, so mappings
    (`model_thresholds`) go as JSON text, which `valves/update` accepts back."""
    dumped = valves.model_dump(mode="json")
    return {name: json.dumps(value) if isinstance(value, dict) else value for name, value in dumped.items()}


def _valves_refused(error: ConfigError) -> HTTPException:
    """A 422 for valves refused: the message names each valve and rule; `errors` locates each valve
    refused on its own (a rule across valves is in the message, at `body`)."""
    cause = error.__cause__
    located: list[dict[str, Any]] = []
    if isinstance(cause, ValidationError):
        located = [
            {
                "loc": ["body", *found["loc"]],
                "msg": found["msg"].removeprefix("Value error, "),
                "type": found["type"],
            }
            for found in cause.errors(include_url=False)
        ]
    detail = wire.unprocessable(located).detail
    return HTTPException(
        status_code=422, detail={**(detail if isinstance(detail, dict) else {}), "message": str(error)}
    )


CombinedHook = Callable[[Request], Awaitable[Response]]


def _priority(config: live_config.LiveConfig, flt: base.Filter) -> int:
    return int(getattr(config.valves(flt.id), "priority", flt.priority))


async def read_filter_request(
    request: Request, max_body_bytes: int, label: str, phase: str
) -> tuple[dict[str, Any], dict[str, Any], bodies.TurnIds]:
    """A filter call's body, its user and the turn's ids, read and checked once (a 4xx naming the
    field otherwise), bound to the request's logs. The user is the object Open WebUI attached, never
    a field of the body (`echo.entrypoints.http.identity`)."""
    payload = await wire.read_json(request, max_body_bytes)
    wire.validate(wire.FILTER_REQUEST, payload)
    body: dict[str, Any] = payload["body"]
    user: dict[str, Any] = payload.get("user") or {}
    ids = bodies.turn_ids(body, user)
    structlog.contextvars.bind_contextvars(
        filter=label, phase=phase, chat_id=ids.chat_id, user_id=ids.user_id
    )
    identity.report("filter", phase, ids.user_id, bodies.foreign_claims(body, ids.user_id))
    return body, user, ids


def build_combined_hooks(
    *, filter_set: registry.FilterSet, config: live_config.LiveConfig, max_body_bytes: int
) -> dict[base.Phase, CombinedHook]:
    """The endpoints of `POST /hooks/inlet` and `/hooks/outlet`: every filter of `filter_set` (not the
    pipes) in priority order, each as `POST /{hook_id}/filter/{phase}` runs it (`runner.run_chain`).
    Each takes the request alone (no FastAPI parameter): the edge checked the key, the media type
    and the size before (`echo.entrypoints.http.edge`)."""

    def combined_hook(phase: base.Phase) -> CombinedHook:
        async def run_filters(request: Request) -> Response:
            body, user, ids = await read_filter_request(request, max_body_bytes, "hooks", phase)
            # Priority order now (a valve may change it; ties keep the registry's order), each filter
            # with its own valves, read once per request.
            steps = [
                (
                    flt,
                    base.HookContext(
                        filter_id=flt.id, phase=phase, user=user, ids=ids, valves=config.valves(flt.id)
                    ),
                )
                for flt in sorted(filter_set.filters.values(), key=lambda flt: _priority(config, flt))
            ]
            headers = request.headers
            answer, events = await runner.run_chain(
                steps,
                body,
                trace_parent=propagate.extract(headers),
                received_at=getattr(request.state, "received_at", None),
            )
            vary = {"Vary": wire.EVENTS_HEADER}
            if wire.wants_events(headers):  # the Function: body and every filter's events
                enveloped = wire.render_hook_answer(answer, events)
                return Response(enveloped, media_type=wire.HOOK_ANSWER_MEDIA_TYPE, headers=vary)
            return Response(answer, media_type="application/json", headers=vary)

        return run_filters

    return {"inlet": combined_hook("inlet"), "outlet": combined_hook("outlet")}


def build_protocol_router(
    *,
    filter_set: registry.FilterSet,
    config: live_config.LiveConfig,
    max_body_bytes: int,
    pipes_enabled: bool,
    combined: Mapping[base.Phase, CombinedHook] | None = None,
) -> APIRouter:
    """The protocol routes. `combined`: the endpoints of `POST /hooks/inlet` and `/hooks/outlet`
    (`build_combined_hooks`; built here when not given), routed and documented here; `create_app`
    also answers them ahead of FastAPI's routing, with the same endpoints (`echo.entrypoints.http.hot`)."""
    router = APIRouter()
    if combined is None:
        combined = build_combined_hooks(filter_set=filter_set, config=config, max_body_bytes=max_body_bytes)
    created = int(time.time())
    # The ids served, as enums in the OpenAPI document; another id is a 404 that lists these.
    hook_ids = [*filter_set.filters, *(filter_set.pipes if pipes_enabled else ())]
    hook_id_path = Path(
        description="A filter (or pipe) of this server.", json_schema_extra={"enum": hook_ids}
    )
    filter_id_path = Path(
        description="A filter with valves.", json_schema_extra={"enum": [*filter_set.filters]}
    )
    phase_path = Path(description="The hook.", json_schema_extra={"enum": ["inlet", "outlet"]})
    hook_answer = {
        200: {
            "description": "The new body (`application/json`, what Open WebUI's Pipelines expects), or with"
            f" `{wire.EVENTS_HEADER}: {wire.EVENTS_VERSION}` the body and its status events.",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                wire.HOOK_ANSWER_MEDIA_TYPE: {
                    "schema": {
                        "type": "object",
                        "required": ["body", "events"],
                        "properties": {
                            "body": {"type": "object"},
                            "events": {"type": "array", "items": {"type": "object"}},
                        },
                    }
                },
            },
        },
        **openapi_docs.errors(404, 413, 422),
    }

    def filter_priority(flt: base.Filter) -> int:
        return _priority(config, flt)

    def known_hook(hook_id: str) -> base.Filter:
        flt = filter_set.filters.get(hook_id) or (filter_set.pipes.get(hook_id) if pipes_enabled else None)
        if flt is None:
            known = ", ".join([*filter_set.filters, *(filter_set.pipes if pipes_enabled else ())])
            raise HTTPException(
                status_code=404, detail=f"unknown filter id {hook_id!r}; this server has: {known}"
            )
        return flt

    def known_filter(filter_id: str) -> base.Filter:
        flt = filter_set.filters.get(filter_id)
        if flt is None:
            known = ", ".join(filter_set.filters)
            raise HTTPException(
                status_code=404, detail=f"no valves for {filter_id!r}; filters with valves: {known}"
            )
        return flt

    @router.get("/models")
    async def list_models() -> dict[str, Any]:
        data: list[dict[str, Any]] = []
        for flt in filter_set.filters.values():
            data.append(
                {
                    "id": flt.id,
                    "name": flt.name,
                    "object": "model",
                    "created": created,
                    "owned_by": "echo",
                    "description": flt.description,
                    "info": {"meta": {"description": flt.description}},
                    "pipeline": {
                        "type": "filter",
                        "pipelines": ["*"],
                        "priority": filter_priority(flt),
                        "valves": True,
                    },
                }
            )
        if pipes_enabled:
            for pipe in filter_set.pipes.values():
                data.append(
                    {
                        "id": pipe.id,
                        "name": pipe.name,
                        "object": "model",
                        "created": created,
                        "owned_by": "echo",
                        "description": pipe.description,
                        "info": {"meta": {"description": pipe.description}},
                        "pipeline": {"type": "pipe", "valves": False},
                    }
                )
        return {"data": data, "object": "list", "pipelines": True}

    @router.get("/pipelines")
    async def list_pipelines() -> dict[str, Any]:
        """What Open WebUI's admin page (Settings → Pipelines) lists, with a valves editor per filter."""
        data: list[dict[str, Any]] = [
            {"id": flt.id, "name": flt.name, "type": "filter", "valves": True}
            for flt in filter_set.filters.values()
        ]
        if pipes_enabled:
            data += [
                {"id": pipe.id, "name": pipe.name, "type": "pipe", "valves": False}
                for pipe in filter_set.pipes.values()
            ]
        return {"data": data}

    def change_pipelines(path_params: Mapping[str, Any]) -> HTTPException:
        return HTTPException(
            status_code=405,
            detail=f"pipelines/{path_params.get('action', '')}: ECHO's filters are built in; pipeline code"
            " cannot be uploaded, added or deleted here (configure them with valves)",
            headers={"Allow": ""},  # RFC 9110 §10.2.1: an empty Allow, the resource allows no method
        )

    # Always a 405, whatever the method: not an operation (undocumented).
    openapi_docs.add_refusing_route(router, "/pipelines/{action}", change_pipelines)

    @router.post(
        "/{hook_id}/filter/{phase}",
        response_class=Response,
        responses=hook_answer,
        openapi_extra=openapi_docs.json_body(wire.FILTER_REQUEST),
    )
    async def filter_hook(request: Request, hook_id: str = hook_id_path, phase: str = phase_path) -> Response:
        if phase not in ("inlet", "outlet"):
            raise HTTPException(
                status_code=404, detail=f"unknown filter phase {phase!r}; use inlet or outlet"
            )
        flt = known_hook(hook_id)
        body, user, ids = await read_filter_request(request, max_body_bytes, hook_id, phase)
        valves = config.valves(hook_id) if hook_id in filter_set.filters else None
        ctx = base.HookContext(
            filter_id=hook_id, phase=cast(base.Phase, phase), user=user, ids=ids, valves=valves
        )
        parent = propagate.extract(request.headers)
        answer = await runner.run_hook(
            flt, body, ctx, trace_parent=parent, received_at=getattr(request.state, "received_at", None)
        )
        vary = {"Vary": wire.EVENTS_HEADER}
        if wire.wants_events(request.headers):  # the Function shim: body and status events
            enveloped = wire.render_hook_answer(answer, ctx.events)
            return Response(enveloped, media_type=wire.HOOK_ANSWER_MEDIA_TYPE, headers=vary)
        # Open WebUI over Pipelines: the bare body (the runner logged and counted the events).
        return Response(answer, media_type="application/json", headers=vary)

    # One call per phase for the Open WebUI Function: every filter of this server, in priority order.
    for combined_phase in ("inlet", "outlet"):
        router.add_api_route(
            f"/hooks/{combined_phase}",
            combined[combined_phase],
            methods=["POST"],
            name=f"run_filters_{combined_phase}",
            summary=f"Run every filter's {combined_phase} in one call",
            description=f"Runs the {combined_phase} of every ECHO filter of this server in priority order"
            " (lowest `priority` valve first), each on the body the one before answered, each with its"
            " own valves and deadline, exactly as `POST /{hook_id}/filter/" + combined_phase + "` runs"
            " it: a filter that fails, runs out of time or answers what JSON cannot carry hands on the"
            " body it was given (a masking outlet: its safe version) and the others' work is kept. The"
            " answer is the last body; with `X-Echo-Events: 1`, the body and the status events of every"
            " filter in order. The first filter's deadline counts from the request's arrival, each later"
            " one's from its own start. Pipes are not run here. What the Open WebUI Function calls: two"
            " calls per turn.",
            response_class=Response,
            responses=hook_answer,
            openapi_extra=openapi_docs.json_body(wire.FILTER_REQUEST),
        )

    @router.get("/{filter_id}/valves", responses=openapi_docs.errors(404))
    async def get_valves(filter_id: str = filter_id_path) -> dict[str, Any]:
        known_filter(filter_id)
        return _editor_view(config.valves(filter_id))

    @router.get("/{filter_id}/valves/spec", responses=openapi_docs.errors(404))
    async def get_valves_spec(filter_id: str = filter_id_path) -> dict[str, Any]:
        known_filter(filter_id)
        return type(config.valves(filter_id)).model_json_schema()

    async def update_valves(request: Request, filter_id: str) -> dict[str, Any]:
        known_filter(filter_id)
        data = await wire.read_json(request, max_body_bytes)
        if not isinstance(data, dict):
            raise wire.unprocessable(
                [{"loc": ["body"], "msg": "valves must be a JSON object", "type": "dict_type"}]
            )
        try:
            valves = config.replace_valves(filter_id, data)
        except live_config.ValvesManagedByFile as error:
            raise HTTPException(status_code=409, detail=str(error)) from error
        except ConfigError as error:
            raise _valves_refused(error) from error
        log.info("valves_updated", filter=filter_id)
        return _editor_view(valves)

    def valves_updater(filter_id: str) -> Callable[[Request], Awaitable[dict[str, Any]]]:
        async def update_these_valves(request: Request) -> dict[str, Any]:
            return await update_valves(request, filter_id)

        return update_these_valves

    # One documented route per filter, its body the filter's own valves (each optional: the body
    # replaces the valves, the ones left out take their defaults); another id is a 404 listing these.
    for filter_id in filter_set.filters:
        router.add_api_route(
            f"/{filter_id}/valves/update",
            valves_updater(filter_id),
            methods=["POST"],
            name=f"update_valves_{filter_id}",
            summary=f"Replace the valves of {filter_id}",
            description="The body replaces the filter's valves and is saved: a replace, not a merge. Every"
            " valve left out of the body is reset to its default, whatever it was before (Open WebUI's"
            " valves editor always sends them all). To change one valve, `GET /{id}/valves` and send"
            " the whole answer back with that valve changed; the answer is the valves now in force."
            " Each valve takes its own type only (a number also as its plain decimal text, which Open"
            " WebUI's editor sends; a mapping also as its JSON text), within its bounds; a body that"
            " breaks one is a 422 naming the valve. The rules across valves, which JSON Schema cannot"
            " say, are listed in the body schema (its description and `x-echo-rules`): a body that"
            " breaks one is a 422 naming its valves.",
            responses=openapi_docs.errors(409, 413, 422, field_errors=True),
            openapi_extra=openapi_docs.valves_body(valves_module.FILTER_VALVES[filter_id]),
        )
    router.add_api_route(
        "/{filter_id}/valves/update", update_valves, methods=["POST"], include_in_schema=False
    )
    return router
