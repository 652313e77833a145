"""Job handlers by kind, each with the policy its kind runs under and the payload model it reads.

    registry = Registry()

    @registry.handler(kinds.SUMMARY, payload=SummaryPayload, max_attempts=3, timeout_seconds=120)
    async def summarise(job: Job, payload: SummaryPayload) -> None: ...

A handler registered with a `payload` model (`echo.queue.payloads.Payload`) is a `PayloadHandler`:
it gets the claimed `Job` and its stored JSON validated into that model, once, by the engine
(`HandlerSpec.run`); a payload that does not validate dead-letters the job without calling it.
Without one it is a `JobHandler`, taking the `Job` alone (its raw `payload` mapping). Handlers that
need the store, an LLM or the vectors are objects built with them (see `handlers.builtin_registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, cast, overload

from echo.domain import jobs as domain
from echo.domain import kinds
from echo.queue import errors, payloads

__all__ = ["HandlerSpec", "JobHandler", "PayloadHandler", "Registry"]

P = TypeVar("P", bound=payloads.Payload)
P_contra = TypeVar("P_contra", bound=payloads.Payload, contravariant=True)


class JobHandler(Protocol):
    """Runs one job; returns on success, raises `RetryLater`/`PermanentJobError` (or anything) else."""

    async def __call__(self, job: domain.Job, /) -> None: ...


class PayloadHandler(Protocol[P_contra]):
    """Runs one job of a kind with a declared payload: `payload` is `job.payload` as its model."""

    async def __call__(self, job: domain.Job, payload: P_contra, /) -> None: ...


@dataclass(frozen=True)
class HandlerSpec:
    """A registered kind: its handler, policy, and payload model (None: the handler reads the raw JSON)."""

    kind: str
    handler: JobHandler | PayloadHandler[Any]
    policy: domain.KindPolicy
    payload: type[payloads.Payload] | None = None

    async def run(self, job: domain.Job) -> None:
        """Run the handler on `job`, its payload first validated into the kind's model: the one
        validation the payload gets (`PermanentJobError` naming the field, the handler not called)."""
        if self.payload is None:
            await cast(JobHandler, self.handler)(job)
            return
        payload = self.payload.decode(job.payload)
        await cast("PayloadHandler[Any]", self.handler)(job, payload)


class Registry:
    """Kinds this process can run, their handlers and policies. Register once per kind."""

    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}

    @overload
    def register(
        self,
        kind: str,
        handler: JobHandler,
        *,
        payload: None = None,
        policy: domain.KindPolicy | None = None,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> HandlerSpec: ...

    @overload
    def register(
        self,
        kind: str,
        handler: PayloadHandler[P],
        *,
        payload: type[P],
        policy: domain.KindPolicy | None = None,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> HandlerSpec: ...

    def register(
        self,
        kind: str,
        handler: JobHandler | PayloadHandler[Any],
        *,
        payload: type[payloads.Payload] | None = None,
        policy: domain.KindPolicy | None = None,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> HandlerSpec:
        """Add the handler of `kind` (given `payload`, its model, when the kind declares one); options
        override `policy` (default: the kind's in `kinds`)."""
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
        spec = HandlerSpec(kind, handler, chosen, payload)
        self._specs[kind] = spec
        return spec

    @overload
    def handler(
        self,
        kind: str,
        *,
        payload: None = None,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> Callable[[JobHandler], JobHandler]: ...

    @overload
    def handler(
        self,
        kind: str,
        *,
        payload: type[P],
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> Callable[[PayloadHandler[P]], PayloadHandler[P]]: ...

    def handler(
        self,
        kind: str,
        *,
        payload: type[payloads.Payload] | None = None,
        max_attempts: int | None = None,
        concurrency: int | None = None,
        retry: domain.RetryPolicy | None = None,
        timeout_seconds: float | None = None,
    ) -> Callable[[Any], Any]:
        """Decorator form of `register`."""

        def decorate(handler: Any) -> Any:
            self.register(
                kind,
                handler,
                payload=payload,
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
