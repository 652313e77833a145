"""The hash chain: one identity for every point of a conversation (DESIGN.md §4).

Domain module: pure, no I/O, standard library only.

``invariant_hash(role, text, file_ids)`` identifies what a message means; ``cumulative_hash(invariant,
parent)`` identifies a conversation prefix, so an edit or a regeneration at position k changes every
cumulative hash from k on and none before. Both are hex SHA-256 digests.

Normalisation, applied before hashing so that the inlet (which sees Open WebUI's decorated messages)
and the stored shadow (which keeps them clean) agree:

1. Line endings: CRLF and CR become LF.
2. Decorations are removed, each with the whitespace that follows it: ECHO's own injected blocks
   ``<environnement_contexte>…</environnement_contexte>``, ``<smart_context …>…</smart_context>``,
   ``<echo_summary …>…</echo_summary>`` and ``<echo_memories …>…</echo_memories>`` wherever they
   are, and the ``<attached_files>…</attached_files>`` block that Open WebUI puts before a user
   message's text.
3. Unicode NFC. Steps 2 and 3 repeat until nothing changes (so normalising twice is normalising once);
   then trailing whitespace at the end of the text is stripped (leading and inner
   whitespace are kept: indentation carries meaning in code).
4. The role is stripped and lower-cased.
5. File ids are de-duplicated and sorted; empty ids are dropped.

Encoding: every field is length-prefixed (8-byte big-endian length, then UTF-8 bytes) behind a
domain tag of its own, so ("a", "bc") and ("ab", "c") never collide and an invariant hash can never
equal a cumulative one. The genesis parent (``None``) is a distinct marker byte, not an empty string.

Tool calls (``invariant_hash(..., tools=message_tools(message))``): an assistant message's
``tool_calls`` and a tool result's ``tool_call_id`` are part of its meaning, so two messages with the
same text and other calls (or answering another call) differ. ``message_tools`` renders them
canonically: each call's id, function name and arguments, the arguments parsed as JSON and dumped
again with sorted keys and no spaces (Open WebUI re-serialises the arguments text and drops every
other field of a call; it keeps the call id and the order of calls, between the outlet's ``output``
items and the next inlet's ``tool_calls`` alike). A message without either renders as "", and its
hash is what it was before tool calls were hashed: the rendering is an extra field of the payload,
present only when it is not empty.

``message_text(content)`` reads an Open WebUI / OpenAI message ``content``: a string as is; a multipart
list as its text parts in order, joined by "\\n", where an image part becomes ``[image sha256:<hex>]``,
the digest of its URL (for a pasted image, the whole ``data:`` URI, so two different images differ
while the hashed text stays short); other parts are ignored; ``None`` (or anything else) is "".

Both hashes are memoised per process (bounded LRU, sizes below): a chat's history comes again on every
call, and each filter of a combined hook call (`POST /hooks/inlet`) walks the same chain, so a message
is normalised and hashed once, and each later walk costs a dictionary lookup per message.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ChainLink",
    "Divergence",
    "build_chain",
    "common_prefix_length",
    "compare",
    "cumulative_hash",
    "invariant_hash",
    "message_file_ids",
    "message_text",
    "message_tools",
    "normalize_text",
]

_INVARIANT_TAG = b"echo.domain.chain.invariant.v1\x00"
_CUMULATIVE_TAG = b"echo.domain.chain.cumulative.v1\x00"
_GENESIS = b"\x00"
_HAS_PARENT = b"\x01"
_TOOLS = b"\x02"
# Memo sizes: the invariant memo keeps each message's text alive (about 1 KB on average: 16 MB at
# most), enough for the hot chats of a replica; a cumulative entry is two digests (about 300 bytes).
_INVARIANT_MEMO = 16384
_CUMULATIVE_MEMO = 65536

_ECHO_BLOCK = re.compile(
    r"<(environnement_contexte|smart_context|echo_summary|echo_memories)\b[^>]*?(?:/>|>.*?</\1\s*>)\s*",
    re.DOTALL,
)
_ATTACHED_FILES_PREFIX = re.compile(r"\A\s*<attached_files\b[^>]*>.*?</attached_files\s*>\s*", re.DOTALL)
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True)
class ChainLink:
    """One message of a conversation, placed on the chain."""

    index: int
    role: str
    invariant: str
    cumulative: str
    message_id: str | None


@dataclass(frozen=True)
class Divergence:
    """How a current chain relates to a stored one.

    ``common`` links are shared; ``branched`` is true when the stored chain has links beyond them (an
    edit, a regeneration or a deletion earlier on: what was stored past ``common`` is stale); ``added``
    counts the current links past ``common``.
    """

    common: int
    branched: bool
    added: int = 0

    @property
    def identical(self) -> bool:
        return not self.branched and self.added == 0

    @property
    def extends(self) -> bool:
        """The current chain is the stored one plus new messages (an append)."""
        return not self.branched and self.added > 0


def normalize_text(text: str) -> str:
    """The text as hashed: LF line endings, NFC, decorations removed, no trailing whitespace."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    while True:  # to a fixed point, so that normalising twice changes nothing
        cleaned = _ATTACHED_FILES_PREFIX.sub("", _ECHO_BLOCK.sub("", text), count=1)
        cleaned = unicodedata.normalize("NFC", cleaned)
        if cleaned == text:
            return text.rstrip()
        text = cleaned


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate must hash, not raise


def invariant_hash(role: str, text: str, file_ids: Iterable[str] = (), *, tools: str = "") -> str:
    """Hex SHA-256 of a message's meaning: its normalised role, text and set of file ids, and its
    tool calls or tool call id as ``message_tools`` renders them ("" for none)."""
    if isinstance(file_ids, str):
        raise TypeError("file_ids is an iterable of ids, not one str")
    files = tuple(sorted({file_id for file_id in file_ids if file_id}))
    if type(role) is not str or type(text) is not str or type(tools) is not str:
        return _invariant(role, text, files, tools)  # not memoised: as it fails, or a str subclass
    return _memoised_invariant(role, text, files, tools)


