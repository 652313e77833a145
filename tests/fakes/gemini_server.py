"""A fake Gemini REST server that the real google-genai SDK can talk to over HTTP.

It serves, under any API version segment (``v1``, ``v1beta``), the endpoints the SDK calls::

    POST /{version}/models/{model}:generateContent
    POST /{version}/models/{model}:streamGenerateContent?alt=sse   (``data: {json}\\r\\n\\r\\n`` events)
    POST /{version}/models/{model}:embedContent
    POST /{version}/models/{model}:batchEmbedContents             (what ``embed_content`` uses)

Generation replies are scripted with ``reply_*`` and consumed first in, first out (``delay_s`` makes
one of them slow, ``latency_s`` every call; ``responder`` computes unscripted answers; ``fail_for``
makes every call of a time span fail, as in a provider incident); any reply
answers either a streamed or a plain call (a plain call gets the chunks merged into one response).
With nothing scripted the server answers ``"echo: <last user text>"``.

Thought signatures, as Gemini's thinking models check them (``require_signatures``, on by default):
a request whose current turn (the contents after the last user text) holds a model step with
function calls none of which carries a ``thoughtSignature`` is refused with the real API's 400
"Function call is missing a thought_signature in functionCall parts…"; a signature the fake never
issued (``issued_signatures``: those its scripted replies carried) nor Gemini's documented
placeholders is refused as "Corrupted thought signature.". Embeddings are deterministic
unit vectors derived from a hash of the text (see :func:`fake_embedding`). Every call is recorded in
``requests``; ``RecordedRequest`` reads its ``generationConfig`` (``response_mime_type``,
``response_schema``) for requests that asked for JSON. Point the SDK at it with
``HttpOptions(base_url=fake.base_url)``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["FakeGemini", "RecordedRequest", "fake_embedding", "signature_bytes", "signature_problem"]

JSON = dict[str, Any]
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass(frozen=True)
class RecordedRequest:
    """One call the fake received. ``method`` is e.g. ``generateContent``; headers have lower-case keys."""

    path: str
    model: str
    method: str
    body: JSON
    headers: dict[str, str]

    @property
    def generation_config(self) -> JSON:
        """The request's ``generationConfig`` (camelCase keys as sent), empty when absent."""
        config = self.body.get("generationConfig")
        return config if isinstance(config, dict) else {}

    @property
    def response_mime_type(self) -> str | None:
        return self.generation_config.get("responseMimeType")

    @property
    def response_schema(self) -> JSON | None:
        """The ``responseSchema`` (or ``responseJsonSchema``) the caller asked the answer to follow."""
        config = self.generation_config
        return config.get("responseSchema") or config.get("responseJsonSchema")


