"""`POST /chat/completions` for the `echo.<model>` pipe models: Gemini, answers masked as they stream.

Errors before the first byte get a status (422 for a bad request, 502/503/504 for Gemini);
an error mid-stream ends the stream with an OpenAI-style error event Open WebUI shows.
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

from echo import bodies, masking, metrics
from echo.filters import masking as masking_filter
from echo.hooks import wire
from echo.llm import gemini_chat

__all__ = ["build_pipe_router"]

log = structlog.get_logger("echo.pipe")

OnMasked = Callable[[Mapping[str, int]], None]


def _llm_status(error: gemini_chat.LLMError) -> int:
    """429 passes through (Open WebUI shows it as rate limiting); other upstream failures are 502."""
    return 429 if error.status == 429 else 502


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


def build_pipe_router(
    *, chat: gemini_chat.GeminiChat, pipe_ids: Collection[str], max_body_bytes: int, on_masked: OnMasked
) -> APIRouter:
    router = APIRouter()

    def record(model: str, stream: bool, outcome: str) -> None:
        metrics.PIPE_REQUESTS.labels(model, str(stream).lower(), outcome).inc()

    @router.post("/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        payload = await wire.read_json(request, max_body_bytes)
        wire.validate(wire.CHAT_REQUEST, payload)
        model: str = payload["model"]
        if model not in pipe_ids:
            raise HTTPException(
                status_code=404, detail=f"unknown model {model!r}; pipe models: {sorted(pipe_ids)}"
            )
        stream = bool(payload.get("stream"))
        ids = bodies.turn_ids(payload, payload.get("user") if isinstance(payload.get("user"), dict) else None)
        structlog.contextvars.bind_contextvars(
            pipe=model, chat_id=request.headers.get("x-openwebui-chat-id") or ids.chat_id, user_id=ids.user_id
        )
        started = time.perf_counter()
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        try:
            if not stream:
                answer = await chat.complete(payload)
            else:
                deltas = chat.stream(payload)
                first = await anext(deltas)  # surfaces bad requests and Gemini errors as a status
        except ValueError as error:
            record(model, stream, "error")
            raise wire.unprocessable([{"loc": ["body"], "msg": str(error), "type": "value_error"}]) from error
        except gemini_chat.LLMError as error:
            record(model, stream, "error")
            log.warning("pipe_llm_error", error=str(error), status=error.status)
            raise HTTPException(status_code=_llm_status(error), detail=f"Gemini: {error}") from error
        metrics.LLM_LATENCY.labels("gemini", model, "chat").observe(time.perf_counter() - started)

        if not stream:
            content = await masking_filter.mask_text(answer.content)
            reasoning = await masking_filter.mask_text(answer.reasoning)
            for result in (content, reasoning):
                if result.counts:
                    on_masked(result.counts)
            record(model, stream, "ok")
            _count_tokens(model, answer.usage)
            message: dict[str, Any] = {"role": "assistant", "content": content.text}
            if reasoning.text:
                message["reasoning_content"] = reasoning.text
            return JSONResponse(
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": answer.finish_reason or "stop"}
                    ],
                    "usage": answer.usage or {},
                }
            )

        async def events() -> AsyncIterator[bytes]:
            content_masker, reasoning_masker = masking.StreamMasker(), masking.StreamMasker()
            finish: str | None = None
            usage: dict[str, int] | None = None
            outcome = "ok"
            yield _chunk(completion_id, model, created, {"role": "assistant", "content": ""})
            try:
                async for delta in _chain(first, deltas):
                    reasoning = reasoning_masker.feed(delta.reasoning) if delta.reasoning else ""
                    content = content_masker.feed(delta.content) if delta.content else ""
                    if reasoning:
                        yield _chunk(completion_id, model, created, {"reasoning_content": reasoning})
                    if content:
                        yield _chunk(completion_id, model, created, {"content": content})
                    finish = delta.finish_reason or finish
                    usage = delta.usage or usage
            except gemini_chat.LLMError as error:
                outcome = "error"
                log.warning("pipe_stream_error", error=str(error), status=error.status)
                for key, masker in (("reasoning_content", reasoning_masker), ("content", content_masker)):
                    rest = masker.flush()
                    if rest:
                        yield _chunk(completion_id, model, created, {key: rest})
                failure = {
                    "error": {"message": f"Gemini: {error}", "type": "upstream_error", "code": error.status}
                }
                yield f"data: {json.dumps(failure)}\n\n".encode()
                yield b"data: [DONE]\n\n"
                record(model, True, outcome)
                return
            tail_reasoning, tail_content = reasoning_masker.flush(), content_masker.flush()
            if tail_reasoning:
                yield _chunk(completion_id, model, created, {"reasoning_content": tail_reasoning})
            if tail_content:
                yield _chunk(completion_id, model, created, {"content": tail_content})
            for masker in (reasoning_masker, content_masker):
                if masker.counts:
                    on_masked(masker.counts)
            yield _chunk(completion_id, model, created, {}, finish or "stop", usage)
            yield b"data: [DONE]\n\n"
            record(model, True, outcome)
            _count_tokens(model, usage)

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router


async def _chain(
    first: gemini_chat.ChatDelta, rest: AsyncIterator[gemini_chat.ChatDelta]
) -> AsyncIterator[gemini_chat.ChatDelta]:
    yield first
    async for delta in rest:
        yield delta


def _count_tokens(model: str, usage: Mapping[str, int] | None) -> None:
    if not usage:
        return
    metrics.LLM_TOKENS.labels("gemini", model, "chat", "prompt").inc(usage.get("prompt_tokens", 0))
    metrics.LLM_TOKENS.labels("gemini", model, "chat", "completion").inc(usage.get("completion_tokens", 0))
