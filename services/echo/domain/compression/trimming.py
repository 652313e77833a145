"""Making single messages smaller without breaking the request; pure, no I/O.

Tool outputs (seed 002 ``enable_tool_output_trimming``): in a tool-call group of an earlier turn
whose results add up to ``tool_trim_threshold_chars`` or more, each result's content becomes a short
placeholder that gives its size, in the conversation's language; the ``tool`` message, its
``tool_call_id`` and the assistant's ``tool_calls`` stay, so the structure stays valid. The same
goes for the ``result="…"`` of Open WebUI's ``<details type="tool_calls">`` blocks (non-native
function calling). Results of the current turn (after the last user message) are the model's
input now and are never trimmed.

Folding (structure-aware, seed 002): an over-long text keeps its skeleton: the first and last
lines, every Markdown heading (up to a limit) and every code-fence line (so fences stay paired);
each run of omitted lines becomes one marker that counts them, and a kept line that is itself very
long keeps its two ends. A fold that does not make the text clearly shorter fails, and a failed
fold keeps the original (``None``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from echo.domain.compression import groups as grp
from echo.domain.compression import locales
from echo.domain.compression import messages as msgs

__all__ = ["fold_message", "fold_text", "tool_output_trims"]

_DETAILS = re.compile(r'<details type="tool_calls"[\s\S]*?</details>')
_RESULT = re.compile(r'result="([^"]*)"')
_HEADING = re.compile(r"\s{0,3}(#{1,6}\s|<h[1-6]\b)", re.IGNORECASE)
_FENCE = re.compile(r"\s*(```|~~~)")
EDGE_LINES = 5
MAX_HEADINGS = 40
LINE_CHARS = 400
_FOLD_GAIN = 0.9  # a fold must keep under this share of the original's characters


def _texts(locale: str) -> locales.LocaleTexts:
    return locales.LOCALES[locales.resolve_locale(locale)]


def _trim_details(text: str, threshold_chars: int, placeholder: str) -> str:
    def replace(block: re.Match[str]) -> str:
        def result(attribute: re.Match[str]) -> str:
            size = len(attribute.group(1))
            if size < threshold_chars:
                return attribute.group(0)
            return 'result="{}"'.format(placeholder.format(chars=size).replace('"', "&quot;"))

        return _RESULT.sub(result, block.group(0), count=1)

    return _DETAILS.sub(replace, text)


def tool_output_trims(
    messages: Sequence[Mapping[str, Any]],
    positions: Sequence[int],
    groups: Sequence[grp.Group],
    *,
    threshold_chars: int,
    before_turn: int,
    locale: str,
    skip: range = range(0),
) -> dict[int, dict[str, Any]]:
    """Replacement messages, by position in ``messages``, for the tool outputs to trim among the
    turns before ``before_turn`` (turn ``i`` stands at ``positions[i]``, ``groups`` are theirs).

    Turns in ``skip`` (those a summary stands for) are not looked at, nor groups wholly inside it."""
    placeholder = _texts(locale).tool_trimmed
    trims: dict[int, dict[str, Any]] = {}
    for group in groups:
        if group.stop > before_turn or group.stop - group.start < 2:
            continue
        if skip and skip.start <= group.start and group.stop <= skip.stop:
            continue
        results = [positions[turn] for turn in range(group.start + 1, group.stop)]
        sizes = [len(msgs.content_text(messages[position].get("content"))) for position in results]
        if sum(sizes) < threshold_chars:
            continue
        for position, size in zip(results, sizes, strict=True):
            short = placeholder.format(chars=size)
            if size > len(short):
                trims[position] = {**messages[position], "content": short}
    end = min(before_turn, len(positions))
    first = min(skip.start, end) if skip else end
    for turn in (*range(first), *range(max(first, skip.stop) if skip else first, end)):
        position = positions[turn]
        content = messages[position].get("content")
        if isinstance(content, str) and '<details type="tool_calls"' in content:
            trimmed = _trim_details(content, threshold_chars, placeholder)
            if trimmed != content:
                trims[position] = {**messages[position], "content": trimmed}
    return trims


def _shorten_line(line: str) -> str:
    if len(line) <= LINE_CHARS:
        return line
    half = LINE_CHARS // 2
    return f"{line[:half]} … {line[-half:]}"


def fold_text(text: str, *, locale: str = locales.DEFAULT_LOCALE) -> str | None:
    """The skeleton of ``text`` (see the module docstring), or None when folding does not pay."""
    lines = text.split("\n")
    keep = set(range(min(EDGE_LINES, len(lines)))) | set(range(max(0, len(lines) - EDGE_LINES), len(lines)))
    headings = 0
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            keep.add(index)
        elif headings < MAX_HEADINGS and _HEADING.match(line):
            keep.add(index)
            headings += 1
    marker = _texts(locale).collapsed
    folded: list[str] = []
    omitted = 0
    for index, line in enumerate(lines):
        if index in keep:
            if omitted:
                folded.append(marker.format(lines=omitted))
                omitted = 0
            folded.append(_shorten_line(line))
        else:
            omitted += 1
    result = "\n".join(folded)
    return result if len(result) < _FOLD_GAIN * len(text) else None


def fold_message(message: Mapping[str, Any], *, threshold_chars: int, locale: str) -> dict[str, Any] | None:
    """``message`` with its over-long text (parts) folded, or None when nothing could be folded."""
    content = message.get("content")
    if isinstance(content, str):
        folded = fold_text(content, locale=locale) if len(content) > threshold_chars else None
        return None if folded is None else {**message, "content": folded}
    if not isinstance(content, list):
        return None
    parts: list[Any] = []
    changed = False
    for part in content:
        text = part.get("text") if isinstance(part, Mapping) and part.get("type") == "text" else None
        long = isinstance(text, str) and len(text) > threshold_chars
        folded = fold_text(text, locale=locale) if long and isinstance(text, str) else None
        if folded is None:
            parts.append(part)
        else:
            parts.append({**part, "text": folded})
            changed = True
    return {**message, "content": parts} if changed else None
