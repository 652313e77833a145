"""Reading and rewriting Open WebUI request bodies, pure, no I/O.

Inlet bodies carry `metadata` (chat, message, session and user ids); outlet bodies are flat
(`chat_id`, `id` = the assistant message id, `messages` with ids and `output` items).
The web UI displays an assistant message from its `output` items, so a rewrite of what the
user sees must change `content` and every text inside `output` alike (tool-call arguments and tool
results included), and the message's reasoning, tool calls and sources too (`map_assistant_text`).

Identity (DESIGN §7, issue 18): the user of a hook call is the `user` object Open WebUI attaches to
it (`{"body": …, "user": {…}}`), which Open WebUI fills from the session it authenticated. The body
is the chat request, and part of it may come from a browser (the outlet of `/api/chat/completed`):
a user id written in it (`metadata.user_id`, `metadata.user_message.user_id`, a top-level `user_id`
or `user.id`, `echo_ctx.user_id`) is a *claim*, never an identity. `turn_ids` takes the user from the
attached object only (no object, no user: the user-scoped features pass the body through);
`foreign_claims` lists the claims that name someone else, for the callers to log and count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Claim",
    "TurnIds",
    "foreign_claims",
    "map_assistant_text",
    "map_strings",
    "turn_ids",
    "user_claims",
    "user_of",
]

TextRewrite = Callable[[str], str]


@dataclass(frozen=True)
class TurnIds:
    """The ids that place a hook call in a conversation (None where Open WebUI sent none)."""

    chat_id: str | None
    user_id: str | None
    """The attached user's id (the identity); never a field of the body."""
    message_id: str | None
    session_id: str | None
    task: str | None


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Claim:
    """A body field that names a user (`field` as a dotted path, `user_id` what it names)."""

    field: str
    user_id: str

    @property
    def digest(self) -> str:
        """What a log line says of the claimed id: 16 hex digits of its SHA-256, never the id itself
        (it may be long, odd, or another user's real id)."""
        return hashlib.sha256(self.user_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def user_of(user: object) -> str | None:
    """The id of the `user` object Open WebUI attached to a call (None without one, or without an id)."""
    return _text_or_none(user.get("id")) if isinstance(user, Mapping) else None


def user_claims(body: Mapping[str, Any], *, payload_user: bool = True) -> tuple[Claim, ...]:
    """Every field of `body` that names a user, in a fixed order. ``payload_user=False`` for the
    pipe's `/chat/completions` payload, whose top-level `user` Open WebUI sets itself (the identity)."""
    found: list[tuple[str, object]] = []
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        found += [
            ("metadata.user_id", metadata.get("user_id")),
            ("metadata.user.id", user_of(metadata.get("user"))),
        ]
        message = metadata.get("user_message")
        if isinstance(message, Mapping):
            found += [
                ("metadata.user_message.user_id", message.get("user_id")),
                ("metadata.user_message.user.id", user_of(message.get("user"))),
            ]
    found.append(("user_id", body.get("user_id")))
    if payload_user:
        # An object with an id only: a string `user` is OpenAI's end-user tag, which API clients send.
        found.append(("user.id", user_of(body.get("user"))))
    context = body.get("echo_ctx")
    if isinstance(context, Mapping):
        found.append(("echo_ctx.user_id", context.get("user_id")))
    return tuple(Claim(field, named) for field, value in found if (named := _text_or_none(value)) is not None)


def foreign_claims(
    body: Mapping[str, Any], user_id: str | None, *, payload_user: bool = True
) -> tuple[Claim, ...]:
    """The claims of `body` that name someone other than `user_id` (all of them when it is None)."""
    return tuple(c for c in user_claims(body, payload_user=payload_user) if c.user_id != user_id)


def turn_ids(body: Mapping[str, Any], user: Mapping[str, Any] | None = None) -> TurnIds:
    """Ids from an inlet (`metadata`) or an outlet (flat) body; plain API calls have an empty chat id.
    The user is the attached `user` object's, whatever the body says (see the module docstring)."""
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return TurnIds(
        chat_id=_text_or_none(metadata.get("chat_id")) or _text_or_none(body.get("chat_id")),
        user_id=user_of(user),
        message_id=_text_or_none(metadata.get("user_message_id")) or _text_or_none(body.get("id")),
        session_id=_text_or_none(metadata.get("session_id")) or _text_or_none(body.get("session_id")),
        task=_text_or_none(metadata.get("task")),
    )


# What the web UI shows of an assistant or tool message: every string in it (content, output items with
# tool-call arguments and tool results, reasoning, sources, errors…) but those under these keys, which
# name or place it.
_NOT_SHOWN = frozenset(
    {
        "id",
        "parentId",
        "childrenIds",
        "role",
        "model",
        "models",
        "modelName",
        "modelIdx",
        "timestamp",
        "type",
        "status",
        "call_id",
        "tool_call_id",
        "done",
        "usage",
        "info",
    }
)
_SHOWN_ROLES = ("assistant", "tool")


@dataclass
class _Frame:
    """One container being rewritten: its keys (indices for a list), the next one, what changed."""

    container: Mapping[Any, Any] | list[Any]
    keys: list[Any]
    parent_key: Any = None
    at: int = 0
    changes: dict[Any, Any] = field(default_factory=dict)


def _frame(container: Mapping[Any, Any] | list[Any], skip: frozenset[str], parent_key: Any = None) -> _Frame:
    if isinstance(container, list):
        keys: list[Any] = list(range(len(container)))
    elif skip:
        keys = [k for k in container if k not in skip]
    else:
        keys = list(container)
    return _Frame(container, keys, parent_key)


def _is_container(value: Any) -> bool:
    kind = type(value)
    return kind is dict or kind is list or (kind is not str and isinstance(value, (list, Mapping)))


def _rebuilt(frame: _Frame) -> Any:
    if not frame.changes:
        return frame.container
    if isinstance(frame.container, list):
        items = list(frame.container)
        for index, value in frame.changes.items():
            items[index] = value
        return items
    return {**frame.container, **frame.changes}


_RECURSION_DEPTH = 32  # deeper, a subtree is walked by `_map_deep`'s own stack


def _map_near(value: Any, rewrite: TextRewrite, skip: frozenset[str], depth: int) -> Any:
    """`map_strings` of a container by recursion, the usual shallow case (Open WebUI's messages nest a
    few levels); past `_RECURSION_DEPTH` the rest goes to `_map_deep`."""
    if depth >= _RECURSION_DEPTH:
        return _map_deep(value, rewrite, skip)
    changes: dict[Any, Any] | None = None
    is_list = type(value) is list or isinstance(value, list)
    pairs = enumerate(value) if is_list else value.items()
    for key, child in pairs:
        if not is_list and key in skip:
            continue
        if type(child) is str or isinstance(child, str):
            new = rewrite(child)
            if new is child or new == child:
                continue
        elif _is_container(child):
            new = _map_near(child, rewrite, skip, depth + 1)
            if new is child:
                continue
        else:
            continue
        if changes is None:
            changes = {}
        changes[key] = new
    if changes is None:
        return value
    if is_list:
        items = list(value)
        for index, new in changes.items():
            items[index] = new
        return items
    return {**value, **changes}


def map_strings(value: Any, rewrite: TextRewrite, *, skip: frozenset[str] = frozenset()) -> Any:
    """`value` with `rewrite` applied to every string in it, at any depth (dict values and list items,
    but not under the keys in `skip`), with bounded recursion: a body nested thousands deep is fine.
    `rewrite` should return its argument itself when it changes nothing (an equal text it returns
    counts as no change too); containers where nothing changed are then shared, not copied."""
    if isinstance(value, str):
        return rewrite(value)
    if not _is_container(value):
        return value
    return _map_near(value, rewrite, skip, 0)


def _map_deep(value: Any, rewrite: TextRewrite, skip: frozenset[str]) -> Any:
    """`map_strings` of a container without recursion (a stack of frames)."""
    frames = [_frame(value, skip)]
    while True:
        frame = frames[-1]
        if frame.at < len(frame.keys):
            key = frame.keys[frame.at]
            frame.at += 1
            child = frame.container[key]
            if type(child) is str or isinstance(child, str):
                new = rewrite(child)
                if new is not child and new != child:
                    frame.changes[key] = new
            elif _is_container(child):
                frames.append(_frame(child, skip, key))
            continue
        frames.pop()
        rebuilt = _rebuilt(frame)
        if not frames:
            return rebuilt
        if rebuilt is not frame.container:
            frames[-1].changes[frame.parent_key] = rebuilt


def map_assistant_text(body: Mapping[str, Any], rewrite: TextRewrite) -> dict[str, Any]:
    """A new body whose assistant (and tool) messages had `rewrite` applied to every text the web UI
    may show: `content`, every `output` item (message text, reasoning, tool-call arguments, tool
    results), `reasoning_content`, `tool_calls`, `sources`, `error`… — every string but ids, roles,
    types and the like (`_NOT_SHOWN`).

    `rewrite` should return its argument itself when it changes nothing; untouched messages are
    then shared, not copied, and so is the list of messages when no message changed, which keeps
    the hot path cheap on long chats (and the answer's check: `wire.carried_beside`).
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return dict(body)
    new_messages: list[Any] = []
    changed = False
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in _SHOWN_ROLES:
            new_messages.append(message)
            continue
        new = map_strings(message, rewrite, skip=_NOT_SHOWN)
        changed = changed or new is not message
        new_messages.append(new)
    return {**body, "messages": new_messages if changed else messages}


def assistant_texts(body: Mapping[str, Any]) -> set[str]:
    """Every text `map_assistant_text(body, rewrite)` would hand to `rewrite`, collected without
    rebuilding anything: one walk with a stack of its own (no recursion limit), what the masking
    outlet scans."""
    texts: set[str] = set()
    messages = body.get("messages")
    if not isinstance(messages, list):
        return texts
    stack: list[Any] = [
        message
        for message in messages
        if isinstance(message, Mapping) and message.get("role") in _SHOWN_ROLES
    ]
    add, push, pop = texts.add, stack.append, stack.pop
    while stack:
        container = pop()
        kind = type(container)
        if kind is list or (kind is not dict and isinstance(container, list)):
            children: list[Any] = container
        else:
            children = [child for key, child in container.items() if key not in _NOT_SHOWN]
        for child in children:
            kind = type(child)
            if kind is str:
                add(child)
            elif kind is dict or kind is list:
                push(child)
            elif isinstance(child, str):
                add(child)
            elif isinstance(child, (list, Mapping)):
                push(child)
    return texts
