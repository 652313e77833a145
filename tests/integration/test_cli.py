"""`echoctl`: help for every command, clear errors on bad flags and bad config, a real `serve`."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from echo import cli

COMMANDS = ["serve", "worker", "operator", "migrate", "replay", "compact"]


def test_help_lists_and_explains_every_command() -> None:
    result = CliRunner().invoke(cli.main, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output
    for command in COMMANDS:
        sub = CliRunner().invoke(cli.main, [command, "--help"])
        assert sub.exit_code == 0
        assert len(sub.output.splitlines()) > 3


def test_bad_flag_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli.main, ["serve", "--port", "70000"])
    assert result.exit_code == 2
    assert "--port" in result.output
    assert CliRunner().invoke(cli.main, ["serve", "--bogus"]).exit_code == 2


def test_bad_environment_names_the_variable() -> None:
    result = CliRunner().invoke(cli.main, ["serve"], env={"ECHO_MAX_BODY_BYTES": "lots"})
    assert result.exit_code == 1
    assert "ECHO_MAX_BODY_BYTES" in result.output


def test_bad_valves_file_names_file_and_field(tmp_path: Path) -> None:
    valves_file = tmp_path / "valves.yaml"
    valves_file.write_text("echo_compression:\n  summary_model_max_context: 1000\n")
    result = CliRunner().invoke(
        cli.main, ["serve", "--data-dir", str(tmp_path)], env={"ECHO_VALVES_FILE": str(valves_file)}
    )
    assert result.exit_code == 1
    assert "invalid configuration" in result.output
    assert str(valves_file) in result.output
    assert "max_summary_tokens must be strictly below 80%" in result.output


def test_operator_needs_a_scope() -> None:
    result = CliRunner().invoke(cli.main, ["operator"])
    assert result.exit_code == 2
    assert "--all-namespaces" in result.output


def test_migrate_against_postgres() -> None:
    from echo.store import tenancy, testing

    dsn = testing.test_dsn()
    reason = asyncio.run(testing.unreachable(dsn))
    if reason:
        pytest.skip(f"PostgreSQL is not reachable at {dsn}: {reason}")
    tenant = testing.unique_tenant()
    env = {"ECHO_DATABASE_URL": dsn, "ECHO_TENANT": tenant, "ECHO_WORKER_METRICS_PORT": "0"}
    try:
        first = CliRunner().invoke(cli.main, ["migrate"], env=env)
        assert first.exit_code == 0, first.output
        assert "applied 0001_jobs" in first.output
        again = CliRunner().invoke(cli.main, ["migrate"], env=env)
        assert "nothing to apply" in again.output
    finally:
        asyncio.run(testing.drop_schema(dsn, tenancy.schema_for(tenant)))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _idle_connection_lifetime(port: int) -> tuple[bool, bool]:
    """Whether one keep-alive connection still serves a request after 0.5 s idle, then after 3 s more."""
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    answers = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request)
        assert connection.recv(65536).startswith(b"HTTP/1.1 200")
        for idle in (0.5, 3.0):
            time.sleep(idle)
            try:
                connection.sendall(request)
                answers.append(connection.recv(65536).startswith(b"HTTP/1.1 200"))
            except OSError:  # reset: closed
                answers.append(False)
    return answers[0], answers[1]


def test_serve_runs_embedded_with_state_under_data_dir(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    env["ECHO_KEEP_ALIVE_SECONDS"] = "2"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "echo.cli",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "state"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "echoctl serve did not answer in 30 s"
            time.sleep(0.1)
        listing = httpx.get(f"http://127.0.0.1:{port}/models").json()  # no key set: no auth
        assert {m["id"] for m in listing["data"]} == {"echo_context", "echo_compression", "echo_memory"}
        while (ready := httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)).status_code != 200:
            assert ready.status_code == 503  # unready while the embedder loads, never an error
            assert time.monotonic() < deadline + 60, ready.text
            time.sleep(0.2)
        checks = ready.json()["checks"]
        assert {name: check["ok"] for name, check in checks.items()} == dict.fromkeys(
            ("config", "background", "store", "embedder", "vectors"), True
        )
        assert checks["embedder"]["dimension"] == 384  # the packaged MiniLM
        assert (tmp_path / "state" / "postgres").is_dir()  # embedded PostgreSQL
        assert (tmp_path / "state" / "qdrant").is_dir()  # Qdrant local mode
        assert _idle_connection_lifetime(port) == (True, False)  # kept 0.5 s, closed by 3 s
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0]
    assert "auth_disabled" in output  # said loudly
    assert "inprocess_worker_started" in output  # embedded mode runs the job worker in-process
    assert "worker_stopped" in output or process.returncode == 0
