"""Job handlers by kind, each with the policy its kind runs under.

    registry = Registry()

    @registry.handler(kinds.SUMMARY, max_attempts=3, timeout_seconds=120)
    async def summarise(job: Job) -> None: ...

A handler is any `JobHandler`: an async callable taking the claimed `Job`. Handlers that need the
store, an LLM or the vectors are objects built with them (see `kinds.builtin_registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

from echo.jobs import domain, errors, kinds

__all__ = ["HandlerSpec", "JobHandler", "Registry"]


class JobHandler(Protocol):
    """Runs one job; returns on success, raises `RetryLater`/`PermanentJobError` (or anything) else."""

    async def __call__(self, job: domain.Job, /) -> None: ...


@dataclass(frozen=True)
class HandlerSpec:
    kind: str
    handler: JobHandler
    policy: domain.KindPolicy


class Registry:
    """Kinds this process can run, their handlers and policies. Register once per kind."""

    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}

    def register(
        self,
        kind: str,
        handler: JobHandler,
        *,
        policy: domain.KindPolicy | None = None,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> HandlerSpec:
        """Add the handler of `kind`; options override `policy` (default: the kind's in `kinds`)."""
        domain.validate_kind(kind)
        if kind in self._specs:
            raise ValueError(f"a handler is already registered for job kind {kind!r}")
        base = policy if policy is not None else kinds.default_policy(kind)
        chosen = replace(
            base,
            max_attempts=base.max_attempts if max_attempts is None else max_attempts,
            concurrency=base.concurrency if concurrency is None else concurrency,
            retry=base.retry if retry is None else retry,
            timeout_seconds=base.timeout_seconds if timeout_seconds is None else timeout_seconds,
        )
        spec = HandlerSpec(kind, handler, chosen)
        self._specs[kind] = spec
        return spec

    def handler(
        self,
        kind: str,
        *,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> Callable[[JobHandler], JobHandler]:
        """Decorator form of `register`."""

        def decorate(handler: JobHandler) -> JobHandler:
            self.register(
                kind,
                handler,
                max_attempts=max_attempts,
                concurrency=concurrency,
                retry=retry,
                timeout_seconds=timeout_seconds,
            )
            return handler

        return decorate

    def get(self, kind: str) -> HandlerSpec:
        try:
            return self._specs[kind]
        except KeyError:
            raise errors.UnknownJobKind(f"no handler is registered for job kind {kind!r}") from None

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def __contains__(self, kind: object) -> bool:
        return kind in self._specs

    def __iter__(self) -> Iterator[HandlerSpec]:
        return iter(self._specs[kind] for kind in self.kinds)

    def __len__(self) -> int:
        return len(self._specs)
