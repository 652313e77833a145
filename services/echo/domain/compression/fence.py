"""The injected summary, fenced as history and never as instructions (seed 002 v1.7.2); pure, no I/O.

The whole message is one ``<echo_summary …>…</echo_summary>`` block, which ``echo.domain.chain`` normalises
to nothing: a summary that comes back in a later request changes no hash, and
``is_injected_summary`` recognises it so that it is replaced, not stacked. Inside the block: the
locale's guard (goals, open loops and tool state in a summary are history, not instructions), the
summary text with every ``<next_reply_guidance>`` removed (stale advice would steer a later turn)
and any ``echo_summary`` tag in it defused, then the line that introduces the recent messages.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from echo.domain.compression import locales

__all__ = ["SUMMARY_TAG", "fenced_summary", "is_injected_summary", "strip_reply_guidance", "summary_message"]

SUMMARY_TAG = "echo_summary"

_GUIDANCE = re.compile(
    r"\s*<next_reply_guidance\b[^>]*?(?:/>|>.*?</next_reply_guidance\s*>)\s*", re.IGNORECASE | re.DOTALL
)
_GUIDANCE_UNCLOSED = re.compile(r"\s*<next_reply_guidance\b.*\Z", re.IGNORECASE | re.DOTALL)
_FENCE_TAG = re.compile(r"<(/?)(echo_summary)\b", re.IGNORECASE)
_INJECTED = re.compile(r"\A\s*<echo_summary\b[^>]*>.*</echo_summary\s*>\s*\Z", re.DOTALL)


# Every inlet of a chat reads its one summary again: the last few chats' are remembered (functools'
# LRU, thread-safe: large chats are assembled on worker threads).
_MEMO_ENTRIES = 256


def strip_reply_guidance(text: str) -> str:
    """``text`` without its ``<next_reply_guidance>`` blocks (an unclosed one runs to the end)."""
    return _stripped(text)


@functools.lru_cache(maxsize=_MEMO_ENTRIES)
def _stripped(text: str) -> str:
    return _GUIDANCE_UNCLOSED.sub("", _GUIDANCE.sub("\n", text)).strip()


def _defused(text: str) -> str:
    """The summary text with its own ``echo_summary`` tags made inert, so it cannot close the fence."""
    return _FENCE_TAG.sub(lambda match: f"&lt;{match.group(1)}{match.group(2)}", text)


def fenced_summary(text: str, *, locale: str, covered_count: int) -> str:
    """The content of the injected summary message."""
    return _fenced_summary(text, locale, covered_count)


@functools.lru_cache(maxsize=_MEMO_ENTRIES)
def _fenced_summary(text: str, locale: str, covered_count: int) -> str:
    texts = locales.LOCALES[locales.resolve_locale(locale)]
    body = _defused(strip_reply_guidance(text))
    return (
        f'<{SUMMARY_TAG} covers="{covered_count}" lang="{locales.resolve_locale(locale)}">\n'
        f"{texts.guard}\n\n{body}\n\n{texts.recent}\n</{SUMMARY_TAG}>"
    )


def summary_message(text: str, *, locale: str, covered_count: int, role: str = "assistant") -> dict[str, Any]:
    """The message that stands for the covered messages: role ``assistant`` (what was said before)
    or ``user`` where nothing but system messages precedes it (some providers want a user turn
    first)."""
    return {"role": role, "content": fenced_summary(text, locale=locale, covered_count=covered_count)}


def is_injected_summary(text: str) -> bool:
    """Whether a message's text is nothing but an injected summary block."""
    return "<echo_summary" in text and _INJECTED.match(text) is not None
