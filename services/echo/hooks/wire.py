"""JSON on the wire: bounded reading, strict parsing, shape checks that name the field, safe rendering.

Python's parser accepts what JSON has no room for (NaN, Infinity, integers longer than Python converts):
such a value is refused with a 422 naming where it is, since no answer could carry it back. Shapes are
TypedDicts, checked without building objects (a pydantic model per message cost 10 µs each, 30 s for a
32 MiB body of empty messages); the raw data is kept as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any, NotRequired

from fastapi import HTTPException, Request
from pydantic import Field, StrictBool, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this TypedDict before Python 3.12

from echo.filters import events as events_module

__all__ = [
    "CHAT_REQUEST",
    "EVENTS_HEADER",
    "EVENTS_VERSION",
    "FILTER_REQUEST",
    "HOOK_ANSWER_MEDIA_TYPE",
    "TEXT_WITHOUT_NUL",
    "ChatRequest",
    "FilterRequest",
    "WireMessage",
    "plainly_a_filter_request",
    "read_json",
    "render_hook_answer",
    "render_json",
    "too_deep",
    "unprocessable",
    "validate",
    "wants_events",
]


class WireMessage(TypedDict):
    role: str
    content: NotRequired[str | list[Any] | None]


class WireBody(TypedDict):
    messages: NotRequired[list[WireMessage]]
    metadata: NotRequired[dict[str, Any] | None]
    model: NotRequired[str | None]
    chat_id: NotRequired[str | None]


class FilterRequest(TypedDict):
    """`{"body": {...}, "user": {...}}` as Open WebUI posts it to a filter hook."""

    body: WireBody
    user: NotRequired[dict[str, Any] | None]


class ChatRequest(TypedDict):
    """An OpenAI chat-completions request as Open WebUI sends it to a pipe."""

    model: Annotated[str, Field(min_length=1)]
    messages: Annotated[list[WireMessage], Field(min_length=1)]
    stream: NotRequired[StrictBool]  # `1` or `0.0` is refused, as the schema says, not taken as a flag


FILTER_REQUEST: TypeAdapter[FilterRequest] = TypeAdapter(FilterRequest)
CHAT_REQUEST: TypeAdapter[ChatRequest] = TypeAdapter(ChatRequest)

_MAX_ERRORS = 10

# A text the store keeps (an id, a user): PostgreSQL's text and JSONB hold no NUL, so one is refused
# up front with a 422 naming the field, not left to fail in the store as a 503.
TEXT_WITHOUT_NUL = r"^[^\x00]*$"


def unprocessable(errors: list[dict[str, Any]]) -> HTTPException:
    """A 422 whose message names every bad field (`body.messages.3.role: Field required`)."""
    described = [
        {
            "loc": list(error.get("loc", ())),
            "msg": str(error.get("msg", "")),
            "type": str(error.get("type", "")),
        }
        for error in errors
    ]
    summary = "; ".join(
        f"{'.'.join(str(p) for p in item['loc']) or 'body'}: {item['msg']}" for item in described
    )
    return HTTPException(status_code=422, detail={"message": summary, "errors": described})


def too_deep() -> HTTPException:
    """A 422 for JSON nested deeper than the parser or the renderer can follow."""
    return unprocessable(
        [{"loc": ["body"], "msg": "JSON nested too deeply to be read or answered", "type": "too_deep"}]
    )


class _Unreadable:
    """Stands, in parsed data, for a number that Python reads but JSON cannot carry back."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _unreadable_at(data: Any) -> Iterator[tuple[list[str | int], str]]:
    """Where `_Unreadable` values are in `data`, depth first, without recursion."""
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Unreadable):
            yield path, value.reason
        elif isinstance(value, dict):
            stack.extend((child, [*path, key]) for key, child in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((child, [*path, index]) for index, child in reversed(list(enumerate(value))))


def _parse(raw: bytes) -> Any:
    found = False

    def unreadable(reason: str) -> _Unreadable:
        nonlocal found
        found = True
        return _Unreadable(reason)

    def parse_constant(literal: str) -> _Unreadable:  # NaN, Infinity, -Infinity
        return unreadable(f"{literal} is not a finite number; JSON has no NaN or Infinity")

    def parse_float(literal: str) -> float | _Unreadable:  # called for each float: kept lean
        value = float(literal)
        if value - value == 0.0:  # finite
            return value
        return unreadable(f"{literal} is not a finite number (too large for a float)")

    def parse_int(literal: str) -> int | _Unreadable:
        try:
            return int(literal)
        except ValueError:  # longer than sys.get_int_max_str_digits()
            return unreadable(f"an integer of {len(literal.lstrip('-'))} digits is too long to read")

    try:
        data = json.loads(raw, parse_constant=parse_constant, parse_float=parse_float)
    except ValueError as error:
        if isinstance(error, json.JSONDecodeError | UnicodeDecodeError):
            raise
        # An integer too long to convert: parse again, only now paying a call per integer, to say where.
        data = json.loads(raw, parse_constant=parse_constant, parse_float=parse_float, parse_int=parse_int)
    if found:
        errors = [
            {"loc": ["body", *path], "msg": reason, "type": "finite_number"}
            for path, reason in _unreadable_at(data)
        ]
        raise unprocessable(errors[:_MAX_ERRORS])
    return data


async def read_json(request: Request, limit: int) -> Any:
    """Read at most `limit` bytes (413 past it) and parse JSON (422 naming the position or the field)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(status_code=413, detail=f"request body of {declared} bytes exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(status_code=413, detail=f"request body exceeds {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise unprocessable(
            [{"loc": ["body"], "msg": "request body is empty; a JSON object is required", "type": "missing"}]
        )
    try:
        return _parse(raw)
    except RecursionError as error:
        raise too_deep() from error
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise unprocessable(
            [{"loc": ["body"], "msg": f"malformed JSON: {error}", "type": "json_invalid"}]
        ) from error


def plainly_a_filter_request(data: Any) -> bool:
    """Whether JSON-decoded `data` is a `FilterRequest`, checked by type alone: what pydantic would
    accept, seen without it (0.2 to 1 ms for a 500-message body). False when in doubt; pydantic then
    decides, and names what is wrong."""
    if type(data) is not dict:
        return False
    body, user = data.get("body"), data.get("user")
    if type(body) is not dict or (user is not None and type(user) is not dict):
        return False
    for key, kind in (("metadata", dict), ("model", str), ("chat_id", str)):
        value = body.get(key)
        if value is not None and type(value) is not kind:
            return False
    messages = body.get("messages", [])
    if type(messages) is not list:
        return False
    for message in messages:
        if type(message) is not dict or type(message.get("role")) is not str:
            return False
        content = message.get("content")
        if content is not None and type(content) is not str and type(content) is not list:
            return False
    return True


def validate(shape: TypeAdapter[Any], data: Any) -> None:
    """Check `data` against `shape`; a 422 names each bad field. The raw data is kept as it is."""
    if shape is FILTER_REQUEST and plainly_a_filter_request(data):
        return
    try:
        shape.validate_python(data)
    except ValidationError as error:
        raise unprocessable(
            [{"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        ) from error


def render_json(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON; a lone surrogate (a valid `\\ud83d` escape, which UTF-8 cannot
    encode) makes the whole answer ASCII with escapes. Raises ValueError, TypeError or RecursionError
    for what JSON cannot carry (NaN, sets, nesting deeper than the encoder follows)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


# Status events beside the body (DESIGN §9). A caller that can show them (the Open WebUI Function)
# sends `X-Echo-Events: 1`; the answer is then `{"body": <new body>, "events": [...]}` with its own
# media type, so the caller tells it from a bare body by the Content-Type alone (an older service,
# which ignores the header, answers `application/json`). Open WebUI's Pipelines calls never send the
# header: their answer stays the bare body, since any other top-level key would reach the model.
EVENTS_HEADER = "X-Echo-Events"
EVENTS_VERSION = "1"
HOOK_ANSWER_MEDIA_TYPE = "application/vnd.echo.hook-answer+json"


def wants_events(headers: Mapping[str, str]) -> bool:
    """Whether the request asked for the body-and-events answer (a version this service speaks)."""
    return headers.get(EVENTS_HEADER, "").strip() == EVENTS_VERSION


def render_hook_answer(body: bytes, events: Iterable[events_module.StatusEvent]) -> bytes:
    """`{"body": <body>, "events": [...]}` around a body already rendered by `render_json`."""
    return b'{"body":' + body + b',"events":' + render_json([event.to_wire() for event in events]) + b"}"
