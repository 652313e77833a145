"""`echoctl openwebui connect`, the pure part: what it plans from what Open WebUI has, what it
reports, and the Function it ships (the command against a fake Open WebUI:
tests/integration/test_openwebui_connect.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from echo.adapters.openwebui import admin
from echo.entrypoints import openwebui_connect as oc

ROOT = Path(__file__).resolve().parents[2]
SOURCE = oc.function_source()
URL = "http://echo-hooks:9099"
KEY = "echo-secret-key"
TARGET = oc.Target(URL, KEY, SOURCE)


def installed(**changes: Any) -> dict[str, Any]:
    """The Function as Open WebUI lists it once connect has installed it."""
    return {
        "id": "echo",
        "name": "ECHO",
        "type": "filter",
        "content": SOURCE,
        "meta": {"description": oc.frontmatter(SOURCE)["description"], "manifest": {}},
        "valves": {"ECHO_URL": URL, "ECHO_API_KEY": KEY},
        "is_active": True,
        "is_global": True,
        **changes,
    }


def registered(**changes: Any) -> dict[str, Any]:
    """ECHO's tool server as Open WebUI stores it once connect has registered it."""
    entry = oc.plan(TARGET, oc.Observed("0.12.4", [], [])).tool_server
    return {**entry, "forward_cookies": False, "headers": None, **changes}


def observed(**changes: Any) -> oc.Observed:
    state: dict[str, Any] = {
        "version": "0.12.4",
        "functions": [installed()],
        "tool_servers": [registered()],
        "default_params": {},
        "models": [],
        "chat_config": {"ENABLE_CONTEXT_COMPACTION": False},
        "memories": {"memories.enable": True, "memories.background_review.enable": False},
    }
    return oc.Observed(**{**state, **changes})


def actions(plan: oc.Plan) -> list[str]:
    return [step.action for step in plan.steps]


def test_a_fresh_open_webui_gets_the_function_on_every_model_and_the_tool_server() -> None:
    plan = oc.plan(TARGET, observed(functions=[], tool_servers=[]))
    assert actions(plan) == ["create_function", "set_valves", "activate", "make_global", "set_tool_servers"]
    create, valves = plan.steps[0], plan.steps[1]
    assert create.payload == {
        "name": "ECHO",
        "content": SOURCE,
        "description": oc.frontmatter(SOURCE)["description"],
    }
    assert valves.payload == {"ECHO_URL": URL, "ECHO_API_KEY": KEY}
    assert plan.unchanged == ()
    (connection,) = plan.steps[-1].payload
    assert connection == plan.tool_server
    assert connection == {
        "url": URL,
        "path": "tools/openapi.json",
        "type": "openapi",
        "auth_type": "bearer",
        "key": KEY,
        "config": {
            "enable": True,
            "access_grants": [{"principal_type": "user", "principal_id": "*", "permission": "read"}],
        },
        "info": {"id": "echo", "name": "ECHO", "description": connection["info"]["description"]},
    }


def test_what_is_already_there_is_left_alone() -> None:
    plan = oc.plan(TARGET, observed())
    assert plan.steps == ()
    assert [line.status for line in plan.unchanged] == ["unchanged", "unchanged"]
    report = oc.report(plan, observed=observed(), dry_run=False, done=0, verification=oc.Line("ok", "reads"))
    assert report.exit_code == oc.EXIT_OK
    assert report.lines[-1] == oc.Line("ok", "nothing to change")


def test_an_older_function_is_updated_and_keeps_the_valves_connect_does_not_own() -> None:
    old = SOURCE.replace("version: 0.3.0", "version: 0.1.0").replace("Runs ECHO's hooks", "Ran")
    assert old != SOURCE
    stored = installed(
        content=old, valves={"ECHO_URL": "http://old:9099", "TIMEOUT_SECONDS": 5.0}, is_active=False
    )
    plan = oc.plan(TARGET, observed(functions=[stored]))
    assert actions(plan) == ["update_function", "set_valves", "activate"]
    assert "0.1.0 → 0.3.0" in plan.steps[0].text
    assert plan.steps[1].payload == {"ECHO_URL": URL, "ECHO_API_KEY": KEY, "TIMEOUT_SECONDS": 5.0}
    assert plan.steps[1].text == f"Function echo: valves ECHO_URL={URL}, ECHO_API_KEY"


@pytest.mark.parametrize(
    ("change", "action"),
    [
        ({"name": "My ECHO"}, "update_function"),
        ({"meta": {"description": "mine"}}, "update_function"),
        ({"valves": {"ECHO_URL": URL, "ECHO_API_KEY": "an-old-key"}}, "set_valves"),
        ({"valves": None}, "set_valves"),
        ({"is_active": False}, "activate"),
        ({"is_global": False}, "make_global"),
    ],
)
def test_each_difference_of_the_function_is_one_step(change: dict[str, Any], action: str) -> None:
    assert actions(oc.plan(TARGET, observed(functions=[installed(**change)]))) == [action]


