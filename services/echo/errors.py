"""The one exception root of the runtime, and how each kind is retried.

EchoError
├── ConfigError        a setting or file is invalid; the message names the field and the rule
└── HookError          a filter failed on a well-formed request (the hook answers 200 anyway)
    └── DeadlineExceeded  a filter ran past its deadline valve
"""

from __future__ import annotations

__all__ = ["ConfigError", "DeadlineExceeded", "EchoError", "HookError"]


class EchoError(Exception):
    """Root of every error raised on purpose by ECHO."""


class ConfigError(EchoError):
    """Invalid configuration. Permanent: fixing the input is the only retry."""

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None) -> None:
        self.field = field
        self.source = source
        where = f"{source}: " if source else ""
        named = f"{field}: " if field else ""
        super().__init__(f"{where}{named}{message}")


class HookError(EchoError):
    """A filter failed on a well-formed request."""


class DeadlineExceeded(HookError):
    """A filter ran past its deadline."""
