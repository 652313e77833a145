"""The one exception root: every error says whether a retry can help in one attribute, and whoever
decides reads it (the job worker's classification is checked here; the warm-up, the supervisor and
the LLM retries in their own tests)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

import echo
from echo import errors
from echo.adapters.llm.errors import EmptyAnswer, InvalidJSON, LLMError
from echo.adapters.store import errors as store_errors
from echo.domain import jobs as domain
from echo.domain import transcripts
from echo.domain.attachments import extraction, parts
from echo.domain.compression import compaction
from echo.domain.memory import distillation
from echo.domain.shadow import parts as shadow_parts
from echo.errors import EchoError
from echo.ports.embeddings import EmbeddingError
from echo.ports.vectors import DimensionMismatch, VectorStoreError
from echo.queue import errors as job_errors
from echo.queue import execution, registry

PACKAGE = Path(echo.__file__).parent


def test_the_root_is_permanent_unless_the_class_or_the_instance_says_otherwise() -> None:
    assert EchoError.retryable is False
    assert EchoError.retry_after_s is None
    assert not errors.is_retryable(EchoError("x"))
    assert errors.is_retryable(EchoError("x", retryable=True))
    assert errors.retry_after(EchoError("x", retryable=True, retry_after_s=3)) == 3
    assert errors.retry_after(EchoError("x", retry_after_s=-1)) == 0.0  # never a negative wait
    assert errors.retry_after(EchoError("x")) is None
    # Anything that is not an EchoError says nothing: each decider says what it does with it.
    assert not errors.is_retryable(ConnectionError("x"))
    assert errors.retry_after(ConnectionError("x")) is None
    assert not errors.is_retryable(None)
    assert str(EchoError("x", retryable=True)) == "x"


@pytest.mark.parametrize(
    ("error", "retryable", "retry_after_s"),
    [
        (store_errors.TransientStoreError("connection lost"), True, None),
        (store_errors.PermanentStoreError("syntax error"), False, None),
        (store_errors.ConstraintViolation("duplicate key", sqlstate="23505"), False, None),
        (job_errors.JobError("x"), True, None),
        (job_errors.RetryLater("busy", delay_seconds=7), True, 7),
        (job_errors.RetryLater(), True, None),
        (job_errors.PermanentJobError("bad payload"), False, None),
        (job_errors.UnknownJobKind("merge"), False, None),
        (LLMError("overloaded", 503, True, retry_after_s=2), True, 2),
        (LLMError("bad request", 400), False, None),
        (EmptyAnswer("blocked"), False, None),
        (InvalidJSON("not JSON"), True, None),
        (EmbeddingError("down", retryable=True, retry_after_s=1.5), True, 1.5),
        (EmbeddingError("model missing"), False, None),
        (VectorStoreError("unreachable", retryable=True), True, None),
        (DimensionMismatch("c", expected=8, actual=4), False, None),
    ],
)
def test_each_error_says_how_to_retry_in_the_roots_attributes(
    error: EchoError, retryable: bool, retry_after_s: float | None
) -> None:
    assert (errors.is_retryable(error), error.retryable, error.retry_after_s) == (
        retryable,
        retryable,
        retry_after_s,
    )


def test_the_store_errors_have_one_spelling_of_the_retry_flag() -> None:
    error = store_errors.translate(ConnectionRefusedError(111, "refused"))
    assert error.retryable
    assert not hasattr(error, "transient")


@pytest.mark.parametrize(
    "error_class",
    [
        domain.InvalidTransition,
        shadow_parts.UnreadableShadow,
        parts.DataUrlError,
        extraction.ExtractionError,
        distillation.InvalidDistillation,
        compaction.MissingMessages,
        transcripts.TranscriptError,
    ],
)
def test_the_domain_errors_derive_from_the_root_and_are_permanent(error_class: type[EchoError]) -> None:
    assert issubclass(error_class, EchoError)
    assert not issubclass(error_class, ValueError | LookupError)
    assert error_class.retryable is False


_CLASS = re.compile(r"^class (\w+)\(([^)]*)\):", re.MULTILINE)


@functools.cache
def _classes() -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """Every class under echo/ (name, base names, file), read from the source: no module imported."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, bases in _CLASS.findall(path.read_text(encoding="utf-8")):
            names = tuple(base.strip().rsplit(".", 1)[-1] for base in bases.split(",") if base.strip())
            found.append((name, names, str(path.relative_to(PACKAGE))))
    return tuple(found)


def _error_classes() -> dict[str, str]:
    """Every class that derives from EchoError (by name, through the tree), with its file."""
    found = {"EchoError": "errors.py"}
    grew = True
    while grew:
        grew = False
        for name, bases, where in _classes():
            if name not in found and any(base in found for base in bases):
                found[name] = where
                grew = True
    return found


def test_the_tree_in_the_roots_docstring_names_every_error_class() -> None:
    classes = _error_classes()
    assert {"StoreError", "RetryLater", "LLMError", "InvalidTransition", "MissingMessages"} <= set(classes)
    doc = errors.__doc__ or ""
    missing = {name: where for name, where in classes.items() if not re.search(rf"\b{name}\b", doc)}
    assert not missing, f"add these to the tree in echo/errors.py: {missing}"


def test_no_error_of_echo_derives_from_value_error_alone() -> None:
    """A domain error is an EchoError (so `except EchoError` and the retry flag hold for it); a
    ValueError stays for plain argument checks, never as an error class's only root."""
    offenders = [
        f"{where}:{name}" for name, bases, where in _classes() if bases in (("ValueError",), ("LookupError",))
    ]
    assert offenders == []


# -- the job worker's classification: a JobError says how, anything else is transient


async def _attempt_after(raised: BaseException) -> domain.Transition:
    async def handler(job: domain.Job) -> None:
        raise raised

    spec = registry.HandlerSpec(kind="unit", handler=handler, policy=domain.KindPolicy(max_attempts=5))
    job = domain.Job(id=1, kind="unit", payload={}, attempts=1)
    return await execution.attempt(job, spec, draw=0.5)


async def test_the_worker_reads_the_flag_and_the_delay_of_a_job_error() -> None:
    later = await _attempt_after(job_errors.RetryLater("busy", delay_seconds=7))
    assert (later.state, later.delay_seconds) == (domain.JobState.PENDING, 7)
    assert (await _attempt_after(job_errors.PermanentJobError("bad payload"))).state is domain.JobState.DEAD
    said_no = job_errors.RetryLater("busy")
    said_no.retryable = False  # the instance decides: the attribute, not the class, is read
    assert (await _attempt_after(said_no)).state is domain.JobState.DEAD


@pytest.mark.parametrize(
    "raised",
    [RuntimeError("bug"), store_errors.PermanentStoreError("syntax error"), job_errors.JobError("x")],
)
async def test_anything_else_a_handler_raises_is_transient(raised: Exception) -> None:
    transition = await _attempt_after(raised)
    assert transition.state is domain.JobState.PENDING
    assert transition.delay_seconds > 0  # the kind's backoff
