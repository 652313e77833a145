"""The one exception root of the runtime, and how each kind is retried.

Every error ECHO raises on purpose is an `EchoError`, and every one says whether a retry can help in
one attribute, `retryable` (a class default, False on the root, that an instance may override:
`LLMError("…", 503, True)`), with `retry_after_s` when the other side said how long to wait.
Whoever decides to retry reads those two and nothing else (`is_retryable`, `retry_after`): the
warm-up (`entrypoints.runtime`), the job worker (`queue.execution`), the supervisor's restart delay,
the LLM and embedding retries. Adapters translate driver errors into these, so callers never see
asyncpg, httpx or SDK errors.

    EchoError                          retryable: False unless the class or the instance says so
    ├── ConfigError                    invalid setting or file; the message names the field and the rule
    │   └── ValvesManagedByFile        (config.live) the API may not change file-managed valves
    ├── HookError                      a filter failed on a well-formed request (the hook answers 200 anyway)
    │   └── DeadlineExceeded           a filter ran past its deadline valve
    ├── StoreError                     (ports.store; PostgreSQL's subclasses in adapters.store.errors)
    │   ├── TransientStoreError        retryable: connection lost, serialization failure, timeouts
    │   └── PermanentStoreError
    │       ├── ConstraintViolation
    │       ├── DataRefused
    │       ├── MigrationError
    │       └── EmbeddedPostgresError
    ├── JobError                       (queue.errors) raised by job handlers; retryable
    │   ├── RetryLater                 retryable after retry_after_s (counts as an attempt)
    │   └── PermanentJobError          not retryable: straight to dead-letter
    │       └── UnknownJobKind
    ├── LLMError                       (adapters.llm.errors) retryable per call, retry_after_s
    │   ├── EmptyAnswer                no usable text; carries the trimmed response shape
    │   └── InvalidJSON                retryable: JSON was asked for and the answer does not parse
    ├── EmbeddingError                 (ports.embeddings) retryable per call, retry_after_s
    ├── VectorStoreError               (ports.vectors) retryable per call
    │   └── DimensionMismatch          a collection's size differs from the embedder's
    ├── OpenWebUIError                 (adapters.openwebui.client) retryable per call
    │   ├── FilesForbidden             the key may not read files
    │   └── AdminError                 (adapters.openwebui.admin) a call of the admin API failed
    │       └── AdminKeyRefused        401/403: wrong or expired key, not an admin's, API keys off
    ├── BackendsNotReady               (capabilities.memory.search) retryable: still opening
    ├── ToolFailed                     (capabilities.shadow.server_tools) a server-side tool failed
    ├── PlotUnavailable                (entrypoints.replay.plot) matplotlib is not installed
    └── the domain's own (pure; permanent: the input is what is wrong)
        ├── TokenizerUnavailable       (domain.tokens) the packaged o200k_base file is missing or altered
        ├── TranscriptError            (domain.transcripts) not a chat export (also a ValueError)
        ├── InvalidTransition          (domain.jobs) a state change the job lifecycle forbids
        ├── MissingMessages            (domain.compression.compaction) a branch names lost messages
        ├── UnreadableShadow           (domain.shadow.parts) a stored rich form cannot be rebuilt
        ├── DataUrlError               (domain.attachments.parts) a data: URL that cannot be used
        ├── ExtractionError            (domain.attachments.extraction) no text in the file
        └── InvalidDistillation        (domain.memory.distillation) an answer off the schema

Anything else (a bug, an OSError a layer let through) is not an `EchoError`: `is_retryable` says
False, and each decider says what it does with it (the job worker retries it with backoff, the
warm-up lets it fail the task, the supervisor restarts its loop).
"""

from __future__ import annotations

__all__ = ["ConfigError", "DeadlineExceeded", "EchoError", "HookError", "is_retryable", "retry_after"]


class EchoError(Exception):
    """Root of every error raised on purpose by ECHO.

    ``retryable``: whether the same call may succeed later (a class default, False here; pass
    ``retryable=`` or assign it to decide per instance). ``retry_after_s``: the seconds the other
    side asked to wait, when it said (None: the caller's own backoff).
    """

    retryable: bool = False
    retry_after_s: float | None = None

    def __init__(
        self, *args: object, retryable: bool | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(*args)
        if retryable is not None:
            self.retryable = retryable
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s


def is_retryable(error: BaseException | None) -> bool:
    """Whether a retry may help: an `EchoError` that says so; anything else (or None) is False."""
    return isinstance(error, EchoError) and error.retryable


def retry_after(error: BaseException | None) -> float | None:
    """The delay an `EchoError` asked for (never negative), else None: the caller's backoff decides."""
    if isinstance(error, EchoError) and error.retry_after_s is not None:
        return max(error.retry_after_s, 0.0)
    return None


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
