"""What echo-hooks' `/openapi.json` says each route answers: error bodies, request bodies read by hand.

Most routes read and check their JSON body themselves (`wire.read_json`, bounded, 413 past the limit,
422 naming the field) rather than through FastAPI, so FastAPI cannot see the body's shape: `json_body`
puts it in the document. `errors` declares the error statuses a route answers, each with its body:
`Problem` (`{"detail": "why"}`), or `FieldProblem` for a 422 (FastAPI's list of field errors, or
`wire.unprocessable`'s `{"message", "errors"}`; a configuration refused as a whole has a message
and no errors), `FieldsProblem` for a route whose every 422 is the latter. A route documents every
status it answers; a 500 is never documented (it is a bug).

`valves_body` documents a filter's valves exactly as they are taken (each number also as its decimal
text, its bounds in the text's pattern: `decimal_text_pattern`), and lists the rules across valves
that JSON Schema cannot say (`x-echo-rules`). `allow_documented_methods` and `add_refusing_route` keep
every 405 honest: its `Allow` lists exactly the methods the path documents (empty for a path that has
none), whichever method was sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi import HTTPException
from fastapi.routing import APIRoute, APIRouter
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from echo.config import valves as valves_module
from echo.config.valves import Valves

__all__ = [
    "AUTH_ERRORS",
    "PIPE_RESPONSES",
    "FieldError",
    "FieldErrors",
    "FieldProblem",
    "FieldsProblem",
    "Problem",
    "add_refusing_route",
    "allow_documented_methods",
    "chat_body",
    "decimal_text_pattern",
    "errors",
    "json_body",
    "valves_body",
]


class Problem(BaseModel):
    """Why the request was refused or could not be served."""

    model_config = ConfigDict(extra="allow")

    detail: str = Field(description="What was wrong, in words (the field, the id or the backend).")


class FieldError(BaseModel):
    model_config = ConfigDict(extra="allow")

    loc: list[str | int] = Field(description="Where: `body`, `query` or `header`, then the field's path.")
    msg: str
    type: str


class FieldErrors(BaseModel):
    model_config = ConfigDict(extra="allow")

    message: str = Field(description="Every bad field, `body.messages.3.role: Field required; …`.")
    errors: list[FieldError] = []


class FieldProblem(BaseModel):
    """A 422: the fields refused, each with its location (nothing else is wrong with the request)."""

    detail: list[FieldError] | FieldErrors


class FieldsProblem(BaseModel):
    """A 422: `message` names every field refused, `errors` gives each with its location (a
    configuration refused as a whole, such as a rule across valves, has a message and no errors)."""

    detail: FieldErrors


_DESCRIPTIONS: Mapping[int, str] = {
    400: "The body could not be read as JSON text (FastAPI's own parser, for these routes).",
    401: "Missing or wrong bearer key (`Authorization: Bearer <ECHO_API_KEY>`).",
    404: "No such id (the detail names it and what exists).",
    409: "Conflict with the current state (the detail says which).",
    413: "Request body larger than the service accepts (`ECHO_MAX_BODY_BYTES`).",
    422: "A field is missing or invalid: each is named with its location.",
    429: "The upstream model is rate limiting.",
    502: "The upstream model failed.",
    503: "A backend (store, embedder or vector store) is not there or not answering.",
}


def errors(
    *codes: int, models: Mapping[int, type[BaseModel]] | None = None, field_errors: bool = False
) -> dict[int | str, Any]:
    """`responses=` for a route answering these error statuses (`models` overrides a body model); with
    `field_errors`, its 422 is always `{"detail": {"message", "errors"}}` (`wire.unprocessable`)."""
    chosen = dict(models or {})
    unprocessable = FieldsProblem if field_errors else FieldProblem
    return {
        code: {
            "model": chosen.get(code, unprocessable if code == 422 else Problem),
            "description": _DESCRIPTIONS.get(code, "Refused."),
        }
        for code in codes
    }


AUTH_ERRORS = errors(401)

# `POST /chat/completions` (the `echo.*` pipe): a completion, or its SSE chunks when `stream` is true.
PIPE_RESPONSES: dict[int | str, Any] = {
    200: {
        "description": "An OpenAI chat completion (`application/json`), or with `stream: true` its chunks"
        " as server-sent events (`data: {chunk}`, then `data: [DONE]`).",
        "content": {
            "application/json": {"schema": {"type": "object", "required": ["id", "object", "choices"]}},
            # Each event: `data:` a JSON chunk (`chat.completion.chunk`, or an `error`), the last `[DONE]`.
            "text/event-stream": {
                "schema": {"type": "object", "required": ["data"], "properties": {"data": {"type": "string"}}}
            },
        },
    },
    **errors(404, 413, 422, 429, 502),
}


# The roles the pipe converts for Gemini (`echo.domain.openai_to_gemini`); a conversation needs a user text.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_USER_TEXT = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {"role": {"const": "user"}, "content": {"type": "string", "pattern": "\\S"}},
}


def chat_body(shape: TypeAdapter[Any], model_ids: Sequence[str]) -> dict[str, Any]:
    """`openapi_extra=` for the pipe's chat request: `shape`, its `model` one of `model_ids`, each
    message's role one the pipe converts, and at least one user message with text."""
    extra = json_body(shape, model={"type": "string", "enum": sorted(model_ids)})
    schema = extra["requestBody"]["content"]["application/json"]["schema"]
    messages = schema["properties"]["messages"]
    messages["items"]["properties"]["role"] = {"type": "string", "enum": list(CHAT_ROLES)}
    messages["contains"] = _USER_TEXT
    return extra


