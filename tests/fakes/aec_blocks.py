"""The AEC block echo_context puts in front of the user's text on every inlet, taken off again so a
test can compare the rest of the body with what it sent."""

from __future__ import annotations

from typing import Any

__all__ = ["without_aec"]


def without_aec(body: dict[str, Any]) -> dict[str, Any]:
    """`body` without the AEC block of its last user message (the block must be there)."""
    messages = [dict(m) for m in body["messages"]]
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    content = messages[last]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    block, _, rest = text.partition("</environnement_contexte>")
    assert block.startswith("<environnement_contexte>\nversion_framework_echo:"), text[:200]
    rest = rest.removeprefix("\n\n")
    if isinstance(content, str):
        messages[last]["content"] = rest
    else:
        messages[last]["content"] = ([{**content[0], "text": rest}] if rest else []) + content[1:]
    return {**body, "messages": messages}
