"""What `echoctl serve` tells a newcomer: where to point Open WebUI once ready, and who runs the jobs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from echo.config.settings import Settings
from echo.entrypoints import runtime


def settings(tmp_path: Path, **changed: object) -> Settings:
    return Settings(data_dir=tmp_path, **changed)


def test_the_url_is_the_one_open_webui_can_use(tmp_path: Path) -> None:
    assert runtime.service_url(settings(tmp_path, allow_unauthenticated=True)) == "http://127.0.0.1:9099"
    everywhere = settings(tmp_path, api_key="k" * 20, host="0.0.0.0", port=8080)
    assert runtime.service_url(everywhere) == "http://<this machine's address>:8080"
    assert runtime.service_url(settings(tmp_path, api_key="k" * 20, host="::1")) == "http://[::1]:9099"
    named = settings(tmp_path, api_key="k" * 20, host="echo.internal")
    assert runtime.service_url(named) == "http://echo.internal:9099"


def test_the_ready_message_names_the_url_the_connection_and_the_key(tmp_path: Path) -> None:
    keyed = runtime.ready_message(settings(tmp_path, api_key="k" * 20), in_process=True)
    assert keyed.startswith("ECHO ready — point Open WebUI at http://127.0.0.1:9099: ")
    assert "Admin Panel → Settings → Connections → OpenAI API" in keyed
    assert "key: the value of ECHO_API_KEY" in keyed
    assert "ECHO_URL" in keyed  # the Open WebUI Function
    assert "echo_filter_function.py" in keyed
    assert "loopback only" in keyed  # Open WebUI in a container cannot reach 127.0.0.1 of the host
    assert "no job runs" not in keyed
    open_one = runtime.ready_message(settings(tmp_path, allow_unauthenticated=True), in_process=True)
    assert "key: any non-empty value (auth is off)" in open_one
    cluster = runtime.ready_message(
        settings(tmp_path, api_key="k" * 20, host="0.0.0.0", database_url="postgresql://db/echo"),
        in_process=False,
    )
    assert "loopback" not in cluster
    assert "no job runs in this process" in cluster
    assert "echoctl worker" in cluster
    assert "ECHO_INPROCESS_WORKER=true" in cluster


def test_no_worker_note_says_why_and_what_to_do(tmp_path: Path) -> None:
    external = runtime.no_worker_note(settings(tmp_path, api_key="k" * 20, database_url="postgresql://db/x"))
    assert external.startswith("ECHO_DATABASE_URL is set and ECHO_INPROCESS_WORKER is unset")
    chosen = runtime.no_worker_note(
        settings(tmp_path, api_key="k" * 20, database_url="postgresql://db/x", inprocess_worker=False)
    )
    assert chosen.startswith("ECHO_INPROCESS_WORKER=false")
    for note in (external, chosen):
        assert "summaries" in note
        assert "`echoctl worker`" in note
        assert "ECHO_INPROCESS_WORKER=true" in note


@pytest.mark.parametrize("tty", [True, False])
def test_ready_is_logged_once_and_printed_for_a_human_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tty: bool
) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(stderr, "isatty", lambda: tty)
    monkeypatch.setattr("sys.stderr", stderr)
    with capture_logs() as logs:
        runtime.announce_ready(settings(tmp_path, api_key="k" * 20), in_process=True)
    [ready] = logs
    assert ready["event"] == "ready"
    assert ready["url"] == "http://127.0.0.1:9099"
    assert ready["message"].startswith("ECHO ready — point Open WebUI at http://127.0.0.1:9099")
    printed = stderr.getvalue()
    assert printed == (f"\n{ready['message']}\n\n" if tty else "")