def _inlined(schema: Any, definitions: Mapping[str, Any]) -> Any:
    """`schema` with its `#/$defs/…` references replaced by their definitions (none is recursive)."""
    if isinstance(schema, dict):
        reference = schema.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            return _inlined(definitions[reference.removeprefix("#/$defs/")], definitions)
        return {key: _inlined(value, definitions) for key, value in schema.items() if key != "$defs"}
    if isinstance(schema, list):
        return [_inlined(item, definitions) for item in schema]
    return schema


def json_body(shape: TypeAdapter[Any], *, require: Sequence[str] = (), **overrides: Any) -> dict[str, Any]:
    """`openapi_extra=` declaring the JSON request body of `shape` for a route that reads the body
    itself: `require` adds required fields, `overrides` replaces properties (an enum of the ids served)."""
    generated = shape.json_schema()
    schema = _inlined(generated, generated.get("$defs", {}))
    if overrides:
        schema["properties"] = {**schema.get("properties", {}), **overrides}
    if require:
        schema["required"] = sorted({*schema.get("required", ()), *require})
    return _request_body(schema)


def valves_body(model: type[Valves]) -> dict[str, Any]:
    """`openapi_extra=` for a filter's `valves/update`: its valves, each optional, no other name.

    A number valve takes its plain decimal text too, within the same bounds (Open WebUI's editor sends
    an edited number as text): the text's pattern says the bounds (`decimal_text_pattern`). A mapping
    valve takes its JSON text too (the editor shows and sends it so). The rules across valves, which
    JSON Schema cannot say, are in the description and in `x-echo-rules`."""
    generated = model.model_json_schema()
    schema = _inlined(generated, generated.get("$defs", {}))
    schema.pop("required", None)
    for name, field in model.model_fields.items():
        kind = valves_module.number_kind(field.annotation)
        if kind is not None:
            schema["properties"][name] = _with_decimal_text(schema["properties"][name], kind)
        elif name in valves_module.mapping_valve_names(model):
            schema["properties"][name] = _with_json_text(schema["properties"][name])
    if model.RULES:
        said = "; ".join(rule.text for rule in model.RULES)
        schema["description"] = (
            f"{schema.get('description', '')} Rules across valves (JSON Schema cannot say them; a body"
            f" that breaks one is a 422 naming its valves, the ones left out counting at their defaults):"
            f" {said}."
        ).strip()
        schema["x-echo-rules"] = [{"valves": list(rule.valves), "rule": rule.text} for rule in model.RULES]
    return _request_body(schema)


