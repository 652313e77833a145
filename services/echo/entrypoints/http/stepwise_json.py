"""JSON read and written in bounded steps, so that a thread doing it lets the event loop run.

The C parser and encoder hold the GIL for a whole call: `json.loads` of a 32 MB body of a million
tiny messages holds it for one to three seconds, `json.dumps` of it for one, and no other thread (the
event loop least of all) runs meanwhile, whichever thread makes the call. Here each C call handles a
bounded piece and the structure around the pieces is walked in Python, whose interpreter hands the GIL
to a waiting thread every switch interval (5 ms). Both give exactly what `json.loads` / `json.dumps`
give, errors included (the same message at the same absolute position), at one to two times their CPU:

- `loads(text, decoder)`: a container that ends inside the current window of `STEP_CHARS` characters
  is read by the C scanner in one call; a larger one is opened here and its members are read one by
  one (a scalar is always read in one call: a long string costs its length, which no split shortens).
  A container that fails inside its window is opened too, so a malformed body is refused by this walk,
  with the position in the whole text. The windows wasted on containers larger than a window are
  bounded (`_WASTE_FACTOR` times the text); past that, containers are always opened. Nesting deeper
  than `MAX_DEPTH` containers opened here raises RecursionError, as the C parser does.
- `render(value)`: what `echo.entrypoints.http.wire.render_json` answers (compact UTF-8, ASCII with escapes
when
  a lone surrogate cannot be encoded). Runs of members whose size (values, plus string lengths / 256)
  stays within `STEP_NODES` are rendered in one C call; a larger member is opened. UTF-8 is encoded in
  pieces of about `STEP_CHARS` characters.

Use them on a worker thread for large bodies (`echo.entrypoints.http.wire`, `echo.entrypoints.http.runner`);
for a small
body the C functions on the loop are cheaper than the hop to a thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["MAX_DEPTH", "STEP_CHARS", "STEP_NODES", "cost", "loads", "render"]

STEP_CHARS = 64 * 1024  # about 2 ms of the densest JSON (empty objects) per C call
STEP_NODES = 4096  # what one C call renders at most (about 1 ms)
MAX_DEPTH = 1000  # containers opened here, as deep as the C parser follows
_WASTE_FACTOR = 4
_COOLDOWN = 16
_WHITESPACE = frozenset(" \t\n\r")
_STRING_WEIGHT = 256  # characters of a string that cost as much as one value to render
_FLAT_KEYS = 32  # a dict of at most this many texts and numbers is sized without a walk


# -- reading --------------------------------------------------------------------------------------


class _Reader:
    """One `loads` call: the text, the C scanner and the window it reads containers in."""

    def __init__(self, text: str, decoder: json.JSONDecoder) -> None:
        self.text = text
        # The C scanner the decoder made for itself (typeshed does not declare it).
        self.scan: Callable[[str, int], tuple[Any, int]] = getattr(decoder, "scan_once")  # noqa: B009
        self.window = ""
        self.window_at = 0
        self.wasted = 0
        self.waste_limit = _WASTE_FACTOR * len(text) + 4 * STEP_CHARS
        self.cooldown = 0  # members read one by one before a run is tried again

    def error(self, message: str, at: int) -> json.JSONDecodeError:
        return json.JSONDecodeError(message, self.text, at)

    def skip(self, at: int) -> int:
        text = self.text
        while at < len(text) and text[at] in _WHITESPACE:
            at += 1
        return at

    def scalar(self, at: int) -> tuple[Any, int]:
        """The string, number or literal at `at`, read from the whole text in one call."""
        try:
            found: tuple[Any, int] = self.scan(self.text, at)
        except StopIteration as stop:
            raise self.error("Expecting value", stop.value) from None
        return found

    def whole(self, at: int) -> tuple[Any, int] | None:
        """The container at `at`, read in one C call when it ends inside a window; else None."""
        if self.wasted > self.waste_limit:
            return None
        if not self.window_at <= at < self.window_at + len(self.window) - 1:
            self._slide(at)
        found = self._try(at)
        if found is None and self.window_at != at:  # it may only run past this window's end
            self._slide(at)
            found = self._try(at)
        if found is None:
            self.wasted += len(self.window)
        return found

    def run(self, at: int) -> tuple[list[Any], int] | None:
        """Members of a list from `at` to a comma inside the window, read in one C call as the
        array `[` + them + `]`, and where that comma is; None when no such run reads whole.

        The cut goes just before the window's last comma that follows what the first member ends
        with (`}` or `]`, else any comma). A cut inside a string or a nested container cannot read
        as a whole array (the string or the container stays open), and a run that reads whole ends
        where its last member really ends: the comma follows it in the text too."""
        if self.cooldown:
            self.cooldown -= 1
            return None
        if self.wasted > self.waste_limit:
            return None
        text = self.text
        stop = min(at + STEP_CHARS, len(text))
        opening = text[at]
        if opening in "[{":
            found = text.rfind("}," if opening == "{" else "],", at, stop)
            cut = found + 1
        else:
            found = text.rfind(",", at, stop)
            cut = found
        if found < 0 or cut <= at:
            return None
        candidate = "[" + text[at:cut] + "]"
        try:
            value, end = self.scan(candidate, 0)
        except (ValueError, StopIteration, RecursionError):
            end = -1
        if end != len(candidate) or type(value) is not list:
            self.wasted += len(candidate)
            self.cooldown = _COOLDOWN
            return None
        return value, cut

    def _slide(self, at: int) -> None:
        self.window_at, self.window = at, self.text[at : at + STEP_CHARS]

    def _try(self, at: int) -> tuple[Any, int] | None:
        try:
            value, end = self.scan(self.window, at - self.window_at)
        except (ValueError, StopIteration, RecursionError):  # the walk will say what is wrong, if anything
            return None
        return value, self.window_at + end  # a container ends at its bracket: nothing past the window


def loads(text: str, decoder: json.JSONDecoder | None = None) -> Any:
    """`decoder.decode(text)` (the standard decoder when None), in bounded steps (module docstring).

    The decoder's `parse_float`, `parse_int`, `parse_constant` and `strict` are honoured; object
    hooks are not (the walk builds plain dicts), so a decoder with one is refused.
    """
    decoder = decoder or json.JSONDecoder()
    if decoder.object_hook is not None or decoder.object_pairs_hook is not None:
        raise ValueError("stepwise_json.loads builds plain dicts: no object hooks")
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    reader = _Reader(text, decoder)
    at = reader.skip(0)
    if at < len(text) and text[at] in "[{":
        found = reader.whole(at)
        value, at = found if found is not None else _opened(reader, at)
    else:
        value, at = reader.scalar(at)
    at = reader.skip(at)
    if at != len(text):
        raise reader.error("Extra data", at)
    return value


def _opened(reader: _Reader, at: int) -> tuple[Any, int]:
    """The container opening at `at`, walked here with an explicit stack (members that fit a window
    in one C call each), and where it ends."""
    text = reader.text
    end = len(text)
    root: list[Any] | dict[str, Any] = [] if text[at] == "[" else {}
    stack: list[list[Any] | dict[str, Any]] = [root]
    at = reader.skip(at + 1)
    starting = True  # just after the opening bracket: the container may be empty
    while True:
        holder = stack[-1]
        is_list = type(holder) is list
        closer = "]" if is_list else "}"
        if starting and at < end and text[at] == closer:
            at += 1
        else:
            key = ""
            if is_list and at < end:
                run = reader.run(at)
                if run is not None:
                    holder.extend(run[0])  # type: ignore[union-attr]
                    at = reader.skip(run[1] + 1)  # past the comma that follows the run
                    starting = False
                    continue
            if not is_list:
                if at >= end or text[at] != '"':
                    raise reader.error("Expecting property name enclosed in double quotes", at)
                key, at = reader.scan(text, at)  # a string: the C scanner reads it as `scanstring` does
                at = reader.skip(at)
                if at >= end or text[at] != ":":
                    raise reader.error("Expecting ':' delimiter", at)
                at = reader.skip(at + 1)
            if at < end and text[at] in "[{":
                found = reader.whole(at)
                if found is None:
                    if len(stack) >= MAX_DEPTH:
                        raise RecursionError(
                            "maximum recursion depth exceeded while decoding a JSON document"
                        )
                    child: list[Any] | dict[str, Any] = [] if text[at] == "[" else {}
                    _put(holder, key, child)
                    stack.append(child)
                    at = reader.skip(at + 1)
                    starting = True
                    continue
                value, at = found
            else:
                value, at = reader.scalar(at)
            _put(holder, key, value)
            at = reader.skip(at)
            if at < end and text[at] == ",":
                at = reader.skip(at + 1)
                starting = False
                continue
            if at >= end or text[at] != closer:
                raise reader.error("Expecting ',' delimiter", at)
            at += 1
        # `holder` is complete; its own holder goes on after it, or ends too.
        while True:
            stack.pop()
            if not stack:
                return root, at
            closer = "]" if type(stack[-1]) is list else "}"
            at = reader.skip(at)
            if at < end and text[at] == ",":
                at = reader.skip(at + 1)
                starting = False
                break
            if at >= end or text[at] != closer:
                raise reader.error("Expecting ',' delimiter", at)
            at += 1


def _put(holder: list[Any] | dict[str, Any], key: str, value: Any) -> None:
    if isinstance(holder, list):
        holder.append(value)
    else:
        holder[key] = value


# -- writing --------------------------------------------------------------------------------------


_FLAT = frozenset({str, int, float, bool, type(None)})


def cost(value: Any, limit: int) -> int:
    """What rendering (or freeing) `value` costs, counted up to just past `limit` (a bounded walk)."""
    if type(value) is dict and len(value) <= _FLAT_KEYS and _FLAT.issuperset(map(type, value.values())):
        # The common member, a message of texts and numbers: counted without the walk.
        return 1 + 2 * len(value) + sum(len(v) for v in value.values() if type(v) is str) // _STRING_WEIGHT
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        total += 1
        if isinstance(item, str):
            total += len(item) // _STRING_WEIGHT
        elif isinstance(item, dict):
            if len(item) > limit:
                return limit + 1
            total += len(item)  # the keys
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            if len(item) > limit:
                return limit + 1
            stack.extend(item)
        if total > limit:
            return total
    return total


def _pieces(value: Any, dump: Callable[[Any], str]) -> Iterator[str]:
    """`dump(value)` in pieces: runs of small members in one call each, large members opened."""
    if not isinstance(value, dict | list | tuple) or cost(value, STEP_NODES) <= STEP_NODES:
        yield dump(value)
        return
    open_ids: set[int] = set()
    stack: list[tuple[Iterator[Any], bool, str, int]] = []

    def opening(container: Any) -> str:
        if id(container) in open_ids:
            raise ValueError("Circular reference detected")
        if len(stack) >= MAX_DEPTH:
            raise RecursionError("maximum recursion depth exceeded while encoding a JSON object")
        open_ids.add(id(container))
        if isinstance(container, dict):
            stack.append((iter(container.items()), True, "}", id(container)))
            return "{"
        stack.append((iter(container), False, "]", id(container)))
        return "["

    yield opening(value)
    first = [True]  # per open container: no comma before its first member
    while stack:
        members, is_dict, closer, ident = stack[-1]
        run: list[Any] = []
        spent = 0
        child: Any = None
        opened = False
        for member in members:
            item = member[1] if is_dict else member
            size = cost(item, STEP_NODES) if isinstance(item, dict | list | tuple) else 1
            if size > STEP_NODES:
                child, opened = member, True
                break
            run.append(member)
            spent += size + (len(item) // _STRING_WEIGHT if isinstance(item, str) else 0)
            if spent > STEP_NODES:
                break
        if run:
            text = dump(dict(run)) if is_dict else dump(run)
            yield ("" if first[-1] else ",") + text[1:-1]
            first[-1] = False
        if opened:
            prefix = "" if first[-1] else ","
            first[-1] = False
            if is_dict:
                key, item = child
                prefix += (dump(key) if isinstance(key, str) else dump({key: 0})[1:-3]) + ":"
            else:
                item = child
            yield prefix + opening(item)
            first.append(True)
            continue
        if not run or spent <= STEP_NODES:  # the members ran out
            stack.pop()
            first.pop()
            open_ids.discard(ident)
            yield closer


def _encoded(pieces: Iterator[str]) -> bytes:
    """The pieces as UTF-8, encoded some `STEP_CHARS` characters at a time (strict: a lone
    surrogate raises UnicodeEncodeError)."""
    chunks: list[bytes] = []
    batch: list[str] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if size >= STEP_CHARS:
            chunks.append("".join(batch).encode())
            batch, size = [], 0
    chunks.append("".join(batch).encode())
    return b"".join(chunks)


def _dumper(ensure_ascii: bool) -> Callable[[Any], str]:
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii, allow_nan=False, separators=(",", ":"))
    return encoder.encode


def render(value: Any) -> bytes:
    """`echo.entrypoints.http.wire.render_json(value)`, in bounded steps: the same bytes, the same errors
    (ValueError, TypeError, RecursionError for what JSON cannot carry)."""
    try:
        return _encoded(_pieces(value, _dumper(ensure_ascii=False)))
    except UnicodeEncodeError:
        return _encoded(_pieces(value, _dumper(ensure_ascii=True)))
