"""What echo-hooks' `/openapi.json` says each route answers: error bodies, request bodies read by hand.

Most routes read and check their JSON body themselves (`wire.read_json`, bounded, 413 past the limit,
422 naming the field) rather than through FastAPI, so FastAPI cannot see the body's shape: `json_body`
puts it in the document. `errors` declares the error statuses a route answers, each with its body:
`Problem` (`{"detail": "why"}`), or `FieldProblem` for a 422 (FastAPI's list of field errors, or
`wire.unprocessable`'s `{"message", "errors"}`; a configuration refused as a whole has a message
and no errors). A route documents every status it answers; a 500 is never documented (it is a bug).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "AUTH_ERRORS",
    "PIPE_RESPONSES",
    "FieldError",
    "FieldProblem",
    "Problem",
    "chat_body",
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


def errors(*codes: int, models: Mapping[int, type[BaseModel]] | None = None) -> dict[int | str, Any]:
    """`responses=` for a route answering these error statuses (`models` overrides a body model)."""
    chosen = dict(models or {})
    return {
        code: {
            "model": chosen.get(code, FieldProblem if code == 422 else Problem),
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


# The roles the pipe converts for Gemini (`echo.llm.openai_to_gemini`); a conversation needs a user text.
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


def valves_body(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra=` for a filter's `valves/update`: its valves, each optional, no other name. A
    mapping valve is documented as an object (Open WebUI's editor sends it as JSON text, accepted too)."""
    generated = model.model_json_schema()
    schema = _inlined(generated, generated.get("$defs", {}))
    schema.pop("required", None)
    return _request_body(schema)


def _request_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
