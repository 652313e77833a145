"""A stand-in model for memory work on the fake Gemini server: `FakeGemini.responder = memory_answer`.

A distillation request gets a valid distillation with one memory per user message of the window, its
text that message (cut to 30 words), so a test or a bench can tell which window a memory came from;
a merge request gets both memories joined, new after old. Deterministic: the same request, the same
answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["memory_answer"]

_CONVERSATION = re.compile(r"<conversation>\n(.*?)\n</conversation>", re.DOTALL)
_OLD = re.compile(r"<old_memory>\n(.*?)\n</old_memory>", re.DOTALL)
_NEW = re.compile(r"<new_memory>\n(.*?)\n</new_memory>", re.DOTALL)
_WORD = re.compile(r"[A-Za-z]{4,}")


def _text(body: dict[str, Any]) -> str:
    parts = [p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", [])]
    return "\n".join(p for p in parts if isinstance(p, str))


def memory_answer(body: dict[str, Any]) -> str:
    text = _text(body)
    old, new = _OLD.search(text), _NEW.search(text)
    if old and new:
        return json.dumps({"summary": f"{old.group(1)} {new.group(1)}"})
    found = _CONVERSATION.search(text)
    conversation = found.group(1) if found else text
    said = [p.removeprefix("User:").strip() for p in conversation.split("\n\n") if p.startswith("User:")]
    memories = []
    for message in said or [conversation]:
        words = [w.lower() for w in _WORD.findall(message)]
        memories.append(
            {
                "fact": " ".join(message.split()[:30]),
                "memory_importance": 3,
                "memory_id": "_".join(words[:3]) or "memory",
                "tags": [*words[:3], "memory", "chat", "user"][:3],
            }
        )
    return json.dumps({"worth_remembering": True, "memories": memories})
