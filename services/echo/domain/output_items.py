"""Open WebUI's `output` items as the chat messages the next inlet sends (pure, no I/O).

An outlet's assistant message carries what the model did as `output` items (text, tool calls,
their results, reasoning); Open WebUI 0.12.4 rebuilds the history of the next request from them.
The filters that hash an outlet's branch (echo_compression, echo_memory), the referenced chats read
from Open WebUI's API and the replay driver unfold them the same way, so every side hashes the
same turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from echo.domain.compression import messages as msgs

__all__ = ["unfold_output_items"]


def unfold_output_items(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The outlet's messages as the next inlet will send them: an assistant message whose `output`
    items hold tool calls becomes an assistant message with `tool_calls` per batch of calls, a `tool`
    message per result, and an assistant message with the text that follows (Open WebUI 0.12.4
    rebuilds history from `output` so; reasoning items are not part of it)."""
    unfolded: list[Mapping[str, Any]] = []
    for message in messages:
        items = message.get("output")
        if (
            msgs.role_of(message) == "assistant"
            and isinstance(items, list)
            and any(isinstance(item, Mapping) and item.get("type") == "function_call" for item in items)
        ):
            unfolded.extend(_from_output(items))
        else:
            unfolded.append(message)
    return unfolded


def _item_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            part["text"] for part in value if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def _from_output(items: Sequence[object]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []

    def flush() -> None:
        if texts or calls:
            message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
            if calls:
                message["tool_calls"] = list(calls)
            out.append(message)
        texts.clear()
        calls.clear()

    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            texts.append(_item_text(item.get("content")))
        elif kind == "function_call":
            call_id = item.get("call_id") or item.get("id") or ""
            function = {"name": item.get("name", ""), "arguments": item.get("arguments", "")}
            calls.append({"id": call_id, "type": "function", "function": function})
        elif kind == "function_call_output":
            flush()
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id", ""),
                    "content": _item_text(item.get("output")),
                }
            )
    flush()
    return out
