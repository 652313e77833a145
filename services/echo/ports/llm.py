"""The port of background language-model work: one request in, one result out. Pure, no I/O.

Summaries, memory distillation, merges and map-reduce all go through ``LLM.generate``; a provider
(Gemini, any OpenAI-compatible endpoint, or the offline heuristics) is an adapter of this port.
``purpose`` labels the metrics; ``json_schema`` asks for one JSON object shaped by that schema, and
the result then carries it parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["LLM", "ROLES", "LLMRequest", "LLMResult", "Media", "Usage"]

ROLES = frozenset({"user", "assistant"})
"""Message roles a request may carry; system text goes to ``LLMRequest.system``."""


@dataclass(frozen=True)
class Media:
    """An image, audio or video file given to the model with the last user message (transcription)."""

    mime_type: str
    data: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if "/" not in self.mime_type:
            raise ValueError(f"media.mime_type: expected a MIME type, not {self.mime_type!r}")
        if not self.data:
            raise ValueError("media.data: expected the file's bytes, got none")


@dataclass(frozen=True)
class LLMRequest:
    """One generation. ``messages`` are ``(role, text)`` pairs, role ``user`` or ``assistant``.

    ``max_output_tokens`` bounds the answer (tokens); ``temperature`` defaults low because background
    work wants stable, faithful output rather than variety. ``media`` go with the last user message
    (a provider that reads none raises a permanent ``LLMError`` saying so).
    """

    model: str
    messages: Sequence[tuple[str, str]]
    system: str = ""
    temperature: float = 0.2
    max_output_tokens: int = 2048
    json_schema: Mapping[str, Any] | None = field(default=None, hash=False)
    purpose: str = "other"
    media: Sequence[Media] = field(default=(), hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple((str(r), str(t)) for r, t in self.messages))
        if not self.model:
            raise ValueError("model: expected a non-empty model id")
        if not self.messages:
            raise ValueError("messages: expected at least one (role, text) pair")
        for i, (role, _) in enumerate(self.messages):
            if role not in ROLES:
                raise ValueError(f"messages[{i}]: role must be one of {sorted(ROLES)}, not {role!r}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError("temperature: expected a number in [0, 2]")
        if self.max_output_tokens < 1:
            raise ValueError("max_output_tokens: expected a positive number of tokens")
        if self.json_schema is not None and not isinstance(self.json_schema, Mapping):
            raise ValueError("json_schema: expected a JSON Schema object")
        if not self.purpose:
            raise ValueError("purpose: expected a non-empty label")
        object.__setattr__(self, "media", tuple(self.media))
        if self.media and "user" not in {role for role, _ in self.messages}:
            raise ValueError("media: they go with a user message, and there is none")

    @property
    def input_text(self) -> str:
        """The text of every message, in order, one per paragraph (what offline heuristics read)."""
        return "\n\n".join(text for _, text in self.messages)


@dataclass(frozen=True)
class Usage:
    """Tokens billed for one call; thinking tokens count as completion tokens."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class LLMResult:
    """The answer: ``text``, ``parsed`` JSON when a schema was requested (else None), and provenance.

    ``finish_reason`` is ``stop``, ``length`` or ``content_filter``; ``degraded`` is true when the
    answer comes from the offline heuristics rather than a model, so callers can say so to the user.
    """

    text: str
    provider: str
    model: str
    usage: Usage = Usage()
    finish_reason: str = "stop"
    parsed: Any = field(default=None, hash=False)

    @property
    def degraded(self) -> bool:
        return self.provider == "offline"


@runtime_checkable
class LLM(Protocol):
    """A language-model provider for background work."""

    @property
    def provider_name(self) -> str:
        """``gemini``, ``openai`` or ``offline``: the ``provider`` label of metrics and results."""
        ...

    async def generate(self, request: LLMRequest) -> LLMResult:
        """One answer; raises ``LLMError`` (retries already spent) when none could be had."""
        ...

    async def aclose(self) -> None:
        """Releases connections; the provider is unusable afterwards."""
        ...
