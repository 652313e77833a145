"""JSON on the wire: bounded reading, strict parsing, shape checks that name the field, safe rendering.

A body below `THREAD_BYTES` is decoded by msgspec in one C pass, which gives what `json.loads` gives
(exact integers, the same digit and recursion limits) and refuses the rest; what it refuses is read
again by Python's parser, so every refusal keeps its message and position. An answer whose values are
known to be plain JSON (`render_plain`) is encoded by msgspec too, ten times faster than `json.dumps`.

Python's parser accepts what JSON has no room for (NaN, Infinity, integers longer than Python converts):
such a value is refused with a 422 naming where it is, since no answer could carry it back. Shapes are
TypedDicts, checked without building objects (a pydantic model per message cost 10 µs each, 30 s for a
32 MiB body of empty messages); the raw data is kept as it is.
"""

from __future__ import annotations

import codecs
import contextvars
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, NotRequired

import msgspec
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import Field, StrictBool, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this TypedDict before Python 3.12

from echo.capabilities import events as events_module
from echo.entrypoints.http import release, stepwise_json
from echo.support import offload

__all__ = [
    "CHAT_REQUEST",
    "EVENTS_HEADER",
    "EVENTS_VERSION",
    "FILTER_REQUEST",
    "HOOK_ANSWER_MEDIA_TYPE",
    "SHOWN_CHARACTERS",
    "TEXT_WITHOUT_NUL",
    "ChatRequest",
    "FilterRequest",
    "JSONAnswer",
    "WireMessage",
    "bounded_detail",
    "carried_beside",
    "clip",
    "field_errors",
    "plainly_a_filter_request",
    "read_json",
    "render_body",
    "render_hook_answer",
    "render_json",
    "render_plain",
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


# What a refusal shows of a value it refuses: a short prefix (a 40 MB query must not come back whole).
SHOWN_CHARACTERS = 100
_SHOWN_MESSAGE = 500  # a message may quote what it refuses (a validator's own words)
_SHOWN_DETAIL = 2000


def clip(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """`text`, or its first `limit` characters saying that it is truncated and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (truncated: {len(text)} characters)"


def _location(loc: Iterable[Any]) -> list[str | int]:
    return [part if isinstance(part, int) and not isinstance(part, bool) else clip(str(part)) for part in loc]


def _more(count: int) -> dict[str, Any]:
    return {"loc": ["body"], "msg": f"{count} more errors not shown", "type": "too_many_errors"}


def unprocessable(errors: list[dict[str, Any]]) -> HTTPException:
    """A 422 whose message names every bad field (`body.messages.3.role: Field required`); past
    `_MAX_ERRORS`, the rest are counted, and every name or message is shown as a short prefix."""
    described = [
        {
            "loc": _location(error.get("loc", ())),
            "msg": clip(str(error.get("msg", "")), _SHOWN_MESSAGE),
            "type": clip(str(error.get("type", ""))),
        }
        for error in errors[:_MAX_ERRORS]
    ]
    if len(errors) > _MAX_ERRORS:
        described.append(_more(len(errors) - _MAX_ERRORS))
    summary = "; ".join(
        f"{'.'.join(str(p) for p in item['loc']) or 'body'}: {item['msg']}" for item in described
    )
    return HTTPException(status_code=422, detail={"message": summary, "errors": described})


def _preview(value: Any) -> Any:
    """What a 422 shows of a refused input: a scalar as it is, a text or a structure (as JSON text)
    as a short prefix. Never fails, never costs more than reading the value once."""
    if isinstance(value, str):
        return clip(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 256 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return value if value - value == 0.0 else str(value)  # JSON has no NaN nor Infinity
    encoder = json.JSONEncoder(default=lambda other: repr(other)[: SHOWN_CHARACTERS + 1], check_circular=True)
    pieces: list[str] = []
    size = 0
    try:
        for piece in encoder.iterencode(value):  # lazily: a long list is not rendered past the prefix
            pieces.append(piece)
            size += len(piece)
            if size > SHOWN_CHARACTERS:
                break
    except (ValueError, TypeError, RecursionError):
        return f"a {type(value).__name__} that cannot be shown"
    text = "".join(pieces)
    return text if size <= SHOWN_CHARACTERS else f"{text[:SHOWN_CHARACTERS]}… (truncated)"


def field_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """pydantic's (FastAPI's) errors as a 422 shows them: `loc`, `msg`, `type`, the refused `input`
    and the rule's `ctx`, every value a short prefix; past `_MAX_ERRORS`, the rest are counted."""
    shown: list[dict[str, Any]] = []
    for error in errors[:_MAX_ERRORS]:
        item: dict[str, Any] = {
            "loc": _location(error.get("loc", ())),
            "msg": clip(str(error.get("msg", "")), _SHOWN_MESSAGE),
            "type": clip(str(error.get("type", ""))),
        }
        if "input" in error:
            item["input"] = _preview(error["input"])
        context = error.get("ctx")
        if isinstance(context, Mapping):
            item["ctx"] = {
                clip(str(key)): _preview(value)
                if isinstance(value, str | int | float | bool)
                else clip(str(value))
                for key, value in list(context.items())[:_MAX_ERRORS]
            }
        shown.append(item)
    if len(errors) > _MAX_ERRORS:
        shown.append(_more(len(errors) - _MAX_ERRORS))
    return shown


def bounded_detail(detail: Any) -> Any:
    """An HTTPException's detail as it is answered: a text past 2,000 characters truncated (a
    message that lists or quotes what it refuses), so are the texts of a `{"message": …}` detail;
    anything else as it is (`unprocessable` bounds its own)."""
    if isinstance(detail, str):
        return clip(detail, _SHOWN_DETAIL)
    if isinstance(detail, Mapping):
        return {
            key: clip(value, _SHOWN_DETAIL) if isinstance(value, str) else value
            for key, value in detail.items()
        }
    return detail


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


# From this size on, a body is decoded, parsed and checked on a worker thread, in bounded steps
# (`echo.entrypoints.http.stepwise_json`: the C parser holds the GIL, 1 to 3 s for 32 MB of tiny messages), so
# the event loop never waits on it; below, the C parser on the loop (at most a few ms) costs less.
THREAD_BYTES = 128 * 1024
_DECODE_STEP = 1024 * 1024
_BODY_SIZE: contextvars.ContextVar[int] = contextvars.ContextVar("echo_body_size", default=0)
# The shapes a large body was checked against on the thread, with their errors (None: it conforms).
_CHECKED: contextvars.ContextVar[tuple[Any, tuple[tuple[Any, list[dict[str, Any]] | None], ...]] | None] = (
    contextvars.ContextVar("echo_checked_body", default=None)
)


def body_size() -> int:
    """Bytes of the body `read_json` read for the current request (0 when none was read)."""
    return _BODY_SIZE.get()


def _decoded(raw: bytes) -> str:
    """`raw` as `json.loads` decodes it (its detected encoding, surrogates passed), a step at a time."""
    decoder = codecs.getincrementaldecoder(json.detect_encoding(raw))("surrogatepass")
    view = memoryview(raw)
    pieces: list[str] = []
    for at in range(0, len(raw), _DECODE_STEP):
        pending = len(decoder.getstate()[0])
        try:
            pieces.append(decoder.decode(view[at : at + _DECODE_STEP], at + _DECODE_STEP >= len(raw)))
        except UnicodeDecodeError as error:  # where it is in the whole body
            start = at - pending + error.start
            raise UnicodeDecodeError(
                error.encoding, raw, start, start + error.end - error.start, error.reason
            ) from None
    return "".join(pieces)


def _loads(raw: bytes, **hooks: Any) -> Any:
    if len(raw) < THREAD_BYTES:
        return json.loads(raw, **hooks)
    return stepwise_json.loads(_decoded(raw), json.JSONDecoder(**hooks))


def _parsed_and_checked(raw: bytes) -> tuple[Any, tuple[tuple[Any, list[dict[str, Any]] | None], ...]]:
    """On a worker thread: the body, and its errors against the shapes it looks like it is meant to
    have (`validate` then answers from them instead of walking a large body on the loop)."""
    data = _parse(raw)
    checked: list[tuple[Any, list[dict[str, Any]] | None]] = []
    if type(data) is dict:
        if "body" in data:
            checked.append((FILTER_REQUEST, _shape_errors(FILTER_REQUEST, data)))
        if "messages" in data:
            checked.append((CHAT_REQUEST, _shape_errors(CHAT_REQUEST, data)))
    return data, tuple(checked)


_DECODER = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()


def _parse(raw: bytes) -> Any:
    if len(raw) < THREAD_BYTES:
        try:
            return _DECODER.decode(raw)
        except (msgspec.MsgspecError, RecursionError):
            pass  # not plain JSON (or not UTF-8): Python's parser reads it and says what is wrong
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
        data = _loads(raw, parse_constant=parse_constant, parse_float=parse_float)
    except ValueError as error:
        if isinstance(error, json.JSONDecodeError | UnicodeDecodeError):
            raise
        # An integer too long to convert: parse again, only now paying a call per integer, to say where.
        data = _loads(raw, parse_constant=parse_constant, parse_float=parse_float, parse_int=parse_int)
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
    _BODY_SIZE.set(len(raw))
    try:
        if len(raw) < THREAD_BYTES:
            return _parse(raw)
        data, checked = await offload.to_thread(_parsed_and_checked, raw)
        _CHECKED.set((data, checked))
        release.when_unused(data)  # freed in steps off the loop once the request is done with it
        return data
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
    """Check `data` against `shape`; a 422 names each bad field. The raw data is kept as it is.

    A large body `read_json` checked on its worker thread is answered from that check."""
    checked = _CHECKED.get()
    if checked is not None and checked[0] is data:
        for known, errors in checked[1]:
            if known is shape:
                if errors:
                    raise unprocessable(errors)
                return
    errors = _shape_errors(shape, data)
    if errors:
        raise unprocessable(errors)


def _shape_errors(shape: TypeAdapter[Any], data: Any) -> list[dict[str, Any]] | None:
    """What is wrong with `data` as a `shape`, as `unprocessable` names it; None when nothing is."""
    if shape is FILTER_REQUEST and plainly_a_filter_request(data):
        return None
    try:
        shape.validate_python(data)
    except ValidationError as error:
        return [{"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in error.errors()]
    return None


class JSONAnswer(JSONResponse):
    """A JSON answer rendered by `render_json`: a lone surrogate in it is escaped, never a 500."""

    def render(self, content: Any) -> bytes:
        return render_json(content)


_MAX_INT_BITS = 14_000  # below the 4,300 digits Python writes an int with by default


def carried_beside(new: Any, old: Any) -> bool:
    """True when `render_json` surely carries `new`, given that it carries `old`: what `new` shares
    with `old` (the same object, or in a list an item of the old list) is not walked again. False
    means "not sure" (a type JSON may not carry, a non-text key), never "surely not"."""
    if new is old:
        return True
    kind = type(new)
    if kind is str or kind is bool or new is None:
        return True
    if kind is int:
        return bool(new.bit_length() < _MAX_INT_BITS)
    if kind is float:
        return math.isfinite(new)
    if kind is dict:
        before = old if type(old) is dict else {}
        for key, value in new.items():
            if type(key) is not str or not carried_beside(value, before.get(key)):
                return False
        return True
    if kind is list:
        # Every item of the old list by identity (a text or number among them is carried as well):
        # a filter that rebuilt the list around its messages walks only the ones it made.
        shared = set(map(id, old)) if type(old) is list else set()
        unknown = [item for item in new if id(item) not in shared]
        return all(carried_beside(item, None) for item in unknown)
    return False


def render_body(value: Any, known: Any = None) -> bytes:
    """`render_json(value)`, in one C pass (`render_plain`) when `value` differs from `known`, a value
    JSON surely carries (the parsed request body), only by what `carried_beside` finds plain: a body
    a filter changed is checked here again, whatever checks ran before."""
    try:
        plain = known is not None and carried_beside(value, known)
    except RecursionError:
        plain = False
    return render_plain(value) if plain else render_json(value)


def render_plain(value: Any) -> bytes:
    """`render_json(value)` for a value known to hold only what JSON carries (texts with str keys,
    finite floats, ints JSON can write: what `read_json` parsed and `runner._carriable` checks), in
    one C pass; a lone surrogate, or anything msgspec doubts, goes to `render_json`, which decides."""
    try:
        return _ENCODER.encode(value)
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError, RecursionError):
        return render_json(value)


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
