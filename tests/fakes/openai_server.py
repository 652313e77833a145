"""A fake OpenAI-compatible chat-completions server (DeepSeek, vLLM, gateways) for real HTTP tests.

It serves ``POST /chat/completions`` and ``POST /v1/chat/completions``; serve ``fake.app`` with
``LiveServer``. Replies are scripted with ``reply_*`` and consumed first in, first out; with nothing
scripted the server answers ``"echo: <last user text>"``. ``reply_text`` picks the response shape
providers really use (seed 002): a ``message`` string, a ``parts`` list of ``output_text`` parts, or a
Responses-style ``output`` list; ``reasoning`` adds reasoning the client must ignore. ``refused``
names the forms of ``response_format`` the server refuses, before any scripted reply, with
``refused_status`` (llama-cpp-python's server answers ``json_schema`` with a 500 naming the field;
DeepSeek takes only ``json_object``). Errors carry
``Retry-After`` when asked; ``delay_s`` holds one reply back and ``latency_s`` every call. Every call
is recorded in ``requests``. With ``api_key`` set, calls without that bearer key get a 401.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["FakeOpenAI", "RecordedCall", "Shape", "response_form"]

JSON = dict[str, Any]
Shape = Literal["message", "parts", "responses"]


@dataclass(frozen=True)
class RecordedCall:
    """One call received; headers have lower-case keys."""

    path: str
    body: JSON
    headers: dict[str, str]


@dataclass(frozen=True)
class _Reply:
    status: int = 200
    payload: JSON | None = None
    text: str | None = None  # a raw body instead of JSON
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def response_form(body: JSON) -> str | None:
    """The form of ``response_format`` a request body asks for, as ``JSON_MODES`` names it."""
    asked = body.get("response_format")
    if not isinstance(asked, dict):
        return None
    if asked.get("type") == "json_object" and "schema" in asked:
        return "json_object_schema"
    return str(asked.get("type"))


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def completion(
    text: str,
    *,
    shape: Shape = "message",
    reasoning: str | None = None,
    usage: tuple[int, int] = (0, 0),
    finish_reason: str = "stop",
    model: str = "fake-model",
) -> JSON:
    """A response body of ``shape`` answering ``text`` (reasoning, if any, where that shape puts it)."""
    prompt, answer = usage
    if shape == "responses":
        output: list[JSON] = []
        if reasoning is not None:
            output.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}]})
        output.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
        status = "incomplete" if finish_reason == "length" else "completed"
        return {
            "object": "response",
            "model": model,
            "status": status,
            "output": output,
            "usage": {"input_tokens": prompt, "output_tokens": answer, "total_tokens": prompt + answer},
        }
    message: JSON = {"role": "assistant"}
    if shape == "parts":
        parts: list[JSON] = [{"type": "thinking", "text": reasoning}] if reasoning is not None else []
        message["content"] = [*parts, {"type": "output_text", "text": text}]
    else:
        message["content"] = text
        if reasoning is not None:
            message["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer},
    }


class FakeOpenAI:
    """``with LiveServer(fake.app) as server: OpenAICompatibleLLM(server.url + "/v1")``."""

    def __init__(self, *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.latency_s = 0.0
        """Seconds to wait before answering any call."""
        self.refused: frozenset[str] = frozenset()
        """Forms of ``response_format`` refused: ``json_schema``, ``json_object_schema``."""
        self.refused_status = 422
        self.requests: list[RecordedCall] = []
        self._lock = threading.Lock()
        self._replies: deque[_Reply] = deque()
        routes = [
            Route(path, self._handle, methods=["POST"])
            for path in ("/chat/completions", "/v1/chat/completions")
        ]
        self.app = Starlette(routes=routes)

    # -- scripting -----------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    @property
    def last_request(self) -> RecordedCall:
        with self._lock:
            assert self.requests, "FakeOpenAI received no request"
            return self.requests[-1]

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests.clear()
        self.latency_s = 0.0
        self.refused = frozenset()
        self.refused_status = 422

    def reply_text(
        self,
        text: str,
        *,
        shape: Shape = "message",
        reasoning: str | None = None,
        usage: tuple[int, int] | None = None,
        finish_reason: str = "stop",
        delay_s: float = 0.0,
    ) -> None:
        """Scripts one answer; ``usage=(prompt, completion)``, estimated from the answer when None."""
        tokens = usage if usage is not None else (7, _tokens(text))
        payload = completion(
            text, shape=shape, reasoning=reasoning, usage=tokens, finish_reason=finish_reason
        )
        self._push(_Reply(payload=payload, delay_s=delay_s))

    def reply_json(self, obj: Any, **options: Any) -> None:
        """Scripts an answer whose text is ``obj`` serialised."""
        self.reply_text(json.dumps(obj), **options)

    def reply_body(self, payload: JSON, *, status: int = 200, delay_s: float = 0.0) -> None:
        """Scripts a raw JSON body, for shapes ``reply_text`` does not make."""
        self._push(_Reply(status=status, payload=payload, delay_s=delay_s))

    def reply_error(
        self, status: int, message: str, retry_after: float | str | None = None, *, delay_s: float = 0.0
    ) -> None:
        """Scripts an OpenAI-style error; ``retry_after`` becomes the ``Retry-After`` header as given."""
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
        payload = {"error": {"message": message, "type": "fake_error", "code": status}}
        self._push(_Reply(status=status, payload=payload, headers=headers, delay_s=delay_s))

    def reply_raw(self, status: int, text: str) -> None:
        """Scripts a non-JSON body (a proxy's HTML page)."""
        self._push(_Reply(status=status, text=text))

    def _push(self, reply: _Reply) -> None:
        with self._lock:
            self._replies.append(reply)

    # -- serving -------------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        body: JSON = json.loads(raw) if raw else {}
        with self._lock:
            self.requests.append(RecordedCall(request.url.path, body, dict(request.headers)))
            form = response_form(body)
            if form in self.refused:
                detail = f"('body', 'response_format', 'type'): {form} is not supported"
                status = self.refused_status
                return JSONResponse({"error": {"message": detail, "code": status}}, status_code=status)
            reply = self._replies.popleft() if self._replies else None
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": {"message": "invalid api key", "code": 401}}, status_code=401)
        if reply is None:
            users = [m for m in body.get("messages", []) if m.get("role") == "user"]
            last = users[-1].get("content", "") if users else ""
            reply = _Reply(payload=completion(f"echo: {last}", usage=(_tokens(str(body)), _tokens(last) + 2)))
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.text is not None:
            return Response(reply.text, status_code=reply.status, media_type="text/html")
        return JSONResponse(reply.payload, status_code=reply.status, headers=reply.headers)
