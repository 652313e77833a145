"""The one exception root of the runtime, and how each kind is retried.

Each error carries whether a retry can help (`retryable` / `transient`, or its class says so);
adapters translate driver errors into these, so callers never see asyncpg, httpx or SDK errors.

    EchoError
    ├── ConfigError                    invalid setting or file; the message names the field and the rule
    │   └── ValvesManagedByFile        (config.live) the API may not change file-managed valves
    ├── HookError                      a filter failed on a well-formed request (the hook answers 200 anyway)
    │   └── DeadlineExceeded           a filter ran past its deadline valve
    ├── StoreError                     (store.errors) .transient says whether to retry
    │   ├── TransientStoreError        connection lost, serialization failure, timeouts
    │   └── PermanentStoreError
    │       ├── ConstraintViolation
    │       ├── MigrationError
    │       └── EmbeddedPostgresError
    ├── JobError                       (jobs.errors) raised by job handlers
    │   ├── RetryLater                 retry after a delay (counts as an attempt)
    │   └── PermanentJobError          straight to dead-letter
    │       └── UnknownJobKind
    ├── LLMError                       (llm.errors) .retryable, .retry_after_s
    │   ├── EmptyAnswer                no usable text; carries the trimmed response shape
    │   └── InvalidJSON                JSON was asked for and the answer does not parse
    ├── EmbeddingError                 (embeddings.base) .retryable, .retry_after_s
    ├── VectorStoreError               (vectors.base) .retryable
    │   └── DimensionMismatch          a collection's size differs from the embedder's
    └── TokenizerUnavailable           (tokens) the packaged o200k_base file is missing or altered
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
