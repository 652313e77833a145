"""The hook service's background tasks run supervised: a config watcher that raises is logged,
counted, restarted, and shown by /readyz; no task of the runtime is started outside the supervisor."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from fakes.eventually import eventually_blocking
from fakes.live_server import LiveServer
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from echo.config.live import LiveConfig
from echo.config.settings import Settings
from echo.entrypoints.http import create_app
from echo.support import supervision

SERVICES = Path(__file__).resolve().parents[2] / "services" / "echo"


def test_a_config_watcher_that_raises_is_logged_counted_and_restarted(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    valves_file = tmp_path / "valves.yaml"
    valves_file.write_text("echo_memory:\n  WINDOW_SIZE: 7\n")
    settings = settings.model_copy(update={"valves_file": valves_file})
    config = LiveConfig(settings)
    config.load()
    checks = 0
    reload_if_changed = config.reload_if_changed

    def flaky() -> bool:
        nonlocal checks
        checks += 1
        if checks == 1:
            raise RuntimeError("file system went away")
        return reload_if_changed()

    monkeypatch.setattr(config, "reload_if_changed", flaky)
    before = REGISTRY.get_sample_value("echo_background_task_failures_total", {"task": "config-watch"}) or 0
    supervisor = supervision.Supervisor(backoff=supervision.Backoff(first_seconds=0.01, max_seconds=0.05))
    with (
        capture_logs() as logs,
        LiveServer(create_app(settings, config=config, supervisor=supervisor)) as server,
    ):
        eventually_blocking(lambda: checks >= 3, within=10)
        valves_file.write_text("echo_memory:\n  WINDOW_SIZE: 9\n")  # still watched after the restart
        eventually_blocking(lambda: config.valves("echo_memory").model_dump()["WINDOW_SIZE"] == 9, within=10)
        answer = httpx.get(f"{server.url}/readyz")
    after = REGISTRY.get_sample_value("echo_background_task_failures_total", {"task": "config-watch"})
    assert after == before + 1
    failed = [e for e in logs if e["event"] == "background_task_failed"]
    assert [(e["task"], e["error"]) for e in failed] == [
        ("config-watch", "RuntimeError: file system went away")
    ]
    assert answer.status_code == 200  # restarted: the replica stays in the Service
    background = answer.json()["checks"]["background"]
    assert background["ok"] is True
    assert background["tasks"]["config-watch"] == {
        "state": "running",
        "failures": 1,
        "error": "RuntimeError: file system went away",
    }


def test_every_task_of_the_runtime_is_started_by_the_supervisor() -> None:
    spawners = re.compile(r"\b(create_task|ensure_future|TaskGroup)\b")
    offenders = [
        f"{path.relative_to(SERVICES)}:{number}"
        for path in sorted(SERVICES.rglob("*.py"))
        if path.name != "supervision.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if spawners.search(line)
    ]
    assert offenders == []
