"""`echoctl`: help for every command, clear errors on bad flags and bad config (a real `serve` process:
tests/processes/test_serve_process.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
