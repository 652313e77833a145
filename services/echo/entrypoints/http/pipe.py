"""`POST /chat/completions` for the `echo.<model>` pipe models: Gemini with the rich shadow, answers
masked as they stream.

The turn itself (suture, Gemini, ECHO's own tools, archive) is ``echo.capabilities.shadow.turn``; this module
speaks OpenAI: a JSON completion, or SSE chunks (`delta.content`, `delta.reasoning_content` for
Gemini's thoughts, `delta.tool_calls` with `finish_reason: "tool_calls"` for the tools Open WebUI
runs), then `data: [DONE]`. Errors before the first byte get a status and an OpenAI-style error body
(422 for a bad request naming the field; 429 stays 429; other Gemini failures 502); an error
mid-stream ends the stream with an error event and `[DONE]`.

Identity (DESIGN §7, issue 18). Open WebUI asserts the calling user twice, both from the session it
authenticated: the payload's top-level `user` (`{name, id, email, role}`, written by Open WebUI for
a model it lists as a pipeline, as ECHO's pipes are) and the `x-openwebui-user-id` header (only with
`ENABLE_FORWARD_USER_INFO_HEADERS=true`). The header wins when it is there: Open WebUI forwards no
header of the browser's, so nothing a browser sends reaches it, while the payload is built from the
client's chat request, and its `user` is Open WebUI's only while Open WebUI lists the model as a
pipeline (its `/models` entry has a `pipeline` key); for any other model it is what the client sent.
Without the header, the payload's `user` is the identity. When both are there and differ, the header
is used and the call is counted in `echo_identity_mismatch_total{route="pipe"}`; a header sent twice
is a 422. `echo_ctx.user_id` (the pipe inlet's note) and a `user_id` in the body are never the
identity: one that names another user is logged and counted. Without any user the call is answered
without the shadow.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any

import structlog
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse

from echo.adapters.llm import gemini_chat
from echo.capabilities.masking import filter as masking_filter
from echo.capabilities.shadow import metrics as shadow_metrics
from echo.capabilities.shadow import server_tools
from echo.capabilities.shadow import turn as pipe_turn
from echo.domain import bodies, masking
from echo.entrypoints.http import identity, openapi_docs, wire
from echo.ports import backends as backends_port
from echo.support import metrics

__all__ = ["build_pipe_router"]

log = structlog.get_logger("echo.pipe")

OnMasked = Callable[[Mapping[str, int]], None]


def _llm_status(error: gemini_chat.LLMError) -> int:
    """429 passes through (Open WebUI shows it as rate limiting); other upstream failures are 502."""
    return 429 if error.status == 429 else 502


def _error_body(error: gemini_chat.LLMError) -> dict[str, Any]:
    message = masking.mask_secrets(f"Gemini: {error}").text  # shown to the user, like the answer
    kind = "rate_limit_error" if error.status == 429 else "upstream_error"
    return {"error": {"message": message, "type": kind, "code": error.status}, "detail": message}


def _chunk(
    completion_id: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> bytes:
    event: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        event["usage"] = usage
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


def _identity(request: Request, payload: Mapping[str, Any]) -> str | None:
    """The call's user (see the module docstring): the user header, else the payload's `user`; a
    header sent twice is a 422. Any other user named (the payload's `user` against the header,
    `echo_ctx.user_id`, a `user_id` in the body) is ignored, logged and counted."""
    from_header = identity.single_header(request.headers, identity.USER_HEADER, route="pipe")
    from_payload = bodies.user_of(payload.get("user"))
    user_id = from_header or from_payload
    claims = list(bodies.foreign_claims(payload, user_id, payload_user=False))
    if from_payload is not None and from_payload != user_id:
        claims.insert(0, bodies.Claim("user.id", from_payload))
    identity.report("pipe", "chat", user_id, claims)
    return user_id


def _stream_tool_calls(calls: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [{"index": i, **call} for i, call in enumerate(calls)]


def build_pipe_router(
    *,
    chat: gemini_chat.GeminiChat,
    pipe_ids: Collection[str],
    max_body_bytes: int,
    on_masked: OnMasked,
    options: pipe_turn.PipeOptions | None = None,
    tools: server_tools.ServerTools | None = None,
) -> APIRouter:
    router = APIRouter()
    options = options or pipe_turn.PipeOptions()
    tools = tools if tools is not None else server_tools.builtin_server_tools()

    def record(model: str, stream: bool, outcome: str) -> None:
        shadow_metrics.PIPE_REQUESTS.labels(model, str(stream).lower(), outcome).inc()

    @router.post(
        "/chat/completions",
        response_model=None,
        responses=openapi_docs.PIPE_RESPONSES,
        openapi_extra=openapi_docs.chat_body(wire.CHAT_REQUEST, [*pipe_ids]),
    )
    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        payload = await wire.read_json(request, max_body_bytes)
        wire.validate(wire.CHAT_REQUEST, payload)
        model: str = payload["model"]
        if model not in pipe_ids:
            raise HTTPException(
                status_code=404, detail=f"unknown model {model!r}; pipe models: {sorted(pipe_ids)}"
            )
        stream = bool(payload.get("stream"))
        user_id = _identity(request, payload)
        ids = bodies.turn_ids(payload)
        chat_id = request.headers.get("x-openwebui-chat-id") or ids.chat_id
        backends: backends_port.Backends = request.app.state.backends
        store = backends.store  # None: the service runs without backends (no shadow, no tool needing them)
        turn = pipe_turn.PipeTurn(
            chat=chat,
            payload=payload,
            store=store.shadow if store is not None else None,
            tools=tools,
            backends=backends if store is not None else None,
            options=options,
            user_id=user_id,
            chat_id=chat_id,
        )
        structlog.contextvars.bind_contextvars(pipe=model, chat_id=turn.chat_id, user_id=turn.user_id)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        try:
            await turn.prepare()
            await turn.open()
        except ValueError as error:
            record(model, stream, "error")
            raise wire.unprocessable([{"loc": ["body"], "msg": str(error), "type": "value_error"}]) from error
        except gemini_chat.LLMError as error:
            record(model, stream, "error")
            log.warning("pipe_llm_error", error=str(error), status=error.status)
            return JSONResponse(_error_body(error), status_code=_llm_status(error))

        if not stream:
            return await _complete(turn, completion_id, created, on_masked, record)

        async def events() -> AsyncIterator[bytes]:
            content_masker, reasoning_masker = masking.StreamMasker(), masking.StreamMasker()
            sent: list[str] = []
            end: pipe_turn.TurnDelta | None = None
            yield _chunk(completion_id, model, created, {"role": "assistant", "content": ""})
            try:
                async for delta in turn.events():
                    if delta.finish_reason is not None:
                        end = delta
                        break
                    reasoning = reasoning_masker.feed(delta.reasoning) if delta.reasoning else ""
                    content = content_masker.feed(delta.content) if delta.content else ""
                    if reasoning:
                        yield _chunk(completion_id, model, created, {"reasoning_content": reasoning})
                    if content:
                        sent.append(content)
                        yield _chunk(completion_id, model, created, {"content": content})
            except Exception as error:  # a broken stream: whatever broke, the client gets an end
                upstream = isinstance(error, gemini_chat.LLMError)
                status = error.status if isinstance(error, gemini_chat.LLMError) else None
                if upstream:
                    log.warning("pipe_stream_error", error=str(error), status=status)
                else:
                    log.exception("pipe_stream_failed")
                for key, masker in (("reasoning_content", reasoning_masker), ("content", content_masker)):
                    rest = masker.flush()
                    if rest:
                        yield _chunk(completion_id, model, created, {key: rest})
                message = (
                    masking.mask_secrets(f"Gemini: {error}").text
                    if upstream
                    else "ECHO: the answer broke off; see the service logs"
                )
                failure = {"error": {"message": message, "type": "upstream_error", "code": status}}
                yield f"data: {json.dumps(failure)}\n\n".encode()
                yield b"data: [DONE]\n\n"
                record(model, True, "error")
                return
            tail_reasoning, tail_content = reasoning_masker.flush(), content_masker.flush()
            if tail_reasoning:
                yield _chunk(completion_id, model, created, {"reasoning_content": tail_reasoning})
            if tail_content:
                sent.append(tail_content)
                yield _chunk(completion_id, model, created, {"content": tail_content})
            for counts in (reasoning_masker.counts, content_masker.counts, turn.masked):
                if counts:
                    on_masked(counts)
            await turn.archive("".join(sent))  # before the end: a tool call's follow-up comes at once
            finish = end.finish_reason if end is not None else "stop"
            usage = end.usage if end is not None else None
            if end is not None and end.tool_calls:
                yield _chunk(
                    completion_id, model, created, {"tool_calls": _stream_tool_calls(end.tool_calls)}
                )
            yield _chunk(completion_id, model, created, {}, finish, usage)
            yield b"data: [DONE]\n\n"
            record(model, True, "ok")
            _count_tokens(model, usage)
            shadow_metrics.PIPE_LATENCY.labels(model, "total").observe(time.perf_counter() - turn.started)

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router


async def _complete(
    turn: pipe_turn.PipeTurn,
    completion_id: str,
    created: int,
    on_masked: OnMasked,
    record: Callable[[str, bool, str], None],
) -> JSONResponse:
    model = turn.pipe_model
    contents: list[str] = []
    reasonings: list[str] = []
    end = pipe_turn.TurnDelta(finish_reason="stop")
    try:
        async for delta in turn.events():
            if delta.finish_reason is not None:
                end = delta
                break
            contents.append(delta.content)
            reasonings.append(delta.reasoning)
    except gemini_chat.LLMError as error:
        record(model, False, "error")
        log.warning("pipe_llm_error", error=str(error), status=error.status)
        return JSONResponse(_error_body(error), status_code=_llm_status(error))
    content = await masking_filter.mask_text("".join(contents))
    reasoning = await masking_filter.mask_text("".join(reasonings))
    for counts in (content.counts, reasoning.counts, turn.masked):
        if counts:
            on_masked(counts)
    await turn.archive(content.text)
    message: dict[str, Any] = {"role": "assistant", "content": content.text}
    if reasoning.text:
        message["reasoning_content"] = reasoning.text
    if end.tool_calls:
        message["tool_calls"] = list(end.tool_calls)
    record(model, False, "ok")
    _count_tokens(model, end.usage)
    shadow_metrics.PIPE_LATENCY.labels(model, "total").observe(time.perf_counter() - turn.started)
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": end.finish_reason or "stop"}],
            "usage": end.usage or {},
        }
    )


def _count_tokens(model: str, usage: Mapping[str, int] | None) -> None:
    if not usage:
        return
    metrics.LLM_TOKENS.labels("gemini", model, "chat", "prompt").inc(usage.get("prompt_tokens", 0))
    metrics.LLM_TOKENS.labels("gemini", model, "chat", "completion").inc(usage.get("completion_tokens", 0))