def _invariant(role: str, text: str, files: tuple[str, ...], tools: str) -> str:
    payload = [_INVARIANT_TAG, _field(_utf8(role.strip().lower())), _field(_utf8(normalize_text(text)))]
    payload.append(len(files).to_bytes(8, "big"))
    payload.extend(_field(_utf8(file_id)) for file_id in files)
    if tools:
        payload.append(_TOOLS + _field(_utf8(tools)))
    return hashlib.sha256(b"".join(payload)).hexdigest()


_memoised_invariant = functools.lru_cache(maxsize=_INVARIANT_MEMO)(_invariant)


def _canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _canonical_arguments(arguments: object) -> str:
    """A call's arguments as compared: JSON text parsed and dumped canonically, other text as is."""
    if arguments is None:
        return ""
    try:
        return _canonical_json(json.loads(arguments) if isinstance(arguments, str) else arguments)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse: the text itself
        return arguments if isinstance(arguments, str) else repr(arguments)


def message_tools(message: Mapping[str, Any]) -> str:
    """The canonical rendering of a message's tool calls and tool call id ("" when it has neither)."""
    rendered: dict[str, Any] = {}
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        kept = []
        for call in calls:
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            call_id, name = call.get("id"), function.get("name")
            kept.append(
                {
                    "id": call_id if isinstance(call_id, str) else "",
                    "name": name if isinstance(name, str) else "",
                    "arguments": _canonical_arguments(function.get("arguments")),
                }
            )
        if kept:
            rendered["calls"] = kept
    call_id = message.get("tool_call_id")
    if isinstance(call_id, str) and call_id:
        rendered["tool_call_id"] = call_id
    return _canonical_json(rendered) if rendered else ""


def _check_digest(name: str, value: str) -> bytes:
    digest = None
    if type(value) is str and len(value) == 64:
        with contextlib.suppress(ValueError):  # not hex: refused below
            digest = bytes.fromhex(value)
    if digest is None or digest.hex() != value:  # 64 lowercase hex digits, nothing else
        raise ValueError(f"{name} must be a lowercase hex SHA-256 digest, got {value!r}")
    return digest


def cumulative_hash(invariant: str, parent: str | None) -> str:
    """Hex SHA-256 of a conversation prefix: this message's invariant after its parent's cumulative."""
    if type(invariant) is str and (parent is None or type(parent) is str):
        return _memoised_cumulative(invariant, parent)
    return _cumulative(invariant, parent)  # raises ValueError


def _cumulative(invariant: str, parent: str | None) -> str:
    payload = _CUMULATIVE_TAG + _field(_check_digest("invariant", invariant))
    if parent is None:
        payload += _GENESIS
    else:
        payload += _HAS_PARENT + _field(_check_digest("parent", parent))
    return hashlib.sha256(payload).hexdigest()


_memoised_cumulative = functools.lru_cache(maxsize=_CUMULATIVE_MEMO)(_cumulative)


def _image_token(part: Mapping[str, Any]) -> str | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str):
        return None
    return f"[image sha256:{hashlib.sha256(_utf8(url.strip())).hexdigest()}]"


def message_text(content: object) -> str:
    """What counts as the text of a message ``content`` (see the module docstring)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif kind == "image_url":
            token = _image_token(part)
            if token is not None:
                pieces.append(token)
    return "\n".join(pieces)


def message_file_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids in a message's ``files``: items ``{"id": …}`` or ``{"file": {"id": …}}`` (or bare ids).

    On the inlet, Open WebUI puts the current user message's files in ``body["files"]``, not on the
    message: a caller that hashes that message must merge them in first.
    """
    files = message.get("files")
    if not isinstance(files, list):
        return ()
    ids: list[str] = []
    for item in files:
        if isinstance(item, str):
            ids.append(item)
        elif isinstance(item, Mapping):
            nested = item.get("file")
            file_id = item.get("id")
            if file_id is None and isinstance(nested, Mapping):
                file_id = nested.get("id")
            if isinstance(file_id, str):
                ids.append(file_id)
    return tuple(ids)


def build_chain(messages: Sequence[Mapping[str, Any]]) -> tuple[ChainLink, ...]:
    """The chain of a list of Open WebUI messages (system messages included)."""
    links: list[ChainLink] = []
    parent: str | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        role = role.strip().lower() if isinstance(role, str) else ""
        invariant = invariant_hash(
            role,
            message_text(message.get("content")),
            message_file_ids(message),
            tools=message_tools(message),
        )
        parent = cumulative_hash(invariant, parent)
        message_id = message.get("id")
        links.append(
            ChainLink(index, role, invariant, parent, message_id if isinstance(message_id, str) else None)
        )
    return tuple(links)


def common_prefix_length(a: Sequence[ChainLink], b: Sequence[ChainLink]) -> int:
    """How many leading links two chains share, in O(log n) comparisons.

    Equal cumulative hashes at position i imply equal prefixes up to i, so "shared at i" is monotone
    and a binary search finds where it stops.
    """
    low, high = 0, min(len(a), len(b))  # the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if a[middle - 1].cumulative == b[middle - 1].cumulative:
            low = middle
        else:
            high = middle - 1
    return low


def compare(stored: Sequence[ChainLink], current: Sequence[ChainLink]) -> Divergence:
    """Whether ``current`` is ``stored`` (identical), extends it (append) or branched off it."""
    common = common_prefix_length(stored, current)
    return Divergence(common=common, branched=common < len(stored), added=len(current) - common)
