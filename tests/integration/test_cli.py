"""`echoctl`: help for every command, clear errors on bad flags and bad config (a real `serve` process:
tests/processes/test_serve_process.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from echo.entrypoints import cli

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
        cli.main,
        ["serve", "--data-dir", str(tmp_path)],
        env={"ECHO_VALVES_FILE": str(valves_file), "ECHO_API_KEY": "a-key"},
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
    from echo.adapters.store import testing
    from echo.config import tenancy

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


# --- Auth is a choice made out loud (issue 18 item 4) ---

NO_KEYS: dict[str, str | None] = dict.fromkeys(
    ("ECHO_API_KEY", "ECHO_ADMIN_KEY", "ECHO_ALLOW_UNAUTHENTICATED", "ECHO_HOST", "ECHO_PORT"), None
)
KEY, ADMIN = "hooks-key-5f1c0d2e", "admin-key-9a8b7c6d"


@pytest.fixture
def uvicorn_runs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What `serve` would hand uvicorn (nothing is served)."""
    import uvicorn

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append(kwargs))
    return calls


def test_serve_without_a_key_refuses_to_start_and_says_what_to_set(
    tmp_path: Path, uvicorn_runs: list[dict[str, Any]]
) -> None:
    state = tmp_path / "state"
    result = CliRunner().invoke(cli.main, ["serve", "--data-dir", str(state)], env=NO_KEYS)
    assert result.exit_code == 1
    assert "ECHO_API_KEY" in result.output
    assert "ECHO_ALLOW_UNAUTHENTICATED=true" in result.output
    assert uvicorn_runs == []
    assert not state.exists()  # refused before anything was made


@pytest.mark.parametrize("variable", ["ECHO_API_KEY", "ECHO_ADMIN_KEY"])
def test_serve_with_an_empty_key_names_the_variable(
    tmp_path: Path, uvicorn_runs: list[dict[str, Any]], variable: str
) -> None:
    env = {**NO_KEYS, "ECHO_API_KEY": KEY, variable: "  "}
    result = CliRunner().invoke(cli.main, ["serve", "--data-dir", str(tmp_path)], env=env)
    assert result.exit_code == 1
    assert f"{variable}: must not be empty" in result.output
    assert uvicorn_runs == []


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ECHO_API_KEY": KEY, "ECHO_ADMIN_KEY": KEY}, "ECHO_ADMIN_KEY: must differ from ECHO_API_KEY"),
        (
            {"ECHO_API_KEY": KEY, "ECHO_ALLOW_UNAUTHENTICATED": "true"},
            "ECHO_ALLOW_UNAUTHENTICATED: true while",
        ),
        (
            {"ECHO_API_KEY": KEY, "ECHO_GEMINI_API_KEY": ADMIN, "ECHO_LLM_PROVIDER": "openai"},
            "openai_base_url: required",
        ),
    ],
)
def test_a_settings_error_never_prints_a_key(
    tmp_path: Path, uvicorn_runs: list[dict[str, Any]], env: dict[str, str], message: str
) -> None:
    """A rule across settings sees every setting: its error names the rule, never the values."""
    result = CliRunner().invoke(cli.main, ["serve", "--data-dir", str(tmp_path)], env={**NO_KEYS, **env})
    assert result.exit_code == 1
    assert message in result.output
    assert KEY not in result.output
    assert ADMIN not in result.output
    assert "ECHO_?" not in result.output
    assert "Value error" not in result.output


def test_serve_without_auth_when_asked_binds_to_loopback(
    tmp_path: Path, uvicorn_runs: list[dict[str, Any]]
) -> None:
    env = {**NO_KEYS, "ECHO_ALLOW_UNAUTHENTICATED": "true"}
    result = CliRunner().invoke(cli.main, ["serve", "--data-dir", str(tmp_path)], env=env)
    assert result.exit_code == 0, result.output
    assert [(run["host"], run["port"]) for run in uvicorn_runs] == [("127.0.0.1", 9099)]
    assert "unauthenticated_on_network" not in result.output


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--host", "0.0.0.0"], {}), ([], {"ECHO_HOST": "::"}), (["--host", "echo.internal"], {})],
)
def test_serve_without_auth_on_a_network_address_says_so_loudly(
    tmp_path: Path, uvicorn_runs: list[dict[str, Any]], args: list[str], env: dict[str, str]
) -> None:
    """Told otherwise (--host or ECHO_HOST), it binds there, with a warning that anyone reaching it
    is trusted."""
    env = {**NO_KEYS, "ECHO_ALLOW_UNAUTHENTICATED": "true", **env}
    result = CliRunner().invoke(cli.main, ["serve", "--data-dir", str(tmp_path), *args], env=env)
    assert result.exit_code == 0, result.output
    host = args[1] if args else env["ECHO_HOST"]
    assert [run["host"] for run in uvicorn_runs] == [host]
    assert "unauthenticated_on_network" in result.output


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_serve_without_auth_on_a_loopback_address_is_quiet(
    tmp_path: Path, uvicorn_runs: list[dict[str, Any]], host: str
) -> None:
    env = {**NO_KEYS, "ECHO_ALLOW_UNAUTHENTICATED": "true"}
    result = CliRunner().invoke(cli.main, ["serve", "--data-dir", str(tmp_path), "--host", host], env=env)
    assert result.exit_code == 0, result.output
    assert "unauthenticated_on_network" not in result.output


def test_serve_with_a_key_binds_where_told(tmp_path: Path, uvicorn_runs: list[dict[str, Any]]) -> None:
    env = {**NO_KEYS, "ECHO_API_KEY": KEY, "ECHO_ADMIN_KEY": ADMIN, "ECHO_PORT": "9123"}
    result = CliRunner().invoke(
        cli.main, ["serve", "--data-dir", str(tmp_path), "--host", "0.0.0.0"], env=env
    )
    assert result.exit_code == 0, result.output
    assert [(run["host"], run["port"]) for run in uvicorn_runs] == [("0.0.0.0", 9123)]
    assert "unauthenticated_on_network" not in result.output
    assert KEY not in result.output
    assert ADMIN not in result.output
