"""A child event's status refresh writes with optimistic concurrency and retries conflicts, boundedly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from echo_operator import children
from echo_operator.kube import ApiError

SPEC: dict[str, Any] = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}}


class ConflictingKube:
    """An in-memory API with one EchoDeployment and no children; its status writes meet `conflicts`
    409s first, and each read sees a newer resourceVersion (someone else keeps writing)."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.reads = 0
        self.writes: list[tuple[Mapping[str, Any], str | None]] = []

    async def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        if kind != "EchoDeployment":
            return None
        self.reads += 1
        return {"metadata": {"name": name, "resourceVersion": str(100 + self.reads)}, "spec": SPEC}

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        self.writes.append((status, resource_version))
        if self.conflicts > 0:
            self.conflicts -= 1
            raise ApiError(409, "Conflict", "PATCH", "/status")
        return {}


async def test_a_conflict_is_retried_from_a_fresh_read() -> None:
    kube = ConflictingKube(conflicts=2)
    assert await children.refresh_status(kube, "tenants", "acme") is True  # type: ignore[arg-type]
    assert kube.reads == 3
    assert [version for _, version in kube.writes] == ["101", "102", "103"]  # each from its own read


async def test_conflicts_are_retried_a_bounded_number_of_times() -> None:
    kube = ConflictingKube(conflicts=100)
    with pytest.raises(ApiError) as raised:
        await children.refresh_status(kube, "tenants", "acme")  # type: ignore[arg-type]
    assert raised.value.status == 409
    assert kube.reads == len(kube.writes) == children.STATUS_ATTEMPTS


async def test_other_errors_are_not_retried() -> None:
    kube = ConflictingKube(conflicts=0)

    async def outage(*_: Any, **__: Any) -> dict[str, Any]:
        raise ApiError(503, "Service Unavailable", "PATCH", "/status")

    kube.patch_status = outage  # type: ignore[method-assign]
    with pytest.raises(ApiError):
        await children.refresh_status(kube, "tenants", "acme")  # type: ignore[arg-type]
    assert kube.reads == 1