_ANNOTATIONS = ("title", "description", "default")


def _with_decimal_text(number: dict[str, Any], kind: type) -> dict[str, Any]:
    """`number` (a JSON Schema integer or number with bounds) or its decimal text within the bounds."""
    text = {
        "type": "string",
        "pattern": decimal_text_pattern(
            kind,
            ge=number.get("minimum"),
            gt=number.get("exclusiveMinimum"),
            le=number.get("maximum"),
            lt=number.get("exclusiveMaximum"),
        ),
        "description": "The number's plain decimal text (as Open WebUI's valves editor sends it).",
    }
    bare = {key: value for key, value in number.items() if key not in _ANNOTATIONS}
    return {**{key: number[key] for key in _ANNOTATIONS if key in number}, "anyOf": [bare, text]}


def _with_json_text(mapping: dict[str, Any]) -> dict[str, Any]:
    """A mapping valve as an object, or its JSON text (blank: an empty mapping)."""
    bare = {key: value for key, value in mapping.items() if key not in _ANNOTATIONS}
    text = {
        "type": "string",
        "pattern": "^[ \\t\\n\\r]*(?:\\{[\\s\\S]*\\})?[ \\t\\n\\r]*$",
        "contentMediaType": "application/json",
        "contentSchema": bare,
        "description": "The object as JSON text (as Open WebUI's valves editor sends it; blank: {}). Text"
        " that is not JSON of the object is a 422 naming the valve.",
    }
    return {**{key: mapping[key] for key in _ANNOTATIONS if key in mapping}, "anyOf": [bare, text]}


