"""OpenAI chat-completions request bodies -> Gemini ``contents`` and generation config; pure.

The body is what Open WebUI sends to a pipe: ``model``, ``messages`` (roles system, developer, user,
assistant, tool; ``content`` a string or a list of ``text`` / ``image_url`` parts) and the sampling
fields ``temperature``, ``top_p``, ``max_tokens`` / ``max_completion_tokens``, ``stop``, ``seed``.

Rules: system and developer messages, wherever they stand, are joined into ``system_instruction``;
``assistant`` becomes role ``model``; consecutive messages of one role are merged into one content;
``data:`` image URLs become ``inline_data`` parts, other URLs a ``[image: <url>]`` text (nothing is
fetched); unknown part types are dropped. An assistant's ``tool_calls`` become ``function_call`` parts
(arguments parsed from their JSON text), a ``tool`` message a ``function_response`` part
``{"result": <its text>}`` named after the call it answers. ``restored`` (the rich shadow's suture)
replaces the conversion of given messages by stored contents. OpenAI ``tools`` become Gemini
function declarations (``to_gemini_tools``), their JSON schemas passed as they are.
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

from echo.domain.shadow.parts import BlobDict, ContentDict, FunctionCallDict, PartDict

__all__ = [
    "PIPE_MODEL_PREFIX",
    "BlobDict",
    "ContentDict",
    "FunctionCallDict",
    "FunctionDeclarationDict",
    "GenerationConfigDict",
    "PartDict",
    "gemini_model_id",
    "message_parts",
    "to_gemini_config",
    "to_gemini_contents",
    "to_gemini_request",
    "to_gemini_tools",
]

PIPE_MODEL_PREFIX = "echo."
_SYSTEM_ROLES = frozenset({"system", "developer"})
_ROLES = {"user": "user", "assistant": "model", "tool": "user", "function": "user"}


class GenerationConfigDict(TypedDict, total=False):
    """The fields of Gemini's ``GenerateContentConfig`` a chat body sets; absent when not given."""

    system_instruction: str
    temperature: float
    top_p: float
    max_output_tokens: int
    stop_sequences: list[str]
    seed: int


class FunctionDeclarationDict(TypedDict, total=False):
    """One tool the model may call (Gemini ``FunctionDeclaration``), its parameters a JSON schema."""

    name: str
    description: str
    parameters_json_schema: dict[str, Any]


def gemini_model_id(pipe_model: str) -> str:
    """``echo.gemini-2.5-flash`` -> ``gemini-2.5-flash``; an id without the prefix is returned as is."""
    return pipe_model.removeprefix(PIPE_MODEL_PREFIX)


def to_gemini_request(body: Mapping[str, Any]) -> tuple[list[ContentDict], GenerationConfigDict]:
    """The whole conversion: ``(contents, config)`` for ``generate_content``."""
    if not isinstance(body, Mapping):
        raise ValueError("body: expected a JSON object")
    contents, system = to_gemini_contents(body.get("messages"))
    return contents, to_gemini_config(body, system_instruction=system)


def to_gemini_contents(
    messages: Any, *, restored: Mapping[int, Sequence[ContentDict]] | None = None
) -> tuple[list[ContentDict], str | None]:
    """``(contents, system_instruction)`` from an OpenAI ``messages`` list; ``restored`` maps a message
    index to the contents that stand in its place."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: expected a non-empty list")
    restored = restored or {}
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
        if role == "assistant":
            _remember_names(message.get("tool_calls"), tool_names)
        stand_in = restored.get(i)
        if stand_in is not None:
            for content in stand_in:
                has_user = has_user or (content["role"] == "user" and bool(content["parts"]))
                _append(contents, content["role"], list(content["parts"]))
            continue
        parts = message_parts(message, where, tool_names)
        has_user = has_user or (role == "user" and bool(parts))
        _append(contents, _ROLES[role], parts)
    if not has_user:
        raise ValueError("messages: no user message with content")
    return contents, "\n\n".join(system) or None


def _append(contents: list[ContentDict], role: str, parts: list[PartDict]) -> None:
    """Consecutive messages of one role are merged into one content."""
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def message_parts(
    message: Mapping[str, Any], where: str = "message", tool_names: Mapping[str, str] | None = None
) -> list[PartDict]:
    """The Gemini parts of one user, assistant or tool message."""
    role = message.get("role")
    parts = _parts(message.get("content"), where)
    if role == "assistant":
        return parts + _function_calls(message.get("tool_calls"), where)
    if role in ("tool", "function"):
        call_id = str(message.get("tool_call_id"))
        name = (tool_names or {}).get(call_id) or message.get("name") or "tool"
        result = "".join(p.get("text", "") for p in parts)
        return [{"function_response": {"name": str(name), "response": {"result": result}}}]
    return parts


def to_gemini_tools(tools: Any) -> list[FunctionDeclarationDict]:
    """OpenAI ``tools`` (type ``function``) as Gemini function declarations; other types are skipped."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ValueError("tools: expected a list")
    declarations: list[FunctionDeclarationDict] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"tools[{i}].function.name: expected a non-empty string")
        declaration: FunctionDeclarationDict = {"name": name}
        description = function.get("description") if isinstance(function, Mapping) else None
        if isinstance(description, str) and description.strip():
            declaration["description"] = description.strip()
        parameters = function.get("parameters") if isinstance(function, Mapping) else None
        if parameters is not None:
            if not isinstance(parameters, Mapping):
                raise ValueError(f"tools[{i}].function.parameters: expected a JSON schema object")
            declaration["parameters_json_schema"] = dict(parameters)
        declarations.append(declaration)
    return declarations


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
        elif kind == "file":  # OpenAI's file part: echo_context's native audio, video and PDF parts
            file = item.get("file")
            data = file.get("file_data") if isinstance(file, Mapping) else None
            if isinstance(data, str) and data.startswith("data:"):
                parts.append(_image_part(data, f"{where}.content[{j}].file.file_data"))
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


def _remember_names(tool_calls: Any, names: dict[str, str]) -> None:
    """Each call id's function name, for the tool messages that answer it."""
    if not isinstance(tool_calls, list):
        return
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and call.get("id") is not None:
            names[str(call["id"])] = str(function.get("name") or "tool")


def _function_calls(tool_calls: Any, where: str) -> list[PartDict]:
    """An assistant's ``tool_calls`` as ``function_call`` parts, arguments parsed from their JSON text."""
    if not isinstance(tool_calls, list):
        return []
    parts: list[PartDict] = []
    for j, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError) as exc:
                raise ValueError(f"{where}.tool_calls[{j}].function.arguments: not JSON text") from exc
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            arguments = {"value": arguments}
        parts.append({"function_call": {"name": str(function.get("name") or "tool"), "args": arguments}})
    return parts
