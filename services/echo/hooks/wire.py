"""Request bodies on the wire: bounded reading, JSON parsing and shape checks with named fields."""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["FilterRequest", "read_json", "unprocessable", "validate"]


class WireMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[Any] | None = None


class WireBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    messages: list[WireMessage] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    model: str | None = None
    chat_id: str | None = None


class FilterRequest(BaseModel):
    """`{"body": {...}, "user": {...}}` as Open WebUI posts it to a filter hook."""

    model_config = ConfigDict(extra="allow")

    body: WireBody
    user: dict[str, Any] | None = None


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


async def read_json(request: Request, limit: int) -> Any:
    """Read at most `limit` bytes (413 past it) and parse JSON (422 naming the position)."""
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
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise unprocessable(
            [{"loc": ["body"], "msg": f"malformed JSON: {error}", "type": "json_invalid"}]
        ) from error


def validate(model: type[BaseModel], data: Any) -> None:
    """Check `data` against `model`; a 422 names each bad field. The raw data is kept as it is."""
    try:
        model.model_validate(data)
    except ValidationError as error:
        raise unprocessable(
            [{"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        ) from error
