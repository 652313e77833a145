"""One model step as it streams in, and the signatures of the current turn; pure.

``StepBuilder`` folds the parts of a streamed answer into one model content the way it can be sent
back: consecutive text parts of the same kind (thought or answer) are joined, except that a part
carrying a thought signature is never joined with another (the signature stays on the part it came
on, as Gemini asks), and empty text parts without a signature are dropped.

``sign_current_turn``: Gemini's thinking models reject a request whose current turn (the contents
after the last user text) holds a model step with function calls and no signature ("Function call
is missing a thought_signature"). A step the shadow could not restore (a chat from before ECHO, a
lost row) gets Gemini's documented placeholder signature on its first function call, so the chat
goes on instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence

from echo.domain.shadow.parts import ContentDict, FunctionCallDict, PartDict

__all__ = ["PLACEHOLDER_SIGNATURE", "StepBuilder", "sign_current_turn"]

PLACEHOLDER_SIGNATURE = b"skip_thought_signature_validator"
"""Gemini's documented stand-in for a signature that is not known (thought-signatures guide)."""


def _is_text(part: PartDict) -> bool:
    return "text" in part and not ({"function_call", "function_response", "inline_data"} & part.keys())


class StepBuilder:
    """Accumulates the parts of one streamed model answer."""

    def __init__(self) -> None:
        self._parts: list[PartDict] = []

    def add(self, part: PartDict) -> None:
        if _is_text(part) and not part["text"] and not part.get("thought_signature"):
            return
        last = self._parts[-1] if self._parts else None
        if (
            last is not None
            and _is_text(part)
            and _is_text(last)
            and bool(last.get("thought")) == bool(part.get("thought"))
            and not last.get("thought_signature")
            and not part.get("thought_signature")
        ):
            last["text"] += part["text"]
            return
        self._parts.append(part.copy())

    @property
    def content(self) -> ContentDict:
        return {"role": "model", "parts": [part.copy() for part in self._parts]}

    @property
    def function_calls(self) -> list[tuple[int, FunctionCallDict]]:
        """``(part index, call)`` of every function call, in order."""
        return [(i, part["function_call"]) for i, part in enumerate(self._parts) if "function_call" in part]

    @property
    def has_signature(self) -> bool:
        return any(part.get("thought_signature") for part in self._parts)


def _is_user_text(content: ContentDict) -> bool:
    return content["role"] == "user" and any("function_response" not in part for part in content["parts"])


def sign_current_turn(contents: Sequence[ContentDict]) -> int:
    """Give each model step of the current turn that has function calls and no signature on any of
    them the placeholder signature on its first call, in place; how many steps needed it."""
    start = 0
    for i in range(len(contents) - 1, -1, -1):
        if _is_user_text(contents[i]):
            start = i + 1
            break
    filled = 0
    for content in contents[start:]:
        if content["role"] != "model":
            continue
        calls = [part for part in content["parts"] if "function_call" in part]
        if calls and not any(part.get("thought_signature") for part in calls):
            calls[0]["thought_signature"] = PLACEHOLDER_SIGNATURE
            filled += 1
    return filled
