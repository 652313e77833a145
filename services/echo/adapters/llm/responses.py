"""Reading answers out of provider responses (seed 002, v1.6.4). Pure functions on decoded JSON.

The answer text is taken from whichever shape the provider used:

- OpenAI chat completions: ``choices[].message.content`` as a string or a list of parts with
  ``text`` / ``output_text`` (also ``choices[].delta`` and legacy ``choices[].text``);
- Responses API: ``output[]`` items of type ``message`` whose ``content[]`` parts are ``output_text``
  (or a top-level ``output_text`` string some gateways add);
- Gemini: ``candidates[].content.parts[].text``;
- Anthropic-style top-level ``content[]`` parts.

Reasoning is never answer text: ``reasoning_content`` / ``reasoning`` / ``thinking`` fields, parts and
output items of a reasoning type, Gemini parts with ``thought: true`` and a leading
``<think>…</think>`` block are all dropped. When nothing usable is left, ``EmptyAnswer`` reports the
trimmed structure of the response instead of a vague format error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from echo.adapters.llm import errors

__all__ = ["extract_json", "extract_text", "finish_reason", "trim_structure", "usage_tokens"]

_TEXT_PART_TYPES = frozenset({"text", "output_text"})
_THINK_BLOCK = re.compile(r"^\s*<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL)
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_SHAPE_CHARS = 2000
_MAX_JSON_STARTS = 64  # brackets tried as the start of JSON embedded in prose


def extract_text(payload: Any) -> str:
    """The answer text of ``payload``, without reasoning; ``EmptyAnswer`` when there is none."""
    text = _THINK_BLOCK.sub("", "".join(_answer_texts(payload))).strip()
    if not text:
        shape = trim_structure(payload)
        rendered = json.dumps(shape, ensure_ascii=False)
        if len(rendered) > _MAX_SHAPE_CHARS:
            rendered = rendered[:_MAX_SHAPE_CHARS] + "…"
        raise errors.EmptyAnswer(f"the model returned no answer text; response structure: {rendered}", shape)
    return text


def _answer_texts(payload: Any) -> Iterator[str]:
    if not isinstance(payload, Mapping):
        if isinstance(payload, str):
            yield payload
        return
    for choice in _mappings(payload.get("choices"))[:1]:
        for key in ("message", "delta"):
            message = choice.get(key)
            if isinstance(message, Mapping):
                yield from _content_texts(message.get("content"))
        if isinstance(choice.get("text"), str):
            yield choice["text"]
    for item in _mappings(payload.get("output")):
        if item.get("type", "message") == "message":
            yield from _content_texts(item.get("content"))
    if isinstance(payload.get("output_text"), str) and not payload.get("output"):
        yield payload["output_text"]
    for candidate in _mappings(payload.get("candidates"))[:1]:
        content = candidate.get("content")
        if isinstance(content, Mapping):
            yield from _content_texts(content.get("parts"))
    if "choices" not in payload and "candidates" not in payload and isinstance(payload.get("content"), list):
        yield from _content_texts(payload["content"])


def _content_texts(content: Any) -> Iterator[str]:
    """Text of a message ``content``: a string, or parts of which only text parts count."""
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for part in content:
        if isinstance(part, str):
            yield part
        elif isinstance(part, Mapping) and _is_answer_part(part):
            yield part["text"]


def _is_answer_part(part: Mapping[str, Any]) -> bool:
    if not isinstance(part.get("text"), str) or part.get("thought") is True:
        return False
    kind = part.get("type")
    return kind is None or kind in _TEXT_PART_TYPES


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def finish_reason(payload: Any) -> str:
    """``stop``, ``length`` or ``content_filter`` from an OpenAI-style or Responses-style payload."""
    if not isinstance(payload, Mapping):
        return "stop"
    for choice in _mappings(payload.get("choices"))[:1]:
        reason = choice.get("finish_reason")
        if reason in ("length", "max_tokens"):
            return "length"
        if reason == "content_filter":
            return "content_filter"
    if payload.get("status") == "incomplete":
        details = payload.get("incomplete_details")
        why = details.get("reason") if isinstance(details, Mapping) else None
        return "content_filter" if why == "content_filter" else "length"
    return "stop"


def usage_tokens(payload: Any) -> tuple[int, int]:
    """``(prompt, completion)`` tokens from ``usage`` in OpenAI or Responses keys; zeros if absent."""
    usage = payload.get("usage") if isinstance(payload, Mapping) else None
    if not isinstance(usage, Mapping):
        return 0, 0

    def number(*keys: str) -> int:
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return int(value)
        return 0

    return number("prompt_tokens", "input_tokens"), number("completion_tokens", "output_tokens")


def trim_structure(value: Any, *, max_string: int = 60, max_items: int = 3, max_depth: int = 6) -> Any:
    """A small picture of ``value`` for diagnostics: keys kept, strings cut, lists shortened."""
    if isinstance(value, str):
        return value if len(value) <= max_string else f"{value[:max_string]}… ({len(value)} chars)"
    if value is None or isinstance(value, bool | int | float):
        return value
    if max_depth <= 0:
        return f"<{type(value).__name__}>"
    deeper = {"max_string": max_string, "max_items": max_items, "max_depth": max_depth - 1}
    if isinstance(value, Mapping):
        return {str(k): trim_structure(v, **deeper) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [trim_structure(v, **deeper) for v in value[:max_items]]
        if len(value) > max_items:
            items.append(f"… {len(value) - max_items} more")
        return items
    return f"<{type(value).__name__}>"


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: bare, in a ```json fence, or the first object/array in prose."""
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char in "{["][:_MAX_JSON_STARTS]
    for start in starts:
        try:
            return decoder.raw_decode(text, start)[0]
        except ValueError:
            continue
    cut = text if len(text) <= 200 else text[:200] + "…"
    raise errors.InvalidJSON(f"the answer is not JSON: {cut!r}", cut)