def test_no_step_text_shows_a_key() -> None:
    plan = oc.plan(TARGET, observed(functions=[], tool_servers=[]))
    texts = [step.text for step in plan.steps] + [line.text for line in plan.checks]
    assert texts
    assert not any(KEY in text for text in texts)


def test_the_tool_server_entry_is_updated_in_place_and_the_others_kept() -> None:
    other = {
        "url": "http://weather:8000",
        "path": "openapi.json",
        "type": "openapi",
        "info": {"id": "weather"},
    }
    grants = [{"principal_type": "group", "principal_id": "g1", "permission": "read"}]
    ours = registered(
        url="http://old:9099",
        key="old",
        config={"enable": False, "access_grants": grants},
        headers={"X-A": "1"},
    )
    plan = oc.plan(TARGET, observed(tool_servers=[other, ours]))
    (step,) = plan.steps
    first, second = step.payload
    assert first == other
    assert second["url"] == URL
    assert second["key"] == KEY
    assert second["config"] == {"enable": True, "access_grants": grants}  # the admin's own grants stay
    assert second["headers"] == {"X-A": "1"}  # fields connect does not own stay
    assert step.text == "tool server echo: url, key, enabled"


def test_a_tool_server_at_echos_url_under_another_id_is_taken_over() -> None:
    added_by_hand = {
        "url": URL + "/",
        "path": "/tools/openapi.json",
        "type": "openapi",
        "auth_type": "bearer",
        "key": KEY,
        "config": {"enable": True},
        "info": {"id": "abc123", "name": "Memory"},
    }
    (step,) = oc.plan(TARGET, observed(tool_servers=[added_by_hand])).steps
    (entry,) = step.payload
    assert entry["info"]["id"] == "echo"
    assert entry["info"]["name"] == "Memory"
    assert entry["url"] == URL
    assert entry["path"] == "tools/openapi.json"
    assert "shared with every user" in step.text


def test_without_an_echo_key_nothing_sends_one_and_a_warning_says_so() -> None:
    plan = oc.plan(oc.Target(URL, None, SOURCE), observed(functions=[], tool_servers=[]))
    assert plan.steps[1].payload["ECHO_API_KEY"] == ""
    assert plan.tool_server["auth_type"] == "none"
    assert plan.tool_server["key"] == ""
    assert any(line.status == "warning" and "no ECHO key" in line.text for line in plan.checks)


def test_the_checks_of_an_open_webui_as_echo_needs_it() -> None:
    lines = oc.plan(TARGET, observed()).checks
    assert [line.status for line in lines] == ["ok", "cannot check", "ok", "ok"]
    assert "ENABLE_FORWARD_USER_INFO_HEADERS" in lines[1].text


@pytest.mark.parametrize(
    ("changes", "status", "fragment"),
    [
        ({"default_params": {"function_calling": "legacy"}}, "missing", "function_calling=legacy"),
        ({"models": [{"id": "gpt-x", "params": {"function_calling": "legacy"}}]}, "missing", "models gpt-x"),
        (
            {"models": [{"id": "gpt-x", "params": {"function_calling": "native"}}]},
            "ok",
            "native function calling",
        ),
        ({"default_params": None}, "cannot check", "native function calling"),
        ({"models": None}, "cannot check", "native function calling"),
        ({"chat_config": {"ENABLE_CONTEXT_COMPACTION": True}}, "warning", "context compaction is on"),
        ({"chat_config": {}}, "cannot check", "ENABLE_CONTEXT_COMPACTION"),
        ({"chat_config": None}, "cannot check", "ENABLE_CONTEXT_COMPACTION"),
        (
            {"memories": {"memories.enable": True, "memories.background_review.enable": True}},
            "warning",
            "background review is on",
        ),
        (
            {"memories": {"memories.enable": False, "memories.background_review.enable": True}},
            "ok",
            "background review is off",
        ),
        ({"memories": None}, "cannot check", "ENABLE_MEMORY_BACKGROUND_REVIEW"),
        ({"version": "0.13.0"}, "warning", "Open WebUI 0.13.0"),
        ({"version": None}, "warning", "did not say its version"),
        (
            {"functions": [installed(), installed(id="echo_copy", name="Mine")]},
            "warning",
            "echo_copy",
        ),
        (
            {"functions": [installed(), {"id": "echo_by_hand", "name": "ECHO", "content": "x"}]},
            "warning",
            "echo_by_hand",
        ),
    ],
)
def test_each_check(changes: dict[str, Any], status: str, fragment: str) -> None:
    lines = oc.plan(TARGET, observed(**changes)).checks
    assert any(line.status == status and fragment in line.text for line in lines), lines


