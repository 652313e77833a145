"""Handlers by kind: registration rules, per-kind policies, the public API of `echo.jobs`."""

from __future__ import annotations

from pathlib import Path

import pytest

import echo.jobs
from echo.config.settings import Settings
from echo.jobs import domain, errors, kinds
from echo.jobs.registry import Registry


async def _noop(job: domain.Job) -> None:
    return None


def test_register_uses_the_kind_default_policy_and_overrides() -> None:
    registry = Registry()
    summary = registry.register(kinds.SUMMARY, _noop)
    assert summary.policy == kinds.POLICIES[kinds.SUMMARY]
    custom = registry.register("custom", _noop, max_attempts=2, concurrency=1)
    assert (custom.policy.max_attempts, custom.policy.concurrency) == (2, 1)
    assert custom.policy.retry == domain.RetryPolicy()
    assert registry.kinds == ("custom", "summary")
    assert "summary" in registry
    assert "merge" not in registry
    assert len(registry) == 2
    assert [spec.kind for spec in registry] == ["custom", "summary"]


def test_decorator_registers_and_returns_the_handler() -> None:
    registry = Registry()

    @registry.handler(kinds.MAP_REDUCE, retry=domain.RetryPolicy(base_seconds=1))
    async def reduce(job: domain.Job) -> None:
        return None

    spec = registry.get(kinds.MAP_REDUCE)
    assert spec.handler is reduce
    assert spec.policy.max_attempts == kinds.POLICIES[kinds.MAP_REDUCE].max_attempts
    assert spec.policy.retry.base_seconds == 1


def test_a_kind_is_registered_once_and_must_be_valid() -> None:
    registry = Registry()
    registry.register("summary", _noop)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("summary", _noop)
    with pytest.raises(ValueError, match="not a job kind"):
        registry.register("Bad-Kind", _noop)


def test_unknown_kind_is_a_permanent_error() -> None:
    with pytest.raises(errors.UnknownJobKind, match="merge") as caught:
        Registry().get("merge")
    assert isinstance(caught.value, errors.PermanentJobError)


def test_retry_later_refuses_a_negative_delay() -> None:
    assert errors.RetryLater(delay_seconds=3).delay_seconds == 3
    with pytest.raises(ValueError, match="negative"):
        errors.RetryLater(delay_seconds=-1)


def test_builtin_registry_runs_summaries_distillations_and_map_reduce(tmp_path: Path) -> None:
    registry = kinds.builtin_registry(Settings(data_dir=tmp_path), None)  # type: ignore[arg-type]
    assert set(registry.kinds) == {kinds.SUMMARY, kinds.DISTILL, kinds.MAP_REDUCE}


def test_public_api_is_pinned() -> None:
    assert sorted(echo.jobs.__all__) == [
        "Job",
        "JobError",
        "JobHandler",
        "JobInfo",
        "JobQueue",
        "JobState",
        "KindPolicy",
        "PermanentJobError",
        "Registry",
        "RetryLater",
        "RetryPolicy",
        "UnknownJobKind",
        "Worker",
        "run_worker",
    ]
    for name in echo.jobs.__all__:
        assert getattr(echo.jobs, name) is not None
    with pytest.raises(AttributeError):
        _ = echo.jobs.Nothing  # type: ignore[attr-defined]


def test_each_kind_has_a_timeout_that_registration_can_override() -> None:
    registry = Registry()
    assert registry.register(kinds.SUMMARY, _noop).policy.timeout_seconds == 300
    assert registry.register(kinds.MAP_REDUCE, _noop).policy.timeout_seconds == 900
    assert registry.register("custom", _noop, timeout_seconds=2.5).policy.timeout_seconds == 2.5

    @registry.handler("other", timeout_seconds=7)
    async def other(job: domain.Job) -> None:
        return None

    assert registry.get("other").policy.timeout_seconds == 7
    assert domain.KindPolicy().timeout_seconds == 300
    with pytest.raises(ValueError, match="timeout_seconds"):
        domain.KindPolicy(timeout_seconds=0)
