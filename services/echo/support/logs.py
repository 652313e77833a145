"""Structured logs (structlog): JSON lines in clusters, readable lines for humans.

Request-scoped fields (chat_id, user_id, filter, phase) are bound with
`structlog.contextvars.bind_contextvars` and appear on every line of that request.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

__all__ = ["configure_logging"]


class _StderrLogger:
    """Writes each line to the `sys.stderr` of the moment (servers and test capture swap it)."""

    @classmethod
    def factory(cls, *args: object) -> _StderrLogger:
        return cls()

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


def configure_logging(level: str = "INFO", fmt: Literal["json", "console"] = "json") -> None:
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=_StderrLogger.factory,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