def decimal_text_pattern(
    kind: type,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> str:
    """A regular expression matching exactly the decimal texts (`valves.NUMBER_TEXT`) of the `kind`
    (`int` or `float`) numbers within the bounds. An integer's bounds are any integers; a float's are
    integers, its lower bound exclusive only at 0 (so a text just above it stays above as a float)."""
    low = ge if gt is None else gt
    high = le if lt is None else lt
    if kind is int:
        low_int = None if low is None else int(low) + (1 if gt is not None else 0)
        high_int = None if high is None else int(high) - (1 if lt is not None else 0)
        return f"^(?:{_integers(low_int, high_int)})$"
    if lt is not None or (gt is not None and gt != 0) or low is None or low < 0:
        raise ValueError(f"no decimal text pattern for floats bounded by ge={ge} gt={gt} le={le} lt={lt}")
    if low != int(low) or (high is not None and high != int(high)):
        raise ValueError(f"a float valve's bounds must be integers for its text pattern: {low}, {high}")
    fraction, zeros = r"(?:\.[0-9]{1,15})?", r"(?:\.0{1,15})?"
    low_int = int(low)
    branches = []
    if gt is not None:  # above 0: 0 with a fraction that is not all zeros, or an integer part above
        first_non_zero = "|".join(f"0{{{k}}}[1-9][0-9]{{0,{14 - k}}}" for k in range(15))
        branches.append(f"0\\.(?:{first_non_zero})")
        low_int += 1
    if high is None:
        branches.append(f"(?:{_integers(low_int, None)}){fraction}")
    else:
        high_int = int(high)
        if low_int <= high_int - 1:
            branches.append(f"(?:{_integers(low_int, high_int - 1)}){fraction}")
        if low_int <= high_int:
            branches.append(f"{high_int}{zeros}")
    return f"^(?:{'|'.join(branches)})$"


def _integers(low: int | None, high: int | None) -> str:
    """Alternatives matching the canonical decimal text (no leading zero, `-` only before a non-zero
    digit, at most 18 digits as `valves.NUMBER_TEXT`) of every integer from `low` to `high` (None:
    unbounded)."""
    biggest = 10**18 - 1
    low = -biggest if low is None else max(low, -biggest)
    high = biggest if high is None else min(high, biggest)
    if low > high:
        return "(?!)"  # nothing
    parts = []
    if low < 0:
        parts += [f"-(?:{part})" for part in _naturals(max(1, -high), -low)]
    if high >= 0:
        parts += _naturals(max(0, low), high)
    return "|".join(parts)


def _naturals(low: int, high: int) -> list[str]:
    """Alternatives matching the decimal text of each natural number from `low` to `high`."""
    parts = []
    while low <= high:
        digits = len(str(low))
        top = min(high, 10**digits - 1)
        parts.append(_same_length(str(low), str(top)))
        low = top + 1
    return parts


def _same_length(low: str, high: str) -> str:
    """A regular expression for the numbers from `low` to `high`, texts of one length."""
    if low == high:
        return low
    if len(low) == 1:
        return f"[{low}-{high}]"
    if low[0] == high[0]:
        return f"{low[0]}(?:{_same_length(low[1:], high[1:])})"
    rest = len(low) - 1
    first, last = int(low[0]), int(high[0])
    parts, tail = [], None
    if low[1:] != "0" * rest:
        parts.append(f"{low[0]}(?:{_same_length(low[1:], '9' * rest)})")
        first += 1
    if high[1:] != "9" * rest:
        tail = f"{high[0]}(?:{_same_length('0' * rest, high[1:])})"
        last -= 1
    if first <= last:
        digit = str(first) if first == last else f"[{first}-{last}]"
        parts.append(f"{digit}[0-9]{{{rest}}}")
    return "|".join([*parts, *([tail] if tail else [])])


def _request_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


class _MethodNotAllowed(APIRoute):
    """Matches a path its `methods` (the documented ones) do not serve, whatever the method: a 405
    whose `Allow` names them. Starlette's own 405 names the methods of the first route of the path
    only (`Allow: GET` where `GET` and `DELETE` are two routes), and a concrete path (`/memories/search`)
    would fall through to a template that matches it too (`/memories/{memory_id}`)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is Match.PARTIAL:
            return Match.FULL, child
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        allow = ", ".join(sorted(self.methods or ()))
        raise HTTPException(
            status_code=405, detail=f"{self.path} answers {allow} only", headers={"Allow": allow}
        )


class _EveryMethod(APIRoute):
    """Matches its path whatever the method, and answers what `refuse` raises for its path parameters
    (an operation that does not exist, saying why)."""

    refuse: Callable[[Mapping[str, Any]], HTTPException]

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        return (Match.FULL, child) if match is Match.PARTIAL else (match, child)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise self.refuse(scope.get("path_params", {}))


def add_refusing_route(
    router: APIRouter, path: str, refuse: Callable[[Mapping[str, Any]], HTTPException]
) -> None:
    """`path` answers every method with what `refuse` raises for its path parameters, undocumented."""

    async def refused() -> None:  # never called: `_EveryMethod.handle` answers
        raise refuse({})

    route = _EveryMethod(path, refused, methods=["POST"], include_in_schema=False, name=f"refuse {path}")
    route.refuse = refuse
    router.routes.append(route)


async def _never_called() -> None:  # `_MethodNotAllowed.handle` answers
    raise HTTPException(status_code=405)


def allow_documented_methods(router: APIRouter) -> None:
    """After the last route of each path of `router`, one that answers every other method with a 405
    whose `Allow` lists the path's methods (RFC 9110 §15.5.6; what schemathesis checks)."""
    methods: dict[str, set[str]] = {}
    last: dict[str, int] = {}
    for index, route in enumerate(router.routes):
        if isinstance(route, APIRoute) and not isinstance(route, _MethodNotAllowed):
            methods.setdefault(route.path, set()).update(route.methods or ())
            last[route.path] = index
    routes = list(router.routes)
    for path, index in sorted(last.items(), key=lambda item: -item[1]):
        route = _MethodNotAllowed(
            path,
            _never_called,
            methods=sorted(methods[path]),
            include_in_schema=False,
            name=f"405 {path}",
        )
        routes.insert(index + 1, route)
    router.routes[:] = routes
