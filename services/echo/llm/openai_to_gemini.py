"""OpenAI chat-completions request bodies -> Gemini ``contents`` and generation config; pure.

The body is what Open WebUI sends to a pipe: ``model``, ``messages`` (roles system, developer, user,
assistant, tool; ``content`` a string or a list of ``text`` / ``image_url`` parts) and the sampling
fields ``temperature``, ``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``stop``, ``seed``.

Rules: system and developer messages, wherever they stand, are joined into ``system_instruction``;
``assistant`` becomes role ``model``; consecutive messages of one role are merged into one content;
``data:`` image URLs become ``inline_data`` parts, other URLs a ``[image: <url>]`` text (nothing is
fetched); unknown part types are dropped. Tool calls and tool results are rendered as text for now.
Malformed input raises ``ValueError`` naming the offending field.

The result is plain data in the Gemini API's shapes (``ContentDict``, ``PartDict``,
``GenerationConfigDict``); the adapter (``gemini_chat``) turns it into the SDK's types, so this
module imports no SDK.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict
from urllib.parse import unquote_to_bytes

__all__ = [
    "PIPE_MODEL_PREFIX",
    "BlobDict",
    "ContentDict",
    "GenerationConfigDict",
    "PartDict",
    "gemini_model_id",
    "to_gemini_config",
    "to_gemini_contents",
    "to_gemini_request",
]

PIPE_MODEL_PREFIX = "echo."
_SYSTEM_ROLES = frozenset({"system", "developer"})
_ROLES = {"user": "user", "assistant": "model", "tool": "user", "function": "user"}


class BlobDict(TypedDict):
    """Inline bytes of a part (Gemini ``Blob``)."""

    mime_type: str
    data: bytes


class PartDict(TypedDict, total=False):
    """One part of a content (Gemini ``Part``): ``text`` or ``inline_data``."""

    text: str
    inline_data: BlobDict


class ContentDict(TypedDict):
    """One turn (Gemini ``Content``): role ``user`` or ``model`` and its parts, in order."""

    role: str
    parts: list[PartDict]


class GenerationConfigDict(TypedDict, total=False):
    """The fields of Gemini's ``GenerateContentConfig`` a chat body sets; absent when not given."""

    system_instruction: str
    temperature: float
    top_p: float
    max_output_tokens: int
    stop_sequences: list[str]
    seed: int


def gemini_model_id(pipe_model: str) -> str:
    """``echo.gemini-2.5-flash`` -> ``gemini-2.5-flash``; an id without the prefix is returned as is."""
    return pipe_model.removeprefix(PIPE_MODEL_PREFIX)


def to_gemini_request(body: Mapping[str, Any]) -> tuple[list[ContentDict], GenerationConfigDict]:
    """The whole conversion: ``(contents, config)`` for ``generate_content``."""
    if not isinstance(body, Mapping):
        raise ValueError("body: expected a JSON object")
    contents, system = to_gemini_contents(body.get("messages"))
    return contents, to_gemini_config(body, system_instruction=system)


def to_gemini_contents(messages: Any) -> tuple[list[ContentDict], str | None]:
    """``(contents, system_instruction)`` from an OpenAI ``messages`` list."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: expected a non-empty list")
    system: list[str] = []
    contents: list[ContentDict] = []
    tool_names: dict[str, str] = {}
    has_user = False
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise ValueError(f"{where}: expected an object")
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            text = "\n\n".join(p["text"] for p in _parts(message.get("content"), where) if p.get("text"))
            if text:
                system.append(text)
            continue
        if role not in _ROLES:
            raise ValueError(f"{where}.role: unsupported role {role!r}")
        parts = _parts(message.get("content"), where)
        if role == "assistant":
            parts += _tool_call_parts(message.get("tool_calls"), tool_names)
        elif role in ("tool", "function"):
            name = tool_names.get(str(message.get("tool_call_id")), message.get("name") or "tool")
            result = "".join(p.get("text", "") for p in parts)
            parts = [{"text": f"[tool result {name}]: {result}"}]
        has_user = has_user or (role == "user" and bool(parts))
        if not parts:
            continue
        gemini_role = _ROLES[role]
        if contents and contents[-1]["role"] == gemini_role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": gemini_role, "parts": parts})
    if not has_user:
        raise ValueError("messages: no user message with content")
    return contents, "\n\n".join(system) or None


def to_gemini_config(
    body: Mapping[str, Any], *, system_instruction: str | None = None
) -> GenerationConfigDict:
    """The sampling fields of the body, plus the system instruction; fields not given are absent."""
    max_tokens = _number(body, "max_completion_tokens", int)
    if max_tokens is None:
        max_tokens = _number(body, "max_tokens", int)
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    elif stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise ValueError("stop: expected a string or a list of strings")
    config: GenerationConfigDict = {}
    if system_instruction:
        config["system_instruction"] = system_instruction
    temperature = _number(body, "temperature", float)
    if temperature is not None:
        config["temperature"] = temperature
    top_p = _number(body, "top_p", float)
    if top_p is not None:
        config["top_p"] = top_p
    if max_tokens is not None:
        config["max_output_tokens"] = max_tokens
    if stop:
        config["stop_sequences"] = stop
    seed = _number(body, "seed", int)
    if seed is not None:
        config["seed"] = seed
    return config


def _number(body: Mapping[str, Any], key: str, kind: type[int] | type[float]) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and value != int(value)):
        raise ValueError(f"{key}: expected {'an integer' if kind is int else 'a number'}, got {value!r}")
    return kind(value)


def _parts(content: Any, where: str) -> list[PartDict]:
    """Gemini parts of one message ``content``, in order; unknown part types are skipped."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, Sequence):
        raise ValueError(f"{where}.content: expected a string or a list of parts")
    parts: list[PartDict] = []
    for j, item in enumerate(content):
        if isinstance(item, str):
            item = {"type": "text", "text": item}
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str) and item["text"]:
            parts.append({"text": item["text"]})
        elif kind == "image_url":
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if isinstance(url, str) and url:
                parts.append(_image_part(url, f"{where}.content[{j}].image_url"))
    return parts


def _image_part(url: str, where: str) -> PartDict:
    if not url.startswith("data:"):
        return {"text": f"[image: {url}]"}
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        raise ValueError(f"{where}: malformed data URI")
    mime, *params = header.split(";")
    try:
        if "base64" in params:
            data = base64.b64decode("".join(payload.split()), validate=True)
        else:
            data = unquote_to_bytes(payload)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{where}: invalid base64 in data URI") from exc
    return {"inline_data": {"mime_type": mime or "text/plain", "data": data}}


def _tool_call_parts(tool_calls: Any, names: dict[str, str]) -> list[PartDict]:
    """Renders assistant ``tool_calls`` as text, remembering each call id's function name."""
    if not isinstance(tool_calls, list):
        return []
    parts: list[PartDict] = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        name = str(function.get("name") or "tool")
        if call.get("id") is not None:
            names[str(call["id"])] = name
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        parts.append({"text": f"[tool call {name}]: {arguments}"})
    return parts
