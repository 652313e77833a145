"""Gemini contents as plain data, and their stored form (the skeleton); pure.

``ContentDict`` / ``PartDict`` are the Gemini API's ``Content`` and ``Part`` in the SDK's snake_case
field names (``thought_signature`` bytes, ``inline_data.data`` bytes): ``echo.adapters.llm.gemini_chat`` turns
them into the SDK's types and back, ``echo.domain.openai_to_gemini`` builds them from an OpenAI body.

A stored rich form is a *skeleton*: the same list of contents as JSON, where

- a heavy part (inline bytes, or text of ``PAYLOAD_MIN_CHARS`` or more) is ``{"ref": <payload hash>}``,
  its content stored once per user in ``rich_payloads`` (``Payload``);
- a function call is ``{"call": i}`` and a function result ``{"result": i}``: entry ``i`` of the
  point's tool journal (``JournalEntry``), which holds the call's name, arguments and result;
- a thought signature is not in the skeleton at all: ``Signature`` rows keep it, bytes exact, at the
  (content index, part index) it came on.

``dehydrate`` makes a skeleton, ``hydrate`` makes the contents back; ``UnreadableShadow`` says a stored
form cannot be rebuilt (a missing payload or journal entry, a malformed skeleton).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from echo.errors import EchoError

__all__ = [
    "PAYLOAD_MIN_CHARS",
    "BlobDict",
    "ContentDict",
    "Dehydrated",
    "FunctionCallDict",
    "FunctionResponseDict",
    "JournalEntry",
    "PartDict",
    "Payload",
    "Signature",
    "UnreadableShadow",
    "dehydrate",
    "hydrate",
    "payload_hash",
]

PAYLOAD_MIN_CHARS = 2048
"""Text parts this long or longer are stored once as payloads (file texts, injected blocks)."""

Executor = Literal["openwebui", "echo"]


class BlobDict(TypedDict):
    """Inline bytes of a part (Gemini ``Blob``)."""

    mime_type: str
    data: bytes


class FunctionCallDict(TypedDict):
    """A call the model asks for (Gemini ``FunctionCall``); ``args`` in the order the model wrote them."""

    name: str
    args: dict[str, Any]


class FunctionResponseDict(TypedDict):
    """The result of a call (Gemini ``FunctionResponse``); ``response`` is a JSON object."""

    name: str
    response: dict[str, Any]


class PartDict(TypedDict, total=False):
    """One part of a content (Gemini ``Part``)."""

    text: str
    thought: bool
    thought_signature: bytes
    inline_data: BlobDict
    function_call: FunctionCallDict
    function_response: FunctionResponseDict


class ContentDict(TypedDict):
    """One turn (Gemini ``Content``): role ``user`` or ``model`` and its parts, in order."""

    role: str
    parts: list[PartDict]


class UnreadableShadow(EchoError):
    """A stored rich form that cannot be rebuilt; the message is converted as Open WebUI sent it."""


@dataclass(frozen=True)
class Payload:
    """Heavy content stored once per user under ``hash`` (see ``payload_hash``)."""

    hash: str
    kind: Literal["inline_data", "text"]
    mime_type: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class Signature:
    """A thought signature, bytes exact, and the part it belongs on."""

    content_index: int
    part_index: int
    signature: bytes = field(repr=False)


@dataclass(frozen=True)
class JournalEntry:
    """One function call of a model turn. ``call_id``: the id Open WebUI saw (``call_…``) or, for a
    tool ECHO ran itself, the id ECHO gave it; ``response`` is None for a call Open WebUI runs."""

    call_index: int
    call_id: str
    name: str
    arguments: Mapping[str, Any]
    executor: Executor
    response: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Dehydrated:
    """A list of contents in its stored form."""

    skeleton: list[dict[str, Any]]
    payloads: tuple[Payload, ...]
    signatures: tuple[Signature, ...]

    @property
    def refs(self) -> tuple[str, ...]:
        return tuple(payload.hash for payload in self.payloads)


def payload_hash(kind: str, mime_type: str, data: bytes) -> str:
    """Hex SHA-256 of a payload: kind, MIME type and bytes, each length-prefixed."""
    digest = hashlib.sha256(b"echo.domain.shadow.payload.v1\x00")
    for piece in (kind.encode(), mime_type.encode(), data):
        digest.update(len(piece).to_bytes(8, "big"))
        digest.update(piece)
    return digest.hexdigest()


def _payload(kind: Literal["inline_data", "text"], mime_type: str, data: bytes) -> Payload:
    return Payload(payload_hash(kind, mime_type, data), kind, mime_type, data)


def dehydrate(
    contents: Sequence[ContentDict],
    *,
    calls: Mapping[tuple[int, int], int] | None = None,
    results: Mapping[tuple[int, int], int] | None = None,
) -> Dehydrated:
    """The stored form of ``contents``. ``calls`` / ``results`` map (content, part) positions of
    function calls and results to their journal index; a call or result not mapped is kept inline."""
    calls, results = calls or {}, results or {}
    skeleton: list[dict[str, Any]] = []
    payloads: dict[str, Payload] = {}
    signatures: list[Signature] = []
    for ci, content in enumerate(contents):
        parts: list[dict[str, Any]] = []
        for pi, part in enumerate(content["parts"]):
            signature = part.get("thought_signature")
            if signature:
                signatures.append(Signature(ci, pi, bytes(signature)))
            parts.append(_dehydrate_part(part, calls.get((ci, pi)), results.get((ci, pi)), payloads))
        skeleton.append({"role": content["role"], "parts": parts})
    return Dehydrated(skeleton, tuple(payloads.values()), tuple(signatures))


def _dehydrate_part(
    part: PartDict, call: int | None, result: int | None, payloads: dict[str, Payload]
) -> dict[str, Any]:
    if call is not None and "function_call" in part:
        return {"call": call}
    if result is not None and "function_response" in part:
        return {"result": result}
    stored: dict[str, Any] = {}
    if "inline_data" in part:
        blob = part["inline_data"]
        payload = _payload("inline_data", blob["mime_type"], bytes(blob["data"]))
        payloads[payload.hash] = payload
        stored["ref"] = payload.hash
    elif "text" in part and len(part["text"]) >= PAYLOAD_MIN_CHARS:
        payload = _payload("text", "text/plain", part["text"].encode("utf-8", "surrogatepass"))
        payloads[payload.hash] = payload
        stored["ref"] = payload.hash
    elif "text" in part:
        stored["text"] = part["text"]
    elif "function_call" in part:
        stored["function_call"] = dict(part["function_call"])
    elif "function_response" in part:
        stored["function_response"] = dict(part["function_response"])
    if part.get("thought"):
        stored["thought"] = True
    return stored


def hydrate(
    skeleton: Any,
    *,
    payloads: Mapping[str, Payload],
    signatures: Sequence[Signature] = (),
    journal: Sequence[JournalEntry] = (),
) -> list[ContentDict]:
    """The contents a skeleton stands for, signatures back on their parts; ``UnreadableShadow`` when
    anything it names is missing or it is not a skeleton."""
    if not isinstance(skeleton, list):
        raise UnreadableShadow("the stored form is not a list of contents")
    by_index = {entry.call_index: entry for entry in journal} if journal else {}
    contents: list[ContentDict] = []
    for ci, content in enumerate(skeleton):
        # The skeleton comes from JSON: plain dicts and lists (dict checks are much cheaper than ABCs).
        if not isinstance(content, dict) or content.get("role") not in ("user", "model"):
            raise UnreadableShadow(f"content {ci}: expected a role user or model")
        stored_parts = content.get("parts")
        if not isinstance(stored_parts, list):
            raise UnreadableShadow(f"content {ci}: parts is not a list")
        parts = [_hydrate_part(stored, payloads, by_index, ci, pi) for pi, stored in enumerate(stored_parts)]
        contents.append({"role": content["role"], "parts": parts})
    for signature in signatures:
        try:
            part = contents[signature.content_index]["parts"][signature.part_index]
        except IndexError:
            raise UnreadableShadow(
                f"signature for content {signature.content_index} part {signature.part_index}: no such part"
            ) from None
        part["thought_signature"] = signature.signature
    return contents


def _hydrate_part(
    stored: Any, payloads: Mapping[str, Payload], journal: Mapping[int, JournalEntry], ci: int, pi: int
) -> PartDict:
    if not isinstance(stored, dict):
        raise UnreadableShadow(f"content {ci} part {pi}: not an object")
    text = stored.get("text")
    if isinstance(text, str):  # the common case first
        part: PartDict = {"text": text}
    elif "ref" in stored:
        payload = payloads.get(stored["ref"])
        if payload is None:
            raise UnreadableShadow(f"content {ci} part {pi}: payload {stored['ref']!r} is missing")
        if payload.kind == "inline_data":
            part = {"inline_data": {"mime_type": payload.mime_type, "data": payload.data}}
        else:
            part = {"text": payload.data.decode("utf-8", "surrogatepass")}
    elif "call" in stored or "result" in stored:
        index = stored.get("call", stored.get("result"))
        entry = journal.get(index) if isinstance(index, int) else None
        if entry is None:
            raise UnreadableShadow(f"content {ci} part {pi}: tool journal entry {index!r} is missing")
        if "call" in stored:
            part = {"function_call": {"name": entry.name, "args": dict(entry.arguments)}}
        else:
            if entry.response is None:
                raise UnreadableShadow(f"content {ci} part {pi}: tool journal entry {index} has no result")
            part = {"function_response": {"name": entry.name, "response": dict(entry.response)}}
    elif isinstance(stored.get("function_call"), dict):
        call = stored["function_call"]
        part = {"function_call": {"name": str(call.get("name", "")), "args": dict(call.get("args") or {})}}
    elif isinstance(stored.get("function_response"), dict):
        response = stored["function_response"]
        part = {
            "function_response": {
                "name": str(response.get("name", "")),
                "response": dict(response.get("response") or {}),
            }
        }
    else:
        raise UnreadableShadow(f"content {ci} part {pi}: unknown part {sorted(stored)!r}")
    if stored.get("thought"):
        part["thought"] = True
    return part
