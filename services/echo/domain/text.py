"""Text that PostgreSQL and Qdrant can keep. Domain module: pure, standard library only.

A Python ``str`` can hold two things the stores refuse: NUL (U+0000), which PostgreSQL text and
jsonb cannot hold, and lone surrogates (U+D800–U+DFFF), which UTF-8 cannot encode at all. Both arrive
in valid JSON (the escapes ``\\u0000`` and ``\\ud800``), in chat bodies and in model answers, and one of
them refused a whole write: the chat's messages, summaries and memories were never stored again.

``storable`` replaces each NUL and each lone surrogate by U+FFFD, the replacement character, rather
than removing it: the reader sees that something was there, and its neighbours are not glued
together (``"rm\\x00-rf"`` does not become ``"rm-rf"``). Two surrogates that form a pair (what a UTF-16
decoder that split a character leaves) become the one character they encode. Every other character
is kept where it was.

The store and the vector store apply it at their boundary (``echo.adapters.store.pool``: text parameters and
the JSON codec; ``echo.adapters.vectors.qdrant``: payloads and filters; ``echo.ports.embeddings``: the texts
sent to an embedder), so no call site can forget it. Hashes are not affected: ``echo.domain.chain`` hashes
the original text, so a message's identity is the same on every turn whether it was stored or not.

Clean text — nearly all of it — costs one scan and no copy: ``"\\x00" in s`` for ASCII text (an
ASCII ``str`` cannot hold a surrogate), one UTF-8 encode for the rest. JSON is fixed after
``json.dumps`` (``dumps``, ``storable_json``), not by walking the value in Python: one search for the
NUL escape and one UTF-8 encode, about 1 ms for 2 MB.

``encodable`` replaces lone surrogates only: what a UTF-8 answer cannot carry (Gemini's answer text,
``echo.adapters.llm.gemini_chat``); NUL, which UTF-8 and JSON carry, is left to the stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "REPLACEMENT",
    "dumps",
    "encodable",
    "encodable_value",
    "is_storable",
    "storable",
    "storable_json",
    "storable_value",
]

REPLACEMENT = "\ufffd"

# JSON text written without ensure_ascii keeps every character as it is, a lone surrogate included,
# but escapes NUL (and every control character): a NUL is the escape `\u0000`, found by its literal
# text (fast) and kept apart from the text `\u0000` (an escaped backslash, then "u0000") by the
# number of backslashes in front of it.
_NUL_ESCAPE = "\\u0000"
_ESCAPED_REPLACEMENT = "\\ufffd"


def is_storable(text: str) -> bool:
    """Whether ``text`` holds neither NUL nor a surrogate code point."""
    if text.isascii():
        return "\x00" not in text
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return b"\x00" not in encoded


def encodable(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, NUL kept: what UTF-8 can carry (an
    answer sent on as JSON), as opposed to what the stores keep (``storable``)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Pairs become their character, every lone surrogate one U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable(text: str) -> str:
    """``text`` with every NUL and lone surrogate replaced by U+FFFD (``text`` itself when clean)."""
    if is_storable(text):
        return text
    return encodable(text).replace("\x00", REPLACEMENT)


def _walk(value: Any, fix: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, dict):
        changed = False
        items = []
        for key, item in value.items():
            new_key = fix(key) if isinstance(key, str) else key
            new_item = _walk(item, fix)
            changed = changed or new_key is not key or new_item is not item
            items.append((new_key, new_item))
        return dict(items) if changed else value
    if isinstance(value, list | tuple):
        fixed = [_walk(item, fix) for item in value]
        if all(new is old for new, old in zip(fixed, value, strict=True)):
            return value
        return fixed if isinstance(value, list) else tuple(fixed)
    return value


def storable_value(value: Any) -> Any:
    """A JSON value (dicts, lists, tuples, strings, scalars) with every string made ``storable``, dict
    keys included; the value itself when nothing had to change. Two keys that become equal keep the
    last value."""
    return _walk(value, storable)


def encodable_value(value: Any) -> Any:
    """``storable_value`` with ``encodable``: lone surrogates replaced, NUL kept."""
    return _walk(value, encodable)


def _replace_nul_escapes(dumped: str) -> str:
    pieces: list[str] = []
    done = 0
    found = dumped.find(_NUL_ESCAPE)
    while found >= 0:
        run = found
        while run > 0 and dumped[run - 1] == "\\":
            run -= 1
        if (found - run) % 2 == 0:  # not itself escaped: a NUL
            pieces += (dumped[done:found], _ESCAPED_REPLACEMENT)
            done = found + len(_NUL_ESCAPE)
        found = dumped.find(_NUL_ESCAPE, found + len(_NUL_ESCAPE))
    return "".join(pieces) + dumped[done:] if pieces else dumped


def storable_json(dumped: str) -> str:
    """JSON text written by ``json.dumps(..., ensure_ascii=False)`` with each NUL escape and each lone
    surrogate replaced by U+FFFD (what ``storable_value`` would give, without walking the value in
    Python): one search for the escape and one UTF-8 encode when it is not ASCII, no copy when clean."""
    if _NUL_ESCAPE in dumped:
        dumped = _replace_nul_escapes(dumped)
    return encodable(dumped)


def dumps(value: Any) -> str:
    """``json.dumps(value)`` as PostgreSQL's json and jsonb accept it: characters kept as they are
    (no ``ensure_ascii``: a non-BMP character would be two surrogate escapes to check), each NUL and
    lone surrogate U+FFFD."""
    return storable_json(json.dumps(value, ensure_ascii=False))
