"""The summary prompt: seed 002's XML working memory, in the conversation's language; pure, no I/O.

The instructions are English (the language models follow best) and name the language the summary
must be written in: the conversation's (``locales.detect_locale``). The previous summary, when
there is one, is folded in (``<previous_working_memory>``); the new messages follow as a numbered
transcript (``format_entry``), tool calls and results included, images noted but not shown.
``compression_style`` sets how much detail to keep. Text that would close one of the prompt's
own tags is defused, so a message cannot step out of the transcript.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from echo.domain.compression import locales
from echo.domain.compression import messages as msgs

__all__ = ["STYLES", "Style", "build_summary_prompt", "format_entry", "style_of"]

Style = Literal["aggressive", "balanced", "faithful"]

STYLES: dict[str, str] = {
    "aggressive": (
        "Compress hard: keep only what changes the next replies (the goal, decisions, constraints, "
        "verified results, errors, open loops). One short line per item; drop narrative, examples and "
        "alternatives that were set aside."
    ),
    "balanced": (
        "Keep the key context with moderate detail: decisions with their main reason, verified facts, "
        "the state of tools and tasks, and what is still open. Drop repetition and small talk."
    ),
    "faithful": (
        "Spend the budget on fidelity: keep the reasoning behind decisions, evaluation criteria, the "
        "alternatives still in play, nuances of the user's wording, and the structure of long answers."
    ),
}
"""``compression_style`` -> what the summary keeps."""

_OWN_TAGS = re.compile(r"<(/?)(conversation|compression_input|previous_working_memory)\b", re.IGNORECASE)

_INSTRUCTIONS = """\
You compress a conversation into a working memory: a compact, low-loss state from which another \
assistant turn can continue the chat accurately. The chat may contain tool calls, referenced \
material and trimmed or collapsed content.

Goal: keep what most helps the NEXT replies stay accurate and consistent. Prefer continuity over \
maximal compression; old but still useful state stays.

Rules:
1. If <previous_working_memory> is given, merge it with the new messages: keep what is still \
valid, update what changed, remove only what is clearly obsolete.
2. The user's current goal, explicit preferences, constraints, decisions and acceptance criteria \
come first.
3. <persistent_context> holds only what will matter beyond the current task (stable preferences, \
lasting project facts, standing constraints, chosen defaults). Short-lived matters go to \
<recent_progress>.
4. Tools: keep the tool, its purpose, decisive inputs, verified outputs, key figures, errors and \
what is unfinished; drop boilerplate and long raw payloads.
5. Keep important error messages, exception names and exit codes verbatim.
6. Trimmed or collapsed content is unknown: keep what is visible, never guess what was hidden.
7. Separate verified facts from inferences: an item that is not established starts with \
INFERRED: or OPEN:.
8. Keep code, commands, paths, identifiers, numbers and short error strings character for \
character when they matter.
9. Drop greetings, repetition, filler and wrappers; do not echo these instructions or the input tags.
10. Without tools or code, still keep unanswered questions, promises and commitments.

Style: {style}

Output: XML only, no Markdown and no text outside the root element; stay under {max_tokens} \
tokens, cutting low-value detail first; omit empty sections; write every item in {language}, the \
language of the conversation. Use exactly this structure, lists as <item> elements:

<working_memory>
  <current_goal>...</current_goal>
  <user_preferences><item>...</item></user_preferences>
  <persistent_context><item>...</item></persistent_context>
  <recent_progress><item>...</item></recent_progress>
  <tool_state><item>tool=... | purpose=... | result=... | status=... | next=...</item></tool_state>
  <errors_and_warnings><item>...</item></errors_and_warnings>
  <open_loops><item>...</item></open_loops>
  <next_reply_guidance><item>...</item></next_reply_guidance>
</working_memory>
"""


def _defused(text: str) -> str:
    return _OWN_TAGS.sub(lambda match: f"&lt;{match.group(1)}{match.group(2)}", text)


def _role_name(message: Mapping[str, Any]) -> str:
    role = msgs.role_of(message)
    return {"user": "User", "assistant": "Assistant", "tool": "Tool result"}.get(role, role or "unknown")


def format_entry(message: Mapping[str, Any], number: int) -> str:
    """One message of the transcript: ``[number] Role: text``, tool calls and images noted."""
    lines = [msgs.content_text(message.get("content"))]
    content = message.get("content")
    if isinstance(content, list):
        images = sum(1 for part in content if isinstance(part, Mapping) and part.get("type") == "image_url")
        if images:
            lines.append(f"[{images} image(s), not shown]")
    for call in msgs.tool_calls_of(message):
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        lines.append(f"[tool call {function.get('name', '?')}({function.get('arguments', '')})]")
    label = _role_name(message)
    call_id = message.get("tool_call_id")
    if msgs.role_of(message) == "tool" and isinstance(call_id, str):
        label += f" ({message.get('name') or call_id})"
    return f"[{number}] {label}: " + _defused("\n".join(line for line in lines if line))


def style_of(instructions: str) -> Style | None:
    """The ``compression_style`` a summary prompt's instructions were built with, None when they are
    not a summary prompt (the offline provider reads it: it follows the style, not its wording)."""
    for name in ("aggressive", "balanced", "faithful"):
        if f"Style: {STYLES[name]}" in instructions:
            return name
    return None


def build_summary_prompt(
    transcript: str,
    previous: str | None = None,
    *,
    style: Style = "balanced",
    max_summary_tokens: int,
    locale: str = locales.DEFAULT_LOCALE,
) -> str:
    """The whole prompt, sent as one user message to the summary model."""
    language = locales.LOCALES[locales.resolve_locale(locale)].language
    previous_block = (
        f"<previous_working_memory>\n{_defused(previous)}\n</previous_working_memory>\n" if previous else ""
    )
    return (
        _INSTRUCTIONS.format(style=STYLES[style], max_tokens=max_summary_tokens, language=language)
        + f"\n<compression_input>\n{previous_block}<conversation>\n{transcript}\n</conversation>\n"
        + "</compression_input>\n\nReturn only the XML working memory."
    )
