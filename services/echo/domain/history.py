"""A stored Open WebUI chat (`GET /api/v1/chats/{id}`, shape of 0.12.4) as a message list; pure.

A chat is a tree: `chat.history.messages` maps message ids to messages with `parentId`, and
`chat.history.currentId` is the message the user last saw: the active branch runs from the root to
it (what Open WebUI itself injects for a referenced chat); without a `currentId`, to the newest
leaf. A chat without a history (imports of old exports) has its messages in `chat.messages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["active_branch", "chat_owner"]


def chat_owner(answer: Mapping[str, Any]) -> str | None:
    """The `user_id` of a stored chat (None when the answer has none)."""
    owner = answer.get("user_id")
    return owner if isinstance(owner, str) and owner else None


def active_branch(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages of the chat's active branch, oldest first (each as stored: role, content,
    `output` items, files…); empty when the answer holds none."""
    chat = answer.get("chat")
    if not isinstance(chat, Mapping):
        return []
    history = chat.get("history")
    messages = history.get("messages") if isinstance(history, Mapping) else None
    current = history.get("currentId") if isinstance(history, Mapping) else None
    if isinstance(messages, Mapping) and messages:
        branch: list[dict[str, Any]] = []
        seen: set[str] = set()
        at = current if isinstance(current, str) and current in messages else _latest_leaf(messages)
        while isinstance(at, str) and at in messages and at not in seen:  # a cycle is not a branch
            seen.add(at)
            message = messages[at]
            if not isinstance(message, Mapping):
                break
            branch.append(dict(message))
            at = message.get("parentId")
        branch.reverse()
        return branch
    flat = chat.get("messages")
    if isinstance(flat, list):
        return [dict(message) for message in flat if isinstance(message, Mapping)]
    return []


def _latest_leaf(messages: Mapping[str, Any]) -> str | None:
    """The newest message without children (by timestamp): the branch end when `currentId` is missing."""
    leaves = [
        (message.get("timestamp") if isinstance(message.get("timestamp"), int | float) else 0, key)
        for key, message in messages.items()
        if isinstance(message, Mapping) and not message.get("childrenIds")
    ]
    return max(leaves)[1] if leaves else None
