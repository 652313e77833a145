"""``_clean_messages`` of seed 000: what a distillation reads of a window. Pure.

Kept: each message's role, its text, the names of the files attached to it, and the day it was sent
(Open WebUI's ``timestamp``, unix seconds, or milliseconds, as its messages carry it), so that a
fact keeps its date ("yesterday" is a day the window can name). Dropped: ids, Open WebUI metadata
and branch ids (never read), system messages, ECHO's own injected blocks
(summaries, references, recalled memories, the AEC block, smart-context blocks), Open WebUI's
``<attached_files>`` prefix, reasoning and tool-call ``<details>`` blocks, images, tool results and
tool-call-only assistant turns (tool noise). Whitespace runs are collapsed. A message with nothing left
is dropped. A message longer than ``MAX_MESSAGE_CHARS`` keeps its head and its tail around a marker that
says how much was cut, so one pasted log cannot blow the distillation's input. The rendering is one
paragraph per message, ``User: …`` / ``Assistant: …`` — ``User (8 May 2023): …`` when the message
is dated (the day in UTC, English month names: ``day_of``) — which is about 8× fewer tokens
than ``str(messages)`` on Open WebUI bodies (``bench/memory.py``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["MAX_MESSAGE_CHARS", "CleanMessage", "clean_messages", "clean_text", "day_of", "render"]

MAX_MESSAGE_CHARS = 6000
_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_MILLISECONDS = 10**11  # a timestamp above this is in milliseconds (year 5138 in seconds)

_ROLES = {"user": "User", "assistant": "Assistant"}
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_BLOCKS = re.compile(
    r"<(environnement_contexte|smart_context|echo_summary|echo_reference|echo_memories|attached_files)\b"
    r"[^>]*?(?:/>|>.*?</\1\s*>)",
    re.DOTALL | re.IGNORECASE,
)
_DETAILS = re.compile(
    r"<details\b[^>]*\btype=\"(?:reasoning|tool_calls|code_interpreter)\"[^>]*>.*?</details\s*>",
    re.DOTALL | re.IGNORECASE,
)
_IMAGE_MARKDOWN = re.compile(r"!\[[^\]]*\]\((?:data:[^)]*|[^)\s]*)\)")
_DATA_URI = re.compile(r"data:[a-z]+/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]{64,}", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\f\v]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


@dataclass(frozen=True)
class CleanMessage:
    role: str  # "user" or "assistant"
    text: str
    files: tuple[str, ...] = ()
    sent_at: float | None = None  # unix seconds; None: not dated


def day_of(seconds: float) -> str:
    """The day of a unix time, UTC, as the window and the facts write it: ``8 May 2023``."""
    at = datetime.fromtimestamp(seconds, UTC)
    return f"{at.day} {_MONTH_NAMES[at.month - 1]} {at.year}"


def _sent_at(message: Mapping[str, Any]) -> float | None:
    value = message.get("timestamp")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    seconds = value / 1000 if value > _MILLISECONDS else float(value)
    return seconds if 0 < seconds < _MILLISECONDS else None


def clean_text(text: str) -> str:
    """``text`` without injected blocks, reasoning/tool details, images and redundant whitespace."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _DETAILS.sub(" ", _BLOCKS.sub(" ", text))
    text = _DATA_URI.sub(" ", _IMAGE_MARKDOWN.sub(" ", text))
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") in _TEXT_PARTS
            and isinstance(part.get("text"), str)
        )
    return ""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _file_names(message: Mapping[str, Any], names: Mapping[str, str]) -> tuple[str, ...]:
    found: list[str] = []
    files = message.get("files")
    for entry in files if isinstance(files, list) else ():
        name: object = None
        if isinstance(entry, str):  # the stored form keeps ids only: look the name up
            name = names.get(entry)
        elif isinstance(entry, Mapping):
            file = _mapping(entry.get("file"))
            meta = _mapping(file.get("meta"))
            name = (
                entry.get("name")
                or file.get("filename")
                or meta.get("name")
                or names.get(str(entry.get("id")))
            )
        if isinstance(name, str) and name.strip() and name.strip() not in found:
            found.append(name.strip())
    return tuple(found)


def clean_messages(
    messages: Sequence[Mapping[str, Any]], file_names: Mapping[str, str] | None = None
) -> list[CleanMessage]:
    """The messages a distillation reads, in order. ``file_names``: file id -> name, for messages
    that carry file ids only (the conversation store's form)."""
    names = file_names or {}
    cleaned: list[CleanMessage] = []
    for message in messages:
        role = message.get("role")
        role = role.strip().lower() if isinstance(role, str) else ""
        if role not in _ROLES:
            continue  # system, developer, tool results
        text = _bounded(clean_text(_content_text(message.get("content"))))
        files = _file_names(message, names)
        if text or files:
            cleaned.append(CleanMessage(role, text, files, _sent_at(message)))
    return cleaned


def _bounded(text: str) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    head, tail = MAX_MESSAGE_CHARS * 2 // 3, MAX_MESSAGE_CHARS // 3
    return f"{text[:head]} [… {len(text) - head - tail} characters cut …] {text[-tail:]}"


def render(messages: Sequence[CleanMessage]) -> str:
    """One paragraph per message: ``User: text`` (``User (8 May 2023): text`` when dated) then
    ``[files: a.pdf, b.png]`` when it had some."""
    paragraphs = []
    for message in messages:
        dated = f" ({day_of(message.sent_at)})" if message.sent_at is not None else ""
        line = f"{_ROLES[message.role]}{dated}: {message.text}".rstrip()
        if message.files:
            line += f"\n[files: {', '.join(message.files)}]"
        paragraphs.append(line)
    return "\n\n".join(paragraphs)