@dataclass(frozen=True)
class _Reply:
    chunks: tuple[JSON, ...] = ()
    usage: tuple[int, int] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def fake_embedding(text: str, dim: int) -> list[float]:
    """The unit vector the fake returns for ``text``: a pure function of the text and dimension."""
    raw = b"".join(hashlib.sha256(f"{i}:{text}".encode()).digest() for i in range((dim * 4 + 31) // 32))
    values = [(v / 0xFFFFFFFF) * 2.0 - 1.0 for v in struct.unpack(f"<{dim}I", raw[: dim * 4])]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]


def _b64(signature: bytes | str) -> str:
    return base64.b64encode(signature.encode() if isinstance(signature, str) else signature).decode()


PLACEHOLDER_SIGNATURES = frozenset(
    (b"skip_thought_signature_validator", b"context_engineering_is_the_way_to_go")
)
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work"
    " correctly, and missing thought_signature may lead to degraded model performance. Additional data,"
    " function call `default_api:{name}` , position {position}. Please refer to"
    " https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def signature_bytes(text: str) -> bytes:
    """A signature as sent: base64, standard or URL-safe alphabet (the SDK writes the latter)."""
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_"))


def signature_problem(body: JSON, issued: Iterable[bytes]) -> str | None:
    """Why Gemini would refuse this request's thought signatures, or None (see the module docstring)."""
    contents = [c for c in body.get("contents", []) if isinstance(c, dict)]
    known = set(issued) | PLACEHOLDER_SIGNATURES
    for content in contents:
        for part in content.get("parts", []):
            signature = part.get("thoughtSignature")
            if signature is not None and signature_bytes(signature) not in known:
                return "Corrupted thought signature."
    start = 0
    for i, content in enumerate(contents):
        parts = content.get("parts", [])
        if content.get("role", "user") == "user" and any("functionResponse" not in p for p in parts):
            start = i + 1
    for i in range(start, len(contents)):
        content = contents[i]
        if content.get("role") != "model":
            continue
        calls = [p for p in content.get("parts", []) if "functionCall" in p]
        if calls and not any(p.get("thoughtSignature") for p in calls):
            return MISSING_SIGNATURE.format(name=calls[0]["functionCall"].get("name"), position=i + 1)
    return None


def _text_part(text: str, *, thought: bool = False, signature: bytes | str | None = None) -> JSON:
    part: JSON = {"text": text}
    if thought:
        part["thought"] = True
    if signature is not None:
        part["thoughtSignature"] = _b64(signature)
    return part


def _chunk(parts: list[JSON], finish_reason: str | None = None) -> JSON:
    candidate: JSON = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish_reason:
        candidate["finishReason"] = finish_reason
    return {"candidates": [candidate], "modelVersion": "fake-gemini"}


def _texts(contents: Iterable[JSON]) -> list[str]:
    return [p["text"] for c in contents for p in c.get("parts", []) if isinstance(p.get("text"), str)]


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _answer_texts(chunks: Iterable[JSON]) -> tuple[str, str]:
    """``(answer text, thought text)`` of the first candidate across ``chunks``."""
    texts: dict[bool, list[str]] = {False: [], True: []}
    for chunk in chunks:
        for candidate in chunk.get("candidates", [])[:1]:
            for part in candidate.get("content", {}).get("parts", []):
                texts[bool(part.get("thought"))].append(part.get("text", ""))
    return "".join(texts[False]), "".join(texts[True])


def _merge(chunks: Iterable[JSON]) -> JSON:
    """Folds streamed chunks into the single response a plain ``generateContent`` call would get."""
    parts: list[JSON] = []
    merged: JSON = {}
    for chunk in chunks:
        if chunk.get("candidates") and "candidates" not in merged:
            merged["candidates"] = [{"content": {"role": "model", "parts": parts}, "index": 0}]
        for key, value in chunk.items():
            if key != "candidates":
                merged[key] = value
        for candidate in chunk.get("candidates", [])[:1]:
            for part in candidate.get("content", {}).get("parts", []):
                last = parts[-1] if parts else None
                if (
                    last is not None
                    and "text" in last
                    and "text" in part
                    and last.get("thought") == part.get("thought")
                    and "thoughtSignature" not in last
                ):
                    parts[-1] = {**last, **part, "text": last["text"] + part["text"]}
                else:
                    parts.append(dict(part))
            for key, value in candidate.items():
                if key not in ("content", "index"):
                    merged["candidates"][0][key] = value
    return merged


class FakeGemini:
    """The fake server; use as ``with FakeGemini() as fake: ... fake.base_url``."""

    def __init__(self, *, embed_dim: int = 768, ready_timeout_s: float = 10.0) -> None:
        self.embed_dim = embed_dim
        self.latency_s = 0.0
        """Seconds to wait before answering any call."""
        self.chunk_delay_s = 0.0
        """Seconds to wait between two events of a streamed answer."""
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[JSON], str | list[JSON]] | None = None
        """Computes the answer of a generation from its request body when nothing is scripted: its text,
        or its parts in the API's shapes (``functionCall``, ``thoughtSignature`` in base64…)."""
        self.require_signatures = True
        """Refuse requests whose thought signatures Gemini would refuse (see the module docstring)."""
        self.issued_signatures: set[bytes] = set()
        """Every thought signature (its bytes) a scripted reply carried."""
        self._outage: tuple[float, tuple[int, ...]] | None = None
        self.outage_answers = 0
        """Generation calls answered with an error by :meth:`fail_for`."""
        self._ready_timeout_s = ready_timeout_s
        self._lock = threading.Lock()
        self._replies: dict[str, deque[_Reply]] = {"generate": deque(), "embed": deque()}
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        self._app = Starlette(routes=[Route("/{version}/models/{target}", self._handle, methods=["POST"])])

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeGemini is not running")
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> FakeGemini:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            self._app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="fake-gemini", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + self._ready_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise RuntimeError("FakeGemini did not start")
            time.sleep(0.01)
        self._server, self._thread, self._port = server, thread, sock.getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None
        self._port = None

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forgets scripted replies and recorded requests; zeroes the injected delays."""
        with self._lock:
            for queue in self._replies.values():
                queue.clear()
            self.requests.clear()
            self.issued_signatures.clear()
            self._outage = None
            self.outage_answers = 0
        self.latency_s = self.chunk_delay_s = 0.0
        self.require_signatures = True

    # -- scripting -----------------------------------------------------------------------------------

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent call received; ``AssertionError`` when there was none."""
        with self._lock:
            assert self.requests, "FakeGemini received no request"
            return self.requests[-1]

    @property
    def pending(self) -> int:
        """How many scripted replies are still waiting to be served."""
        with self._lock:
            return sum(len(q) for q in self._replies.values())

    def reply_chunks(
        self, chunks: list[JSON], *, usage: tuple[int, int] | None = None, delay_s: float = 0.0
    ) -> None:
        """Scripts raw ``GenerateContentResponse`` objects (one SSE event each when streamed).

        ``delay_s`` holds this one answer back (s), on top of ``latency_s``: a slow call among fast ones.
        """
        self._push("generate", _Reply(chunks=tuple(chunks), usage=usage, delay_s=delay_s))

    def reply_text(
        self,
        text: str,
        *,
        thought: str | None = None,
        thought_signature: bytes | str | None = None,
        usage: tuple[int, int] | None = None,
        finish_reason: str = "STOP",
        delay_s: float = 0.0,
    ) -> None:
        """Scripts one answer; ``usage=(prompt, completion)``, or estimated from the texts when None."""
        parts = [_text_part(thought, thought=True)] if thought else []
        parts.append(_text_part(text, signature=thought_signature))
        self.reply_chunks([_chunk(parts, finish_reason)], usage=usage, delay_s=delay_s)

    def reply_json(self, obj: Any, *, usage: tuple[int, int] | None = None, delay_s: float = 0.0) -> None:
        """Scripts an answer whose text is ``obj`` serialised, as for a ``response_schema`` request."""
        self.reply_text(json.dumps(obj), usage=usage, delay_s=delay_s)

    def reply_function_call(
        self,
        name: str,
        args: JSON,
        thought_signature: bytes | str | None = None,
        *,
        usage: tuple[int, int] | None = None,
    ) -> None:
        part: JSON = {"functionCall": {"name": name, "args": args}}
        if thought_signature is not None:
            part["thoughtSignature"] = _b64(thought_signature)
        self.reply_chunks([_chunk([part], "STOP")], usage=usage)

    def reply_stream(
        self,
        chunks: list[str],
        thought_chunks: Iterable[str] = (),
        *,
        thought_signature: bytes | str | None = None,
        usage: tuple[int, int] | None = None,
        finish_reason: str = "STOP",
    ) -> None:
        """Scripts a streamed answer: one event per thought chunk, then one per text chunk."""
        events = [[_text_part(t, thought=True)] for t in thought_chunks]
        texts = list(chunks) or [""]
        events += [
            [_text_part(t, signature=thought_signature if i == len(texts) - 1 else None)]
            for i, t in enumerate(texts)
        ]
        self.reply_chunks(
            [_chunk(p, finish_reason if i == len(events) - 1 else None) for i, p in enumerate(events)],
            usage=usage,
        )

    def reply_error(
        self,
        status: int,
        message: str,
        retry_after: float | None = None,
        *,
        on: Literal["generate", "embed"] = "generate",
        delay_s: float = 0.0,
    ) -> None:
        """Scripts a Google-style error answer for the next generation (or embedding) call."""
        error = {
            "error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}
        }
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        self._push(on, _Reply(chunks=(error,), status=status, headers=headers, delay_s=delay_s))

    def fail_for(self, seconds: float, statuses: tuple[int, ...] = (500,)) -> None:
        """A provider incident: every generation call of the next ``seconds`` answers an error, the
        ``statuses`` in turn (429 with ``Retry-After: 1``), whatever is scripted."""
        with self._lock:
            self._outage = (time.monotonic() + seconds, statuses)

    def _outage_reply(self) -> Response | None:
        with self._lock:
            if self._outage is None or time.monotonic() >= self._outage[0]:
                return None
            status = self._outage[1][self.outage_answers % len(self._outage[1])]
            self.outage_answers += 1
        name = _STATUS_NAMES.get(status, "UNKNOWN")
        error = {"error": {"code": status, "message": "injected outage", "status": name}}
        headers = {"Retry-After": "1"} if status == 429 else None
        return JSONResponse(error, status_code=status, headers=headers)

    def reply_function_calls(
        self,
        calls: list[tuple[str, JSON]],
        thought_signature: bytes | str | None = None,
        *,
        text: str | None = None,
        thought: str | None = None,
        usage: tuple[int, int] | None = None,
    ) -> None:
        """Scripts one step with parallel calls (the signature on the first call, as Gemini puts it),
        after an optional thought and answer text."""
        parts: list[JSON] = [_text_part(thought, thought=True)] if thought else []
        if text:
            parts.append(_text_part(text))
        for i, (name, args) in enumerate(calls):
            part: JSON = {"functionCall": {"name": name, "args": args}}
            if i == 0 and thought_signature is not None:
                part["thoughtSignature"] = _b64(thought_signature)
            parts.append(part)
        self.reply_chunks([_chunk(parts, "STOP")], usage=usage)

    def _note_signatures(self, chunks: Iterable[JSON]) -> None:
        for chunk in chunks:
            for candidate in chunk.get("candidates", []):
                for part in candidate.get("content", {}).get("parts", []):
                    if "thoughtSignature" in part:
                        self.issued_signatures.add(signature_bytes(part["thoughtSignature"]))

    def _push(self, queue: str, reply: _Reply) -> None:
        with self._lock:
            self._note_signatures(reply.chunks)
            self._replies[queue].append(reply)

    def _pop(self, queue: str) -> _Reply | None:
        with self._lock:
            return self._replies[queue].popleft() if self._replies[queue] else None

    # -- serving -------------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        model, _, method = request.path_params["target"].rpartition(":")
        raw = await request.body()
        body: JSON = json.loads(raw) if raw else {}
        with self._lock:
            self.requests.append(
                RecordedRequest(request.url.path, model, method, body, dict(request.headers))
            )
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if method in ("embedContent", "batchEmbedContents"):
            return await self._embed(method, body)
        if method not in ("generateContent", "streamGenerateContent"):
            return JSONResponse(
                {"error": {"code": 404, "message": f"unknown method {method!r}", "status": "NOT_FOUND"}},
                status_code=404,
            )
        outage = self._outage_reply()
        if outage is not None:
            return outage
        problem = signature_problem(body, self.issued_signatures) if self.require_signatures else None
        if problem is not None:
            error = {"error": {"code": 400, "message": problem, "status": "INVALID_ARGUMENT"}}
            return JSONResponse(error, status_code=400)
        reply = self._pop("generate") or self._computed_reply(body)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            return JSONResponse(reply.chunks[0], status_code=reply.status, headers=reply.headers)
        chunks = self._with_usage(reply, body)
        if method == "generateContent":
            errors = [c for c in chunks if "error" in c]
            if errors:  # an error scripted mid-stream fails a plain call as a whole
                return JSONResponse(errors[0], status_code=int(errors[0]["error"].get("code", 500)))
            # ASCII with escapes, as Google sends it: a lone surrogate (\ud800) is valid JSON there.
            return Response(json.dumps(_merge(chunks)), media_type="application/json")
        return StreamingResponse(self._sse(chunks), media_type="text/event-stream")

    async def _sse(self, chunks: list[JSON]) -> AsyncIterator[bytes]:
        for i, chunk in enumerate(chunks):
            if i and self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s)
            yield f"data: {json.dumps(chunk)}\r\n\r\n".encode()

    async def _embed(self, method: str, body: JSON) -> Response:
        error = self._pop("embed")
        if error is not None and error.delay_s:
            await asyncio.sleep(error.delay_s)
        if error is not None:
            return JSONResponse(error.chunks[0], status_code=error.status, headers=error.headers)
        requests = body.get("requests", []) if method == "batchEmbedContents" else [body]
        embeddings = [
            {
                "values": fake_embedding(
                    "".join(_texts([r.get("content", {})])),
                    int(r.get("outputDimensionality") or self.embed_dim),
                )
            }
            for r in requests
        ]
        return JSONResponse(
            {"embeddings": embeddings} if method == "batchEmbedContents" else {"embedding": embeddings[0]}
        )

    def _computed_reply(self, body: JSON) -> _Reply:
        if self.responder is not None:
            answer = self.responder(body)
            parts = [_text_part(answer)] if isinstance(answer, str) else answer
            with self._lock:
                self._note_signatures([_chunk(parts)])
            return _Reply(chunks=(_chunk(parts, "STOP"),))
        return self._default_reply(body)

    @staticmethod
    def _default_reply(body: JSON) -> _Reply:
        users = [c for c in body.get("contents", []) if c.get("role", "user") == "user" and _texts([c])]
        last = "".join(_texts(users[-1:]))
        return _Reply(chunks=(_chunk([_text_part(f"echo: {last}")], "STOP"),))

    @staticmethod
    def _with_usage(reply: _Reply, body: JSON) -> list[JSON]:
        chunks = [dict(c) for c in reply.chunks]
        if not chunks or any("usageMetadata" in c for c in chunks):
            return chunks
        if reply.usage is not None:
            prompt, completion = reply.usage
            usage = {"promptTokenCount": prompt, "candidatesTokenCount": completion}
        else:
            system = body.get("systemInstruction")
            prompt_text = "".join(_texts([*body.get("contents", []), *([system] if system else [])]))
            answer, thoughts = _answer_texts(chunks)
            usage = {"promptTokenCount": _tokens(prompt_text), "candidatesTokenCount": _tokens(answer)}
            if thoughts:
                usage["thoughtsTokenCount"] = _tokens(thoughts)
        usage["totalTokenCount"] = sum(usage.values())
        chunks[-1]["usageMetadata"] = usage
        return chunks
