"""What the pipe's own inlet hands on to its ``/chat/completions`` call (``echo_ctx``); pure.

Open WebUI drops ``metadata`` (and ``files``) before it calls a pipe model, but keeps a top-level key
the pipe's inlet adds, on the follow-up calls after a tool call too (``../shared/notes/openwebui.md``).
The inlet puts there the chat, message, session and user ids, the files, the model the turn started
with (``##MODEL_ORIGIN##``) and the current user message's place on the chain as the inlet saw it.

Placeholders: ``##MODEL_ID##`` (the Gemini model called) and ``##MODEL_ORIGIN##`` (the model the
turn started with) in message texts, which the context filter writes in its ``<environnement_contexte>``
block (``echo.domain.aec``), are resolved by ``resolve_placeholders``; a quoted one (``"##MODEL_ID##"``, as
the
block writes it) becomes a YAML double-quoted scalar (``echo.domain.aec.quoted``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.domain import aec, bodies
from echo.domain.shadow import points

__all__ = ["ECHO_CTX_KEY", "MODEL_ID", "MODEL_ORIGIN", "EchoContext", "from_inlet", "resolve_placeholders"]

ECHO_CTX_KEY = "echo_ctx"
MODEL_ID = aec.MODEL_ID_PLACEHOLDER
MODEL_ORIGIN = aec.MODEL_ORIGIN_PLACEHOLDER
_HEX = re.compile(r"[0-9a-f]{64}")
_TEXT_FIELDS = ("chat_id", "user_id", "user_message_id", "message_id", "session_id", "task", "model")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class EchoContext:
    """The pipe inlet's ``echo_ctx``; every field may be absent (a plain API call has no inlet)."""

    chat_id: str | None = None
    user_id: str | None = None
    user_message_id: str | None = None
    message_id: str | None = None
    session_id: str | None = None
    task: str | None = None
    model: str | None = None
    files: tuple[Mapping[str, Any], ...] = ()
    current: points.CurrentMessage | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: getattr(self, name) for name in _TEXT_FIELDS if getattr(self, name)}
        if self.files:
            data["files"] = [dict(item) for item in self.files]
        if self.current is not None:
            data["user_position"] = self.current.position
            data["user_invariant"] = self.current.invariant
        return data

    @classmethod
    def from_json(cls, value: object) -> EchoContext:
        """Read an ``echo_ctx`` leniently: a field of the wrong type is treated as absent."""
        if not isinstance(value, Mapping):
            return cls()
        files = value.get("files")
        kept = tuple(item for item in files if isinstance(item, Mapping)) if isinstance(files, list) else ()
        position, invariant = value.get("user_position"), value.get("user_invariant")
        current = None
        if (
            isinstance(position, int)
            and not isinstance(position, bool)
            and position >= 0
            and isinstance(invariant, str)
            and _HEX.fullmatch(invariant)
        ):
            current = points.CurrentMessage(position, invariant)
        texts = {name: _text(value.get(name)) for name in _TEXT_FIELDS}
        return cls(files=kept, current=current, **texts)


def from_inlet(body: Mapping[str, Any], user: Mapping[str, Any] | None) -> EchoContext:
    """The ``echo_ctx`` of an inlet body (with ``metadata``) as the pipe's inlet sees it; its user is
    ``user``, the object Open WebUI attached to the call (``echo.domain.bodies``). The pipe itself takes its
    user from Open WebUI again (``echo.entrypoints.http.pipe``): ``user_id`` here is only compared with it."""
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    model = metadata.get("model")
    origin = _text(model.get("id")) if isinstance(model, Mapping) else _text(model)
    files = body.get("files") if isinstance(body.get("files"), list) else metadata.get("files")
    messages = body.get("messages")
    current = None
    if isinstance(messages, list):
        found = [m for m in messages if isinstance(m, Mapping) and m.get("role") not in points.SYSTEM_ROLES]
        if found and found[-1].get("role") == "user":
            current = points.CurrentMessage(len(found) - 1, points.message_invariant(found[-1]))
    return EchoContext(
        chat_id=_text(metadata.get("chat_id")) or _text(body.get("chat_id")),
        # The attached user (Open WebUI's), never `metadata.user_id`: a body may come from a browser.
        user_id=bodies.user_of(user),
        user_message_id=_text(metadata.get("user_message_id")),
        message_id=_text(metadata.get("message_id")),
        session_id=_text(metadata.get("session_id")),
        task=_text(metadata.get("task")),
        model=origin or _text(body.get("model")),
        files=tuple(
            {key: item[key] for key in ("type", "id", "name") if key in item}
            for item in (files if isinstance(files, list) else [])
            if isinstance(item, Mapping)
        ),
        current=current,
    )


def _resolve(text: str, values: Mapping[str, str]) -> str:
    for placeholder, value in values.items():
        # In the AEC block the placeholder stands quoted in YAML: the value goes in as a YAML scalar of
        # its own (a custom model id may hold quotes); anywhere else it is written as it is.
        text = text.replace(f'"{placeholder}"', aec.quoted(value)).replace(placeholder, value)
    return text


def resolve_placeholders(
    messages: Sequence[Mapping[str, Any]], *, model_id: str, model_origin: str
) -> list[Mapping[str, Any]]:
    """``messages`` with ``##MODEL_ID##`` and ``##MODEL_ORIGIN##`` replaced in their texts (messages
    without a placeholder are returned as they are, not copied)."""
    values = {MODEL_ID: model_id, MODEL_ORIGIN: model_origin}
    resolved: list[Mapping[str, Any]] = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str) and "##MODEL_" in content:
            message = {**message, "content": _resolve(content, values)}
        elif isinstance(content, list) and any(
            isinstance(p, Mapping) and isinstance(p.get("text"), str) and "##MODEL_" in p["text"]
            for p in content
        ):
            parts = [
                {**p, "text": _resolve(p["text"], values)}
                if isinstance(p, Mapping) and isinstance(p.get("text"), str)
                else p
                for p in content
            ]
            message = {**message, "content": parts}
        resolved.append(message)
    return resolved
