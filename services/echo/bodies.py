"""Reading and rewriting Open WebUI request bodies, pure, no I/O.

Inlet bodies carry `metadata` (chat, message, session and user ids); outlet bodies are flat
(`chat_id`, `id` = the assistant message id, `messages` with ids and `output` items).
The web UI displays an assistant message from its `output` items, so a rewrite of what the
user sees must change `content` and every text inside `output` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TurnIds", "map_assistant_text", "turn_ids"]

TextRewrite = Callable[[str], str]


@dataclass(frozen=True)
class TurnIds:
    """The ids that place a hook call in a conversation (None where Open WebUI sent none)."""

    chat_id: str | None
    user_id: str | None
    message_id: str | None
    session_id: str | None
    task: str | None


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def turn_ids(body: Mapping[str, Any], user: Mapping[str, Any] | None = None) -> TurnIds:
    """Ids from an inlet (`metadata`) or an outlet (flat) body; plain API calls have an empty chat id."""
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    user_id = _text_or_none(metadata.get("user_id")) or _text_or_none((user or {}).get("id"))
    return TurnIds(
        chat_id=_text_or_none(metadata.get("chat_id")) or _text_or_none(body.get("chat_id")),
        user_id=user_id,
        message_id=_text_or_none(metadata.get("user_message_id")) or _text_or_none(body.get("id")),
        session_id=_text_or_none(metadata.get("session_id")) or _text_or_none(body.get("session_id")),
        task=_text_or_none(metadata.get("task")),
    )


def _rewrite_content(content: Any, rewrite: TextRewrite) -> Any:
    if isinstance(content, str):
        return rewrite(content)
    if isinstance(content, list):
        rewritten = [_rewrite_part(part, rewrite) for part in content]
        if all(new is old for new, old in zip(rewritten, content, strict=True)):
            return content
        return rewritten
    return content


def _rewrite_part(part: Any, rewrite: TextRewrite) -> Any:
    """Rewrite the text fields of one content part or output item, recursively, keeping the rest."""
    if isinstance(part, str):
        return rewrite(part)
    if not isinstance(part, Mapping):
        return part
    changed: dict[str, Any] = {}
    for key in ("text", "content", "summary"):
        if key in part:
            value = part[key]
            new = rewrite(value) if isinstance(value, str) else _rewrite_content(value, rewrite)
            if new is not value:
                changed[key] = new
    return {**part, **changed} if changed else part


def map_assistant_text(body: Mapping[str, Any], rewrite: TextRewrite) -> dict[str, Any]:
    """A new body whose assistant messages had `rewrite` applied to `content` and `output` texts.

    `rewrite` must return its argument itself when it changes nothing; untouched messages are
    then shared, not copied, which keeps the hot path cheap on long chats.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return dict(body)
    new_messages: list[Any] = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            new_messages.append(message)
            continue
        changed: dict[str, Any] = {}
        for key in ("content", "output"):
            if key in message:
                value = message[key]
                new = _rewrite_content(value, rewrite)
                if new is not value:
                    changed[key] = new
        new_messages.append({**message, **changed} if changed else message)
    return {**body, "messages": new_messages}
