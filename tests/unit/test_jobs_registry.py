"""Handlers by kind: registration rules, per-kind policies, payload models validated once before the
handler runs, the public API of `echo.queue`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, cast

import pytest
from pydantic import Field

import echo.queue
from echo.adapters import in_memory_store
from echo.capabilities import handlers
from echo.capabilities.compression import summary
from echo.capabilities.context import map_reduce
from echo.capabilities.memory import distill
from echo.config.settings import Settings
from echo.domain import jobs as domain
from echo.domain import kinds
from echo.ports import backends as backends_port
from echo.queue import errors, execution, payloads
from echo.queue.registry import Registry


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
    assert errors.RetryLater(delay_seconds=3).retry_after_s == 3
    with pytest.raises(ValueError, match="negative"):
        errors.RetryLater(delay_seconds=-1)


def _repositories() -> backends_port.Repositories:
    """One tenant on the in-memory store; no queue (the handlers enqueue nothing)."""
    tables = in_memory_store.Tables()
    return backends_port.Repositories(
        tenant="t1",
        conversations=in_memory_store.Conversations(tables),
        memories=in_memory_store.Memories(tables),
        attachments=in_memory_store.Attachments(tables),
        registries=in_memory_store.Registries(tables),
        shadow=in_memory_store.ShadowStore(tables),
        transactions=tables,
        jobs=cast(Any, None),
    )


def test_builtin_registry_runs_summaries_distillations_and_map_reduce(tmp_path: Path) -> None:
    repositories = _repositories()
    registry = handlers.builtin_registry(Settings(data_dir=tmp_path), repositories)
    assert set(registry.kinds) == {kinds.SUMMARY, kinds.DISTILL, kinds.MAP_REDUCE}
    by_kind = {spec.kind: spec.handler for spec in registry}
    summarise, distil, ingest = by_kind[kinds.SUMMARY], by_kind[kinds.DISTILL], by_kind[kinds.MAP_REDUCE]
    assert isinstance(summarise, summary.SummaryHandler)
    assert summarise.store is repositories.conversations
    assert isinstance(distil, distill.DistillHandler)  # the repositories given, no adapter built
    assert (distil.conversations, distil.memories, distil.transactions) == (
        repositories.conversations,
        repositories.memories,
        repositories.transactions,
    )
    assert isinstance(ingest, map_reduce.MapReduceHandler)
    assert ingest.registry is repositories.attachments
    assert {spec.kind: spec.payload.KIND for spec in registry if spec.payload is not None} == {
        kinds.SUMMARY: kinds.SUMMARY,
        kinds.DISTILL: kinds.DISTILL,
        kinds.MAP_REDUCE: kinds.MAP_REDUCE,
    }  # every built-in kind declares its payload


class Merge(payloads.Payload):
    KIND: ClassVar[str] = kinds.MERGE

    user_id: str = Field(min_length=1)
    memory_ids: tuple[str, ...] = Field(min_length=2)


class Merges:
    def __init__(self) -> None:
        self.seen: list[tuple[domain.Job, Merge]] = []

    async def __call__(self, job: domain.Job, payload: Merge, /) -> None:
        self.seen.append((job, payload))


def _job(payload: object, attempts: int = 1) -> domain.Job:
    return domain.Job(id=7, kind=kinds.MERGE, payload=payload, attempts=attempts)  # type: ignore[arg-type]


async def test_a_kind_with_a_payload_model_gets_its_payload_validated_into_it() -> None:
    handler = Merges()
    spec = Registry().register(kinds.MERGE, handler, payload=Merge)
    assert (spec.payload, spec.handler) == (Merge, handler)
    job = _job({"user_id": "u1", "memory_ids": ["a", "b"], "from_a_newer_release": True})
    await spec.run(job)
    assert handler.seen == [(job, Merge(user_id="u1", memory_ids=("a", "b")))]


async def test_a_payload_that_does_not_validate_is_dead_at_its_first_attempt_naming_the_field() -> None:
    handler = Merges()
    spec = Registry().register(kinds.MERGE, handler, payload=Merge, max_attempts=5)
    transition = await execution.attempt(_job({"user_id": "u1", "memory_ids": ["a"]}), spec, 0.5)
    assert transition.state is domain.JobState.DEAD  # at attempt 1 of 5: never a retry loop
    assert transition.last_error == (
        "PermanentJobError: malformed merge payload: memory_ids: Tuple should have at least 2 items after"
        " validation, not 1"
    )
    later = await execution.attempt(_job({"user_id": "u1", "memory_ids": ["a", "b"], "v": 2}), spec, 0.5)
    assert (
        later.last_error
        == "PermanentJobError: malformed merge payload: v: this worker reads version 1, not 2"
    )
    assert handler.seen == []  # the handler never saw either


async def test_the_decorator_declares_the_payload_too_and_a_kind_without_one_gets_the_raw_job() -> None:
    registry = Registry()
    seen: list[object] = []

    @registry.handler(kinds.MERGE, payload=Merge)
    async def merge(job: domain.Job, payload: Merge, /) -> None:
        seen.append(payload)

    @registry.handler("custom")
    async def custom(job: domain.Job) -> None:
        seen.append(job.payload)

    assert registry.get(kinds.MERGE).payload is Merge
    assert registry.get("custom").payload is None
    await registry.get(kinds.MERGE).run(_job({"user_id": "u", "memory_ids": ["a", "b"]}))
    await registry.get("custom").run(_job({"anything": 1}))
    assert seen == [Merge(user_id="u", memory_ids=("a", "b")), {"anything": 1}]


def test_public_api_is_pinned() -> None:
    assert sorted(echo.queue.__all__) == [
        "Job",
        "JobError",
        "JobHandler",
        "JobInfo",
        "JobQueue",
        "JobState",
        "KindPolicy",
        "Payload",
        "PayloadHandler",
        "PermanentJobError",
        "Registry",
        "RetryLater",
        "RetryPolicy",
        "UnknownJobKind",
        "Worker",
    ]
    for name in echo.queue.__all__:
        assert getattr(echo.queue, name) is not None
    with pytest.raises(AttributeError):
        _ = echo.queue.Nothing  # type: ignore[attr-defined]


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