def test_the_report_and_its_exit_code() -> None:
    fresh = observed(functions=[], tool_servers=[])
    plan = oc.plan(TARGET, fresh)
    reads = oc.verified(TARGET, admin.Verification(True, paths=("/tools/a", "/tools/b", "/healthz")))
    assert reads == oc.Line(
        "ok", f"Open WebUI reads ECHO's tool server at {URL}/tools/openapi.json (2 tools)"
    )

    dry = oc.report(plan, observed=fresh, dry_run=True, done=0, verification=reads)
    assert dry.exit_code == oc.EXIT_MISSING  # not all set yet
    assert [line.status for line in dry.lines[1:6]] == ["would change"] * 5
    assert dry.lines[-1] == oc.Line("would change", "dry run: 5 changes to make, nothing changed")

    done = oc.report(plan, observed=fresh, dry_run=False, done=5, verification=reads)
    assert done.exit_code == oc.EXIT_OK
    assert done.changes == 5
    assert done.lines[0] == oc.Line("ok", "Open WebUI 0.12.4 at ")  # (observe sets the URL)
    assert [line.status for line in done.lines[1:6]] == ["changed"] * 5

    unread = oc.verified(TARGET, admin.Verification(False, detail="Failed to connect to the tool server"))
    missing = oc.report(plan, observed=fresh, dry_run=False, done=5, verification=unread)
    assert missing.exit_code == oc.EXIT_MISSING
    assert missing.lines[-1] == oc.Line("missing", "5 changes; 1 missing")

    failed = oc.report(plan, observed=fresh, dry_run=False, done=2, failure="POST …/toggle: HTTP 500")
    assert failed.exit_code == oc.EXIT_FAILED
    assert [line.status for line in failed.lines] == ["ok", "changed", "changed", "failed"]


def test_a_line_renders_in_two_columns() -> None:
    assert oc.Line("cannot check", "x").render() == "cannot check  x"
    assert oc.Line("ok", "x").render() == "ok            x"


# -- the Function connect ships


def test_the_function_is_package_data_and_the_integrations_copy_is_the_same_file() -> None:
    packaged = ROOT / "services/echo/entrypoints/openwebui_function/echo_filter_function.py"
    copy = ROOT / "integrations/openwebui/echo_filter_function.py"
    assert packaged.read_text(encoding="utf-8") == SOURCE
    shipped, pasted = packaged.relative_to(ROOT), copy.relative_to(ROOT)
    assert copy.read_text(encoding="utf-8") == SOURCE, (
        f"{shipped} is the Function echoctl installs and {pasted} its copy for pasting by hand: "
        f"edit the first, then `cp {shipped} {pasted}`"
    )


def test_open_webui_stores_the_function_as_sent() -> None:
    """Open WebUI rewrites these imports before it stores a Function (utils/plugin.py:
    replace_imports); without them the stored content equals ECHO's, so a second run sees no change."""
    assert not any(old in SOURCE for old in ("from utils", "from apps", "from main", "from config"))
    meta = oc.frontmatter(SOURCE)
    assert meta["title"] == "ECHO"
    assert meta["version"]
    assert meta["description"]
    assert "class Filter" in SOURCE
    assert "class Valves" in SOURCE
    assert "ECHO_URL" in SOURCE
    assert "ECHO_API_KEY" in SOURCE


def test_frontmatter_of_a_file_without_one() -> None:
    assert oc.frontmatter("import os\n") == {}


@pytest.mark.parametrize(
    ("filter_list", "expected"),
    [
        ("save_plan,list_plans", "save_plan,list_plans," + ",".join(oc.MEMORY_OPERATIONS)),
        (["_plans"], ["_plans", *oc.MEMORY_OPERATIONS]),  # an entry matches the names ending with it
        ("!forget_memory, !commit_code", "!commit_code"),
        ("!memories,!read_code", "!read_code"),  # it blocked search_, list_ and forget_all_memories
        ("memories,!forget_all_memories", "memories,forget_memory"),
    ],
)
def test_an_operation_filter_of_the_admin_is_kept_but_lets_the_memory_operations_through(
    filter_list: Any, expected: Any
) -> None:
    ours = registered(config={**registered()["config"], "function_name_filter_list": filter_list})
    (step,) = oc.plan(TARGET, observed(tool_servers=[ours])).steps
    (entry,) = step.payload
    assert entry["config"]["function_name_filter_list"] == expected
    assert step.text == "tool server echo: memory operations let through its operation filter"


@pytest.mark.parametrize(
    "filter_list", ["", [], "!commit_code", ",".join(oc.MEMORY_OPERATIONS) + ",list_plans"]
)
def test_an_operation_filter_that_lets_them_through_already_is_no_change(filter_list: Any) -> None:
    ours = registered(config={**registered()["config"], "function_name_filter_list": filter_list})
    plan = oc.plan(TARGET, observed(tool_servers=[ours]))
    assert plan.steps == ()
