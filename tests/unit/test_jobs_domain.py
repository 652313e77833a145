"""The pure part of the job queue: backoff, transitions after an attempt, the state machine."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain import jobs as domain
from echo.domain.jobs import Failed, JobState, KindPolicy, RetryPolicy, Succeeded

draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


def test_backoff_doubles_from_base_without_jitter() -> None:
    policy = RetryPolicy(base_seconds=2, factor=2, max_seconds=30, jitter=0)
    assert [policy.delay(n, 0.5) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]


@given(attempt=st.integers(min_value=1, max_value=10_000), draw=draws)
def test_backoff_stays_within_jitter_band_and_cap(attempt: int, draw: float) -> None:
    policy = RetryPolicy(base_seconds=1, factor=3, max_seconds=120, jitter=0.25)
    delay = policy.delay(attempt, draw)
    raw = min(120, 3 ** min(attempt - 1, 10))
    assert raw * 0.75 - 1e-9 <= delay <= raw + 1e-9
    assert delay <= policy.max_seconds


@given(attempt=st.integers(min_value=1, max_value=50), draw=draws)
def test_backoff_never_decreases_with_attempts_for_the_same_draw(attempt: int, draw: float) -> None:
    policy = RetryPolicy()
    assert policy.delay(attempt + 1, draw) >= policy.delay(attempt, draw)


def test_jitter_spreads_a_burst() -> None:
    policy = RetryPolicy(base_seconds=10, jitter=0.5)
    assert policy.delay(1, 0.0) == 10
    assert policy.delay(1, 0.999) == pytest.approx(5.005)


@pytest.mark.parametrize(
    "kwargs",
    [{"base_seconds": -1}, {"factor": 0.5}, {"max_seconds": 1, "base_seconds": 2}, {"jitter": 1.5}],
)
def test_bad_retry_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message names the rule
        RetryPolicy(**kwargs)


def test_bad_kind_policies_and_attempt_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        KindPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="at least 1"):
        KindPolicy(concurrency=0)
    with pytest.raises(ValueError, match="starts at 1"):
        RetryPolicy().delay(0, 0.5)


def test_success_is_done() -> None:
    assert domain.after_attempt(1, KindPolicy(), Succeeded(), 0.3) == domain.Transition(JobState.DONE)


def test_failure_retries_with_backoff_and_keeps_the_error() -> None:
    policy = KindPolicy(max_attempts=3, retry=RetryPolicy(base_seconds=4, jitter=0))
    first = domain.after_attempt(1, policy, Failed("boom"), 0.5)
    second = domain.after_attempt(2, policy, Failed("boom again"), 0.5)
    assert (first.state, first.delay_seconds, first.last_error) == (JobState.PENDING, 4, "boom")
    assert (second.state, second.delay_seconds, second.last_error) == (JobState.PENDING, 8, "boom again")


def test_last_allowed_attempt_dead_letters_with_its_error() -> None:
    transition = domain.after_attempt(3, KindPolicy(max_attempts=3), Failed("poison"), 0.5)
    assert transition == domain.Transition(JobState.DEAD, last_error="poison")


def test_permanent_failure_dead_letters_at_once() -> None:
    transition = domain.after_attempt(1, KindPolicy(max_attempts=9), Failed("bad payload", permanent=True), 0)
    assert transition.state is JobState.DEAD


def test_retry_later_uses_the_delay_asked_for_but_still_counts() -> None:
    policy = KindPolicy(max_attempts=2)
    asked = domain.after_attempt(1, policy, Failed("rate limited", retry_after=42.0), 0.5)
    assert (asked.state, asked.delay_seconds) == (JobState.PENDING, 42.0)
    assert (
        domain.after_attempt(2, policy, Failed("rate limited", retry_after=42.0), 0.5).state is JobState.DEAD
    )


@given(
    attempts=st.integers(min_value=1, max_value=20),
    max_attempts=st.integers(min_value=1, max_value=20),
    permanent=st.booleans(),
    draw=draws,
)
def test_a_failure_never_outlives_the_attempt_budget(
    attempts: int, max_attempts: int, permanent: bool, draw: float
) -> None:
    transition = domain.after_attempt(
        attempts, KindPolicy(max_attempts=max_attempts), Failed("x", permanent), draw
    )
    dead = permanent or attempts >= max_attempts
    assert transition.state is (JobState.DEAD if dead else JobState.PENDING)
    assert transition.last_error == "x"
    domain.check_transition(JobState.RUNNING, transition.state)


def test_claim_of_a_job_whose_workers_kept_dying_dead_letters_it() -> None:
    policy = KindPolicy(max_attempts=2)
    assert domain.on_claim(2, policy, None) is None
    exhausted = domain.on_claim(3, policy, "OOMKilled?")
    assert exhausted is not None
    assert exhausted.state is JobState.DEAD
    assert exhausted.last_error is not None
    assert exhausted.last_error.startswith("OOMKilled?; 2 attempts")


def test_release_refunds_the_attempt() -> None:
    assert domain.on_release() == domain.Transition(JobState.PENDING, refund_attempt=True)


def test_state_machine() -> None:
    domain.check_transition(JobState.PENDING, JobState.RUNNING)
    domain.check_transition(JobState.DEAD, JobState.PENDING)
    for final in (JobState.DONE, JobState.DEAD):
        with pytest.raises(domain.InvalidTransition):
            domain.check_transition(final, JobState.RUNNING)
    with pytest.raises(domain.InvalidTransition, match="a pending job cannot become done"):
        domain.check_transition(JobState.PENDING, JobState.DONE)


@pytest.mark.parametrize("kind", ["summary", "map_reduce", "a1"])
def test_kinds_are_metric_label_safe(kind: str) -> None:
    assert domain.validate_kind(kind) == kind


@pytest.mark.parametrize("kind", ["", "Summary", "1x", "map-reduce", "x" * 64, "a b"])
def test_bad_kinds_are_refused(kind: str) -> None:
    with pytest.raises(ValueError, match="not a job kind"):
        domain.validate_kind(kind)


def test_errors_are_described_and_bounded() -> None:
    assert domain.describe_error(ValueError("bad")) == "ValueError: bad"
    assert domain.describe_error(TimeoutError()) == "TimeoutError"
    long = domain.describe_error(RuntimeError("x" * 10_000))
    assert len(long) == domain.ERROR_LIMIT
    assert long.endswith("…")


def test_domain_imports_only_the_standard_library() -> None:
    """The standard library and the exception root (`echo.errors`, itself pure), nothing else."""
    source = Path(domain.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != "echo.errors":
            imported.add(node.module.split(".")[0])
    assert imported <= {
        "__future__",
        "re",
        "collections",
        "dataclasses",
        "datetime",
        "enum",
        "types",
        "typing",
    }


def test_a_timed_out_attempt_is_a_transient_failure_retried_with_backoff() -> None:
    policy = KindPolicy(max_attempts=2, retry=RetryPolicy(base_seconds=5, jitter=0), timeout_seconds=0.25)
    outcome = domain.timed_out(policy)
    assert outcome == Failed("timed out after 0.25 s")
    assert domain.after_attempt(1, policy, outcome, 0.0) == domain.Transition(
        JobState.PENDING, delay_seconds=5, last_error="timed out after 0.25 s"
    )
    assert domain.after_attempt(2, policy, outcome, 0.0).state is JobState.DEAD
