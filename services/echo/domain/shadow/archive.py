"""What the pipe stores of a turn; pure.

- Before the Gemini call, ``user_record``: the current user message's point, with its rich form when
  Open WebUI will not send it back whole — the text the pipe received differs from the one later
  turns hash (Open WebUI's RAG template wrapped it around the file texts), it holds injected blocks
  the chain leaves out (``<smart_context>``), or parts a filter added (native file parts). The
  per-turn blocks (``<environnement_contexte>``, ``<echo_memories>``, ``<echo_summary>``) are not
  kept: the filters write fresh ones every turn.
- At the end of the call, ``model_record``: the assistant message Open WebUI will store for this call
  (the text streamed, masked, and the tool calls it was given), keyed by its cumulative hash after the
  history's last point, with everything produced during the call: the model steps with their thought
  signatures, and ECHO's own tool calls with their results (journaled).

Texts stored from the model are masked (``echo.domain.masking``) as the stream was: the shadow never keeps a
secret that Open WebUI was not given.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.domain import chain, masking
from echo.domain.shadow import parts as parts_module
from echo.domain.shadow.parts import ContentDict, Dehydrated, JournalEntry, PartDict
from echo.domain.shadow.points import Point

__all__ = ["PointRecord", "added_parts", "model_record", "strip_per_turn_blocks", "user_record"]

_PER_TURN_BLOCK = re.compile(
    r"<(environnement_contexte|echo_summary|echo_memories)\b[^>]*?(?:/>|>.*?</\1\s*>)\s*", re.DOTALL
)


@dataclass(frozen=True)
class PointRecord:
    """One point to store: its place on the chain and, when it has one, its rich form."""

    cumulative: str
    position: int
    parent: str | None
    invariant: str
    role: str
    chat_id: str
    model: str | None
    form: Dehydrated | None = None
    journal: tuple[JournalEntry, ...] = ()


def strip_per_turn_blocks(text: str) -> str:
    """``text`` without the blocks the filters write fresh every turn."""
    return _PER_TURN_BLOCK.sub("", text) if "<" in text else text


def _plain(text: str) -> str:
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n")).rstrip()


_KEPT_PART_TYPES = frozenset({"text", "input_text", "output_text", "image_url"})


def added_parts(content: object) -> bool:
    """Whether a content holds parts Open WebUI does not store with the message (a filter's native
    file, audio or video parts: anything but text and the images the user pasted)."""
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") not in _KEPT_PART_TYPES for part in content
    )


def user_record(
    point: Point,
    *,
    received_invariant: str,
    received_text: str,
    parts: Sequence[PartDict],
    chat_id: str,
    model: str | None,
    added: bool = False,
) -> PointRecord:
    """The current user message's point. ``received_*``: the message as the pipe got it;
    ``parts``: its Gemini parts with the per-turn blocks removed; ``added``: it holds parts a filter
    added (``added_parts``)."""
    kept = strip_per_turn_blocks(received_text)
    rich = added or received_invariant != point.invariant or chain.normalize_text(kept) != _plain(kept)
    form = parts_module.dehydrate([{"role": "user", "parts": list(parts)}]) if rich and parts else None
    return PointRecord(
        point.cumulative, point.position, point.parent, point.invariant, "user", chat_id, model, form
    )


def _masked(text: str) -> str:
    return masking.mask_secrets(text).text if masking.may_hold_secret(text) else text


def _masked_contents(contents: Sequence[ContentDict]) -> list[ContentDict]:
    masked: list[ContentDict] = []
    for content in contents:
        new_parts: list[PartDict] = []
        for part in content["parts"]:
            if content["role"] == "model" and "text" in part:
                part = {**part, "text": _masked(part["text"])}
            new_parts.append(part)
        masked.append({"role": content["role"], "parts": new_parts})
    return masked


def model_record(
    last: Point | None,
    *,
    contents: Sequence[ContentDict],
    journal: Sequence[JournalEntry],
    calls: Mapping[tuple[int, int], int],
    results: Mapping[tuple[int, int], int],
    answer_text: str,
    openwebui_calls: Sequence[Mapping[str, Any]],
    chat_id: str,
    model: str | None,
) -> PointRecord:
    """The point of the assistant message this call answers with. ``answer_text``: the content as
    streamed to Open WebUI (masked); ``openwebui_calls``: the OpenAI tool calls it was given."""
    message: dict[str, Any] = {"role": "assistant", "content": answer_text}
    if openwebui_calls:
        message["tool_calls"] = list(openwebui_calls)
    invariant = chain.invariant_hash("assistant", answer_text, (), tools=chain.message_tools(message))
    parent = last.cumulative if last is not None else None
    position = last.position + 1 if last is not None else 0
    form = parts_module.dehydrate(_masked_contents(contents), calls=calls, results=results)
    return PointRecord(
        chain.cumulative_hash(invariant, parent),
        position,
        parent,
        invariant,
        "assistant",
        chat_id,
        model,
        form,
        tuple(journal),
    )
