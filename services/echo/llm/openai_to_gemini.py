"""OpenAI chat-completions request bodies -> Gemini ``contents`` and ``GenerateContentConfig``; pure.

The body is what Open WebUI sends to a pipe: ``model``, ``messages`` (roles system, developer, user,
assistant, tool; ``content`` a string or a list of ``text`` / ``image_url`` parts) and the sampling
fields ``temperature``, ``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``stop``, ``seed``.

Rules: system and developer messages, wherever they stand, are joined into ``system_instruction``;
``assistant`` becomes role ``model``; consecutive messages of one role are merged into one content;
``data:`` image URLs become ``inline_data`` parts, other URLs a ``[image: <url>]`` text (nothing is
fetched); unknown part types are dropped. Tool calls and tool results are rendered as text for now.
Malformed input raises ``ValueError`` naming the offending field.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from google.genai import types

__all__ = [
    "PIPE_MODEL_PREFIX",
    "gemini_model_id",
    "to_gemini_config",
    "to_gemini_contents",
    "to_gemini_request",
]

PIPE_MODEL_PREFIX = "echo."
_SYSTEM_ROLES = frozenset({"system", "developer"})
_ROLES = {"user": "user", "assistant": "model", "tool": "user", "function": "user"}


def gemini_model_id(pipe_model: str) -> str:
    """``echo.gemini-2.5-flash`` -> ``gemini-2.5-flash``; an id without the prefix is returned as is."""
    return pipe_model.removeprefix(PIPE_MODEL_PREFIX)


def to_gemini_request(body: Mapping[str, Any]) -> tuple[list[types.Content], types.GenerateContentConfig]:
    """The whole conversion: ``(contents, config)`` for ``generate_content``."""
    if not isinstance(body, Mapping):
        raise ValueError("body: expected a JSON object")
    contents, system = to_gemini_contents(body.get("messages"))
    return contents, to_gemini_config(body, system_instruction=system)


def to_gemini_contents(messages: Any) -> tuple[list[types.Content], str | None]:
    """``(contents, system_instruction)`` from an OpenAI ``messages`` list."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: expected a non-empty list")
    system: list[str] = []
    contents: list[types.Content] = []
    tool_names: dict[str, str] = {}
    has_user = False
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise ValueError(f"{where}: expected an object")
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            text = "\n\n".join(p.text for p in _parts(message.get("content"), where) if p.text)
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
            result = "".join(p.text or "" for p in parts)
            parts = [types.Part(text=f"[tool result {name}]: {result}")]
        has_user = has_user or (role == "user" and bool(parts))
        if not parts:
            continue
        gemini_role = _ROLES[role]
        if contents and contents[-1].role == gemini_role:
            contents[-1].parts = [*(contents[-1].parts or []), *parts]
        else:
            contents.append(types.Content(role=gemini_role, parts=parts))
    if not has_user:
        raise ValueError("messages: no user message with content")
    return contents, "\n\n".join(system) or None


def to_gemini_config(
    body: Mapping[str, Any], *, system_instruction: str | None = None
) -> types.GenerateContentConfig:
    """The sampling fields of the body, plus the system instruction."""
    max_tokens = _number(body, "max_completion_tokens", int)
    if max_tokens is None:
        max_tokens = _number(body, "max_tokens", int)
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    elif stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise ValueError("stop: expected a string or a list of strings")
    return types.GenerateContentConfig(
        system_instruction=system_instruction,
        temperature=_number(body, "temperature", float),
        top_p=_number(body, "top_p", float),
        max_output_tokens=max_tokens,
        stop_sequences=stop or None,
        seed=_number(body, "seed", int),
    )


def _number(body: Mapping[str, Any], key: str, kind: type[int] | type[float]) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and value != int(value)):
        raise ValueError(f"{key}: expected {'an integer' if kind is int else 'a number'}, got {value!r}")
    return kind(value)


def _parts(content: Any, where: str) -> list[types.Part]:
    """Gemini parts of one message ``content``, in order; unknown part types are skipped."""
    if content is None:
        return []
    if isinstance(content, str):
        return [types.Part(text=content)] if content else []
    if not isinstance(content, Sequence):
        raise ValueError(f"{where}.content: expected a string or a list of parts")
    parts: list[types.Part] = []
    for j, item in enumerate(content):
        if isinstance(item, str):
            item = {"type": "text", "text": item}
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str) and item["text"]:
            parts.append(types.Part(text=item["text"]))
        elif kind == "image_url":
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if isinstance(url, str) and url:
                parts.append(_image_part(url, f"{where}.content[{j}].image_url"))
    return parts


def _image_part(url: str, where: str) -> types.Part:
    if not url.startswith("data:"):
        return types.Part(text=f"[image: {url}]")
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
    return types.Part(inline_data=types.Blob(mime_type=mime or "text/plain", data=data))


def _tool_call_parts(tool_calls: Any, names: dict[str, str]) -> list[types.Part]:
    """Renders assistant ``tool_calls`` as text, remembering each call id's function name."""
    if not isinstance(tool_calls, list):
        return []
    parts: list[types.Part] = []
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
        parts.append(types.Part(text=f"[tool call {name}]: {arguments}"))
    return parts
