"""The errors of every language-model call, whatever the provider; each says whether a retry may help.

EchoError
└── LLMError            a call failed; ``retryable`` and ``retry_after_s`` (the root's) say how to retry
    ├── EmptyAnswer     the provider answered without usable text (reasoning only, blocked, odd
    │                   shape); the message carries the trimmed structure of the response.
    │                   Not retryable: the same request gets the same shape.
    └── InvalidJSON     JSON was asked for and the answer does not parse. Retryable: another sample
                        usually does.

Adapters translate SDK and transport failures into ``LLMError``: 408, 429 and 5xx answers, timeouts
and connection failures are retryable; other 4xx answers are not.
"""

from __future__ import annotations

from typing import Any

from echo.errors import EchoError

__all__ = ["EmptyAnswer", "InvalidJSON", "LLMError"]


class LLMError(EchoError):
    """A language-model call failed. ``status`` is the HTTP status when the provider answered one."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        retryable: bool = False,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable, retry_after_s=retry_after_s)
        self.message = message
        self.status = status


class EmptyAnswer(LLMError):
    """No usable answer text; ``shape`` is the trimmed response structure (keys, types, cut strings)."""

    def __init__(self, message: str, shape: Any = None) -> None:
        super().__init__(message, None, False)
        self.shape = shape


class InvalidJSON(LLMError):
    """A JSON answer was requested and the text does not parse; ``text`` is the (cut) answer."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message, None, True)
        self.text = text
