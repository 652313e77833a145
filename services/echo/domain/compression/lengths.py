"""How long a summary may be, and what is done with one that comes back longer; pure, no I/O.

A summary stands for the turns it covers, so it must cost less than they do: never more than
``max_summary_share`` of their tokens (the turns the previous summary stood for included, counted as
the messages they were), nor ``max_summary_tokens``. ``compression_style`` moves the target under that
ceiling: ``aggressive`` asks for half of it, ``balanced`` and ``faithful`` for all of it (they differ
in what they keep, not in length). The prompt asks for the target (``prompts``) and the request's
``max_output_tokens`` is set to it; what still comes back longer is trimmed here
(``trim_summary``): an XML working memory loses its last items, section by section from the least
useful (``next_reply_guidance``, which the fence strips anyway, then ``recent_progress``…), a cut XML
(the model stopped at the limit) is closed, and plain text loses its last lines, then sentences. What
cannot be brought under the target without losing every item is refused (``None``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["MIN_SUMMARY_TOKENS", "STYLE_SHARES", "summary_target", "trim_summary"]

MIN_SUMMARY_TOKENS = 32
"""Below this a summary says nothing: a target is never smaller (nor above the share's ceiling when
the covered turns are tiny: then the share's ceiling wins and the summary may be refused)."""

STYLE_SHARES: dict[str, float] = {"aggressive": 0.5, "balanced": 1.0, "faithful": 1.0}
"""``compression_style`` -> the part of the ceiling its target asks for."""

_TRIM_ORDER = (
    "next_reply_guidance",
    "recent_progress",
    "tool_state",
    "open_loops",
    "errors_and_warnings",
    "persistent_context",
    "user_preferences",
)  # sections an over-long working memory loses items from, first to last
_ITEM = re.compile(r"[ \t]*<item>.*?</item>[ \t]*\n?", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def summary_target(covered_tokens: int, *, max_share: float, max_summary_tokens: int, style: str) -> int:
    """The token target of a summary standing for ``covered_tokens`` tokens of turns: the style's part
    of ``min(max_share × covered_tokens, max_summary_tokens)``, at least ``MIN_SUMMARY_TOKENS`` when
    that ceiling allows it (0 when the covered turns are too small to summarise)."""
    if covered_tokens < 0 or not 0 < max_share <= 1 or max_summary_tokens < 1:
        raise ValueError(
            f"expected covered_tokens >= 0, 0 < max_share <= 1, max_summary_tokens >= 1; got "
            f"{covered_tokens}, {max_share}, {max_summary_tokens}"
        )
    ceiling = min(int(max_share * covered_tokens), max_summary_tokens)
    if ceiling < MIN_SUMMARY_TOKENS:
        return 0
    return max(MIN_SUMMARY_TOKENS, int(ceiling * STYLE_SHARES.get(style, 1.0)))


def trim_summary(text: str, target: int, counter: Callable[[str], int]) -> str | None:
    """``text`` within ``target`` tokens (by ``counter``), trimmed as the module docstring says, or
    None when nothing worth keeping fits."""
    text = text.strip()
    if not text or target < 1:
        return None
    if "<working_memory" in text:
        return _trim_xml(_closed(text), target, counter)
    if counter(text) <= target:
        return text
    return _trim_plain(text, target, counter)


def _closed(text: str) -> str:
    """A cut XML working memory made whole: a half-written last item goes, open tags are closed."""
    if "</working_memory>" in text:
        return text
    last_end = max(text.rfind("</item>"), text.rfind(">\n"))
    if text.rfind("<item>") > text.rfind("</item>"):  # a half-written item: drop it
        text = text[: text.rfind("<item>")].rstrip()
    elif last_end > 0:
        text = text[: text.find(">", last_end) + 1]
    opened: list[str] = []
    for match in re.finditer(r"<(/?)([a-z_]+)>", text):
        if match.group(1):
            if opened and opened[-1] == match.group(2):
                opened.pop()
        else:
            opened.append(match.group(2))
    return text + "".join(f"\n</{tag}>" for tag in reversed(opened))


def _trim_xml(text: str, target: int, counter: Callable[[str], int]) -> str | None:
    current = text
    for section in _TRIM_ORDER:
        if counter(current) <= target:
            break
        current = _thin_section(current, section, target, counter)
    current = re.sub(r"[ \t]*<([a-z_]+)>\s*</\1>[ \t]*\n?", "", current)  # sections left empty
    if counter(current) > target or ("<item>" not in current and "<current_goal>" not in current):
        return None
    return current


def _thin_section(text: str, section: str, target: int, counter: Callable[[str], int]) -> str:
    """``text`` with the last items of ``section`` removed until it fits ``target`` or none are left."""
    span = re.search(rf"<{section}>(.*?)</{section}>", text, re.DOTALL)
    if span is None:
        return text
    items = list(_ITEM.finditer(span.group(1)))
    inner = span.group(1)
    while items and counter(text) > target:
        last = items.pop()
        inner = inner[: last.start()] + inner[last.end() :]
        text = text[: span.start(1)] + inner + text[span.start(1) + len(span.group(1)) :]
        span = re.search(rf"<{section}>(.*?)</{section}>", text, re.DOTALL)
        if span is None:
            break
        inner = span.group(1)
        items = list(_ITEM.finditer(inner))
    return text


def _trim_plain(text: str, target: int, counter: Callable[[str], int]) -> str | None:
    lines = text.splitlines()
    while len(lines) > 1 and counter("\n".join(lines)) > target:
        lines.pop()
    if counter("\n".join(lines)) <= target:
        return "\n".join(lines)
    parts = _SENTENCE_END.split(lines[0])
    while len(parts) > 1 and counter(" ".join(parts)) > target:
        parts.pop()
    kept = " ".join(parts)
    return kept if counter(kept) <= target else None
