"""What each message of a request is to compression, and what it costs; pure, no I/O.

Every message is of one ``Kind``:

- ``SYSTEM``: role ``system`` or ``developer``. Never summarised, trimmed or dropped; it stays
  where it stands.
- ``PROTECTED``: a block injected beside the conversation (a referenced chat…), marked by
  ``metadata.echo_protected`` (or seed 002's ``metadata.is_external_references``) or by text that
  opens with an ``<echo_reference`` block. Never trimmed, folded, dropped or summarised.
- ``INJECTED``: an injected summary that came back (``fence.is_injected_summary``): left out, the
  summary valid now takes its place.
- ``TURN``: user, assistant and tool messages, the conversation itself. A summary covers a prefix
  of the turns, and the chain that identifies it is the chain of the turns alone: system messages
  are not on it, so a system prompt whose date changes daily does not invalidate summaries.

A message costs ``echo.domain.tokens.MESSAGE_OVERHEAD_TOKENS`` plus its text parts (images are not
counted, as in seed 002) plus the names and arguments of its tool calls, each text priced by a
``TokenCounter`` (``echo.domain.tokens.estimate_tokens`` unless the caller passes another).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from echo.domain import chain, tokens
from echo.domain.compression import fence

__all__ = [
    "SYSTEM_ROLES",
    "TOOL_ROLES",
    "Kind",
    "TokenCounter",
    "Turns",
    "content_text",
    "conversation_turns",
    "kind_of",
    "kinds_of",
    "last_user_turn",
    "message_tokens",
    "role_of",
    "tool_calls_of",
    "turn_positions",
]

TokenCounter = Callable[[str], int]
"""Prices a text in tokens."""

SYSTEM_ROLES = frozenset({"system", "developer"})
_PLAIN_ROLES = frozenset({"user", "assistant", "system", "developer", "tool"})  # role_of's own answers
TOOL_ROLES = frozenset({"tool", "function"})
_PROTECTED_FLAGS = ("echo_protected", "is_external_references")
_PROTECTED_PREFIX = "<echo_reference"


class Kind(enum.Enum):
    """What a message is to compression (see the module docstring)."""

    SYSTEM = "system"
    PROTECTED = "protected"
    INJECTED = "injected"
    TURN = "turn"


def role_of(message: Mapping[str, Any]) -> str:
    """The role, stripped and lower-cased ("" when missing); ``function`` reads as ``tool``."""
    role = message.get("role")
    if type(role) is str and role in _PLAIN_ROLES:  # the common case, already normal
        return role
    role = role.strip().lower() if isinstance(role, str) else ""
    return "tool" if role == "function" else role


content_text = tokens.content_text
"""The text of a ``content``: a string, or its text parts joined by newlines (images left out)."""


def kind_of(message: Mapping[str, Any]) -> Kind:
    """The kind of one message."""
    if role_of(message) in SYSTEM_ROLES:
        return Kind.SYSTEM
    metadata = message.get("metadata")
    if isinstance(metadata, Mapping) and any(metadata.get(flag) for flag in _PROTECTED_FLAGS):
        return Kind.PROTECTED
    text = content_text(message.get("content"))
    if text.lstrip().startswith(_PROTECTED_PREFIX):
        return Kind.PROTECTED
    if fence.is_injected_summary(text):
        return Kind.INJECTED
    return Kind.TURN


def kinds_of(messages: Sequence[Mapping[str, Any]]) -> tuple[Kind, ...]:
    """The kind of every message, in order."""
    return tuple(kind_of(message) for message in messages)


def tool_calls_of(message: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The tool calls an assistant message makes (OpenAI ``tool_calls``), well-formed ones only."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls or role_of(message) != "assistant":
        return ()
    return tuple(call for call in calls if isinstance(call, Mapping))


def _as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def message_tokens(message: Mapping[str, Any], counter: TokenCounter = tokens.estimate_tokens) -> int:
    """What one message costs in a request (see the module docstring)."""
    total = tokens.MESSAGE_OVERHEAD_TOKENS + counter(content_text(message.get("content")))
    for call in tool_calls_of(message):
        function = call.get("function")
        if isinstance(function, Mapping):
            total += counter(_as_text(function.get("name"))) + counter(_as_text(function.get("arguments")))
    return total


@dataclass(frozen=True)
class Turns:
    """The turns of a request: where each stands in the message list, and their chain.

    ``links[i]`` is turn ``i`` on the chain (``links[i].index == i``); ``positions[i]`` is its index
    in the message list. A summary that covers ``n`` turns is keyed by ``hashes[n - 1]``.
    """

    positions: tuple[int, ...]
    links: tuple[chain.ChainLink, ...]
    hashes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The cumulative hash of every prefix of the turns: the keys to look summaries up with."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hashes", tuple(link.cumulative for link in self.links))

    def __len__(self) -> int:
        return len(self.positions)


def conversation_turns(messages: Sequence[Mapping[str, Any]], kinds: Sequence[Kind] | None = None) -> Turns:
    """The turns of ``messages`` and their chain.

    On the inlet, Open WebUI puts the current user message's files in ``body["files"]``: merge them
    into that message first, or its hash will not match the one the outlet records.
    """
    positions = turn_positions(kinds_of(messages) if kinds is None else kinds)
    return Turns(positions, chain.build_chain([messages[index] for index in positions]))


def turn_positions(kinds: Sequence[Kind]) -> tuple[int, ...]:
    """Where the turns stand in the message list whose kinds are ``kinds`` (no hashing)."""
    return tuple(index for index, kind in enumerate(kinds) if kind is Kind.TURN)


def last_user_turn(messages: Sequence[Mapping[str, Any]], positions: Sequence[int]) -> int | None:
    """The turn index of the last user message (turn ``i`` stands at ``positions[i]``), or None."""
    for turn in range(len(positions) - 1, -1, -1):
        if role_of(messages[positions[turn]]) == "user":
            return turn
    return None
