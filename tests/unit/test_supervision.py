"""The supervisor of background tasks: failures logged, counted, restarted or reported, never silent."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from fakes.eventually import eventually
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from echo.errors import ConfigError, EchoError
from echo.support import supervision

FAST = supervision.Backoff(first_seconds=0.01, max_seconds=0.05)


def _failures(task: str) -> float:
    return REGISTRY.get_sample_value("echo_background_task_failures_total", {"task": task}) or 0.0


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = supervision.Backoff(first_seconds=1, factor=2, max_seconds=5)
    assert [backoff.delay(n) for n in (1, 2, 3, 4, 100_000)] == [1, 2, 4, 5, 5]
    with pytest.raises(ValueError, match="first_seconds"):
        supervision.Backoff(first_seconds=10, max_seconds=1)


async def test_a_failing_loop_is_logged_counted_and_restarted() -> None:
    supervisor = supervision.Supervisor(backoff=FAST)
    runs = 0
    forever = asyncio.Event()

    async def loop() -> None:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise RuntimeError(f"boom {runs}")
        await forever.wait()

    before = _failures("unit-loop")
    with capture_logs() as logs:
        handle = supervisor.keep_running("unit-loop", loop, tenant="t1")
        await eventually(lambda: runs == 3, within=5, interval=0.005)
    assert _failures("unit-loop") == before + 2
    failed = [entry for entry in logs if entry["event"] == "background_task_failed"]
    assert [(e["task"], e["error"], e["log_level"], e["tenant"]) for e in failed] == [
        ("unit-loop", "RuntimeError: boom 1", "error", "t1"),
        ("unit-loop", "RuntimeError: boom 2", "error", "t1"),
    ]
    assert all(isinstance(e["exc_info"], RuntimeError) for e in failed)
    check = supervisor.readiness()
    assert check["ok"] is True  # restarting is the remedy: the service stays ready
    assert check["tasks"]["unit-loop"] == {"state": "running", "failures": 2, "error": "RuntimeError: boom 2"}
    assert str(handle.error) == "boom 2"
    await supervisor.aclose()
    assert handle.done()
    assert _failures("unit-loop") == before + 2  # cancellation is not a failure


async def test_a_failed_vital_task_makes_readiness_fail_and_is_not_restarted() -> None:
    supervisor = supervision.Supervisor(backoff=FAST)
    calls = 0

    async def warm_up() -> None:
        nonlocal calls
        calls += 1
        raise PermissionError(13, "Permission denied", "/data/qdrant")

    before = _failures("unit-warm-up")
    handle = supervisor.run("unit-warm-up", warm_up())
    await handle.task  # never raises: the supervisor keeps the error
    await asyncio.sleep(0.05)
    assert calls == 1
    assert isinstance(handle.error, PermissionError)
    assert _failures("unit-warm-up") == before + 1
    check = supervisor.readiness()
    assert check["ok"] is False
    assert (
        check["error"] == "unit-warm-up failed: PermissionError: [Errno 13] Permission denied: '/data/qdrant'"
    )
    assert check["tasks"]["unit-warm-up"]["state"] == "failed"
    assert (
        supervisor.failure("unit-warm-up") == "PermissionError: [Errno 13] Permission denied: '/data/qdrant'"
    )


async def test_a_failed_non_vital_task_is_counted_but_not_reported() -> None:
    supervisor = supervision.Supervisor()

    async def job() -> None:
        raise ValueError("bad row")

    before = _failures("unit-job")
    with capture_logs() as logs:
        handle = supervisor.run("unit-job", job(), vital=False, job_id=7)
        await handle.task
    assert _failures("unit-job") == before + 1
    assert [e.get("job_id") for e in logs if e["event"] == "background_task_failed"] == [7]
    assert supervisor.readiness() == {"ok": True, "tasks": {}}


async def test_tasks_that_return_are_done_and_cancelled_ones_are_not_failures() -> None:
    supervisor = supervision.Supervisor(backoff=FAST)
    runs = 0

    async def once() -> None:
        nonlocal runs
        runs += 1

    finished = supervisor.keep_running("unit-once", once)
    await finished.task
    await asyncio.sleep(0.03)
    assert runs == 1
    hang: Callable[[], Awaitable[None]] = asyncio.Event().wait
    stuck = supervisor.run("unit-stuck", hang())
    before = _failures("unit-stuck")
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck.task
    assert _failures("unit-stuck") == before
    tasks = supervisor.readiness()["tasks"]
    assert tasks["unit-once"]["state"] == "done"
    assert tasks["unit-stuck"]["state"] == "stopped"  # by its owner: not a failure
    assert supervisor.readiness()["ok"] is True


async def test_the_backoff_starts_over_after_a_long_healthy_run() -> None:
    now = [0.0]
    supervisor = supervision.Supervisor(
        backoff=supervision.Backoff(first_seconds=0.001, factor=10, max_seconds=0.1), clock=lambda: now[0]
    )
    delays: list[float] = []
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            now[0] += 1.0  # the third run lasts longer than the cap before failing
        if runs == 4:
            await asyncio.Event().wait()
        raise RuntimeError("again")

    with capture_logs() as logs:
        supervisor.keep_running("unit-reset", flaky)
        await eventually(lambda: runs == 4, within=5, interval=0.005)
    delays = [e["restart_in"] for e in logs if e["event"] == "background_task_failed"]
    assert delays == [0.001, 0.01, 0.001]
    await supervisor.aclose()


async def test_a_restart_waits_at_least_the_delay_an_error_asked_for_within_the_cap() -> None:
    supervisor = supervision.Supervisor(backoff=FAST)  # 0.01 s, 0.02 s … at most 0.05 s
    raised = [
        EchoError("busy", retry_after_s=0.03),  # longer than the backoff: honoured
        EchoError("busy", retry_after_s=0.0),  # shorter: the backoff (0.02 s) stands
        EchoError("down for an hour", retry_after_s=3600),  # never past the cap
        ConfigError("the mounted file does not parse"),  # permanent, restarted all the same
    ]
    runs = 0

    async def loop() -> None:
        nonlocal runs
        runs += 1
        if raised:
            raise raised.pop(0)
        await asyncio.Event().wait()

    with capture_logs() as logs:
        supervisor.keep_running("unit-asked", loop)
        await eventually(lambda: runs == 5, within=5, interval=0.005)
    delays = [e["restart_in"] for e in logs if e["event"] == "background_task_failed"]
    assert delays == [0.03, 0.02, 0.05, 0.05]
    assert supervisor.readiness()["tasks"]["unit-asked"]["state"] == "running"
    await supervisor.aclose()
