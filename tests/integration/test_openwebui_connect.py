"""`echoctl openwebui connect` as a user types it, against a fake Open WebUI admin API over real HTTP
(tests/fakes/openwebui_admin.py): install, update, a second run, --dry-run, a refused key, an Open
WebUI that is not there, and no key in any output. Against a real Open WebUI 0.12.4:
e2e/openwebui_live.py (`make openwebui-live`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fakes.openwebui_admin import OWUI_ADMIN_KEY, OWUI_USER_KEY, FakeOpenWebUI, fake_openwebui

from echo.entrypoints import cli
from echo.entrypoints import openwebui_connect as oc

ECHO_URL = "http://echo-hooks:9099"
ECHO_KEY = "echo-hooks-secret-key-42"
SOURCE = oc.function_source()


@pytest.fixture
def owui() -> Iterator[FakeOpenWebUI]:
    with fake_openwebui() as fake:
        yield fake


def connect(
    fake: FakeOpenWebUI, *flags: str, key: str = OWUI_ADMIN_KEY, env: dict[str, str] | None = None
) -> Result:
    arguments = ["openwebui", "connect", "--url", fake.url, "--admin-key", key, "--echo-url", ECHO_URL]
    result = CliRunner().invoke(cli.main, [*arguments, "--echo-key", ECHO_KEY, *flags], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    for secret in (key, ECHO_KEY):
        assert secret not in result.output
    return result


def status_of(result: Result, fragment: str) -> str:
    (status,) = [line[:13].strip() for line in result.output.splitlines() if fragment in line[14:]]
    return status


def test_connect_installs_the_function_and_the_tool_server(owui: FakeOpenWebUI) -> None:
    result = connect(owui)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"ok            Open WebUI 0.12.4 at {owui.url}"
    assert lines[1:6] == [
        "changed       Function echo: new, version 0.3.0",
        f"changed       Function echo: valves ECHO_URL={ECHO_URL}, ECHO_API_KEY",
        "changed       Function echo: active",
        "changed       Function echo: global (a filter on every model)",
        f"changed       tool server echo: new at {ECHO_URL}/tools/openapi.json, every user may use it",
    ]
    assert status_of(result, "native function calling") == "ok"
    assert status_of(result, "ENABLE_FORWARD_USER_INFO_HEADERS") == "cannot check"
    assert status_of(result, "context compaction") == "ok"
    assert status_of(result, "memory background review") == "ok"
    assert status_of(result, "reads ECHO's tool server") == "ok"
    assert lines[-1] == "ok            5 changes"

    function = owui.functions["echo"]
    assert function["content"] == SOURCE
    assert (function["type"], function["is_active"], function["is_global"]) == ("filter", True, True)
    assert function["valves"] == {"ECHO_URL": ECHO_URL, "ECHO_API_KEY": ECHO_KEY}
    (server,) = owui.tool_servers
    assert (server["url"], server["path"], server["auth_type"], server["key"]) == (
        ECHO_URL,
        "tools/openapi.json",
        "bearer",
        ECHO_KEY,
    )
    assert server["config"]["access_grants"] == [
        {"principal_type": "user", "principal_id": "*", "permission": "read"}
    ]


def test_a_second_run_changes_nothing(owui: FakeOpenWebUI) -> None:
    assert connect(owui).exit_code == 0
    writes, state = list(owui.writes), (dict(owui.functions["echo"]), list(owui.tool_servers))
    again = connect(owui)
    assert again.exit_code == 0, again.output
    assert owui.writes == writes
    assert (owui.functions["echo"], owui.tool_servers) == state
    assert status_of(again, "Function echo") == "unchanged"
    assert status_of(again, "tool server echo") == "unchanged"
    assert again.output.splitlines()[-1] == "ok            nothing to change"


def test_dry_run_changes_nothing_and_exits_1_until_all_is_set(owui: FakeOpenWebUI) -> None:
    dry = connect(owui, "--dry-run")
    assert dry.exit_code == 1, dry.output
    assert owui.writes == []
    assert owui.functions == {}
    assert [line for line in dry.output.splitlines()[:-1] if line.startswith("would change")] == [
        "would change  Function echo: new, version 0.3.0",
        f"would change  Function echo: valves ECHO_URL={ECHO_URL}, ECHO_API_KEY",
        "would change  Function echo: active",
        "would change  Function echo: global (a filter on every model)",
        f"would change  tool server echo: new at {ECHO_URL}/tools/openapi.json, every user may use it",
    ]
    assert dry.output.splitlines()[-1] == "would change  dry run: 5 changes to make, nothing changed"
    assert connect(owui).exit_code == 0
    writes = list(owui.writes)
    after = connect(owui, "--dry-run")
    assert after.exit_code == 0, after.output
    assert owui.writes == writes
    assert after.output.splitlines()[-1] == "ok            dry run: 0 changes to make, nothing changed"


def test_an_older_install_is_updated_in_place(owui: FakeOpenWebUI) -> None:
    old = SOURCE.replace("version: 0.3.0", "version: 0.1.0")
    owui.add_function(
        "echo",
        old,
        name="ECHO",
        valves={"ECHO_URL": "http://old:9099", "TIMEOUT_SECONDS": 4.0},
        is_global=True,
    )
    weather = {
        "url": "http://weather:8000",
        "path": "openapi.json",
        "type": "openapi",
        "auth_type": "none",
        "key": "",
        "config": {},
    }
    old_echo = {
        **weather,
        "url": "http://old:9099",
        "path": "tools/openapi.json",
        "info": {"id": "echo", "name": "ECHO"},
    }
    owui.tool_servers = [weather, old_echo]
    result = connect(owui)
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if line.startswith("changed")] == [
        "changed       Function echo: content, version 0.1.0 → 0.3.0",
        f"changed       Function echo: valves ECHO_URL={ECHO_URL}, ECHO_API_KEY",
        "changed       Function echo: active",
        "changed       tool server echo: url, auth_type, key, enabled, shared with every user",
    ]
    function = owui.functions["echo"]
    assert function["content"] == SOURCE
    assert function["valves"] == {"ECHO_URL": ECHO_URL, "ECHO_API_KEY": ECHO_KEY, "TIMEOUT_SECONDS": 4.0}
    assert {k: owui.tool_servers[0][k] for k in weather} == weather  # as it was
    assert owui.tool_servers[1]["url"] == ECHO_URL
    assert connect(owui).output.splitlines()[-1] == "ok            nothing to change"


def test_the_options_come_from_the_environment(owui: FakeOpenWebUI) -> None:
    env = {
        "ECHO_OPENWEBUI_URL": owui.url,
        "ECHO_OPENWEBUI_API_KEY": OWUI_ADMIN_KEY,
        "ECHO_HOOKS_URL": ECHO_URL + "/",
        "ECHO_API_KEY": ECHO_KEY,
    }
    result = CliRunner().invoke(cli.main, ["openwebui", "connect"], env=env)
    assert result.exit_code == 0, result.output
    assert owui.functions["echo"]["valves"]["ECHO_URL"] == ECHO_URL
    assert OWUI_ADMIN_KEY not in result.output
    assert ECHO_KEY not in result.output


def test_a_missing_option_is_a_usage_error_naming_its_variable() -> None:
    result = CliRunner().invoke(
        cli.main, ["openwebui", "connect", "--url", "http://x"], env={"ECHO_OPENWEBUI_API_KEY": ""}
    )
    assert result.exit_code == 2
    assert "--admin-key" in result.output
    assert "ECHO_OPENWEBUI_API_KEY" in result.output
    bad = CliRunner().invoke(
        cli.main, ["openwebui", "connect", "--url", "owui:8080", "--admin-key", "k", "--echo-url", ECHO_URL]
    )
    assert bad.exit_code == 2
    assert "http://" in bad.output


def test_the_help_names_every_variable() -> None:
    result = CliRunner().invoke(cli.main, ["openwebui", "connect", "--help"])
    assert result.exit_code == 0
    for variable in ("ECHO_OPENWEBUI_URL", "ECHO_OPENWEBUI_API_KEY", "ECHO_HOOKS_URL", "ECHO_API_KEY"):
        assert variable in result.output
    assert "openwebui" in CliRunner().invoke(cli.main, ["--help"]).output


@pytest.mark.parametrize("key", [OWUI_USER_KEY, "sk-wrong-0000"])
def test_a_refused_admin_key_exits_3_and_changes_nothing(owui: FakeOpenWebUI, key: str) -> None:
    result = connect(owui, key=key)
    assert result.exit_code == 3, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("failed")]
    assert f"GET {owui.url}/api/v1/functions/export: Open WebUI refused the admin key (HTTP 401" in line
    assert owui.writes == []


def test_an_open_webui_that_is_not_there_exits_3() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: the connection is refused
        result = connect(FakeOpenWebUI(url=f"http://127.0.0.1:{port}"))
    assert result.exit_code == 3
    assert result.output.splitlines() == [
        f"failed        GET http://127.0.0.1:{port}/api/version: Open WebUI is unreachable "
        "(ConnectError: All connection attempts failed)"
    ]


def test_no_key_is_printed_even_when_open_webui_quotes_it(owui: FakeOpenWebUI) -> None:
    owui.fail_valves = True  # its 400 detail quotes the posted valves, ECHO's key among them
    result = connect(owui)
    assert result.exit_code == 3
    (line,) = [line for line in result.output.splitlines() if line.startswith("failed")]
    assert "/valves/update: HTTP 400" in line
    assert "'ECHO_API_KEY': '***'" in line
    assert [line.split()[0] for line in result.output.splitlines()] == ["ok", "changed", "failed"]


@pytest.mark.parametrize(
    ("state", "code", "status", "fragment"),
    [
        ({"default_params": {"function_calling": "legacy"}}, 1, "missing", "function_calling=legacy"),
        (
            {"models": [{"id": "old-model", "params": {"function_calling": "legacy"}}]},
            1,
            "missing",
            "old-model",
        ),
        ({"tools_reachable": False}, 1, "missing", "cannot read ECHO's tool server"),
        ({"compaction": True}, 0, "warning", "context compaction is on"),
        ({"memory_review": True}, 0, "warning", "memory background review is on"),
        ({"serves_config": False}, 0, "cannot check", "native function calling"),
        ({"version": "0.14.1"}, 0, "warning", "0.14.1: connect knows the API of 0.12"),
    ],
)
def test_what_connect_checks(state: dict[str, Any], code: int, status: str, fragment: str) -> None:
    with fake_openwebui(**state) as fake:
        result = connect(fake)
    assert result.exit_code == code, result.output
    assert status_of(result, fragment) == status
