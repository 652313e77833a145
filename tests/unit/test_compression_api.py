"""The public API of echo.domain.compression is pinned, and the package stays pure (no I/O libraries)."""

from __future__ import annotations

import ast
import pathlib

import echo.domain.compression as compression

ALLOWED_IMPORTS = {
    "__future__",
    "bisect",
    "collections.abc",
    "dataclasses",
    "enum",
    "functools",
    "json",
    "re",
    "typing",
    "echo",
    "echo.domain",
    "echo.domain.chain",
    "echo.domain.tokens",
    "echo.errors",
    "echo.config",
    "echo.config.valves",
    "echo.config.thresholds",
}


def test_public_api_is_pinned() -> None:
    assert sorted(compression.__all__) == [
        "Assembly",
        "AssemblyPolicy",
        "Group",
        "Kind",
        "LOCALES",
        "STYLES",
        "StoredSummary",
        "SummaryInput",
        "SummaryPlan",
        "SummaryWindow",
        "Thresholds",
        "Turns",
        "assemble",
        "build_summary_prompt",
        "conversation_turns",
        "detect_locale",
        "fenced_summary",
        "fit_summary_input",
        "fold_message",
        "fold_text",
        "format_entry",
        "is_injected_summary",
        "is_valid_for",
        "kind_of",
        "message_tokens",
        "needs_summary",
        "plan_summary",
        "resolve_locale",
        "select_summary",
        "strip_reply_guidance",
        "summary_job_key",
        "summary_message",
        "summary_window",
        "thresholds_for",
        "tool_output_trims",
        "turn_groups",
    ]
    for name in compression.__all__:
        assert getattr(compression, name) is not None


def test_the_package_imports_only_the_standard_library_and_pure_modules() -> None:
    package = pathlib.Path(compression.__file__).parent
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name in ALLOWED_IMPORTS or name.startswith("echo.domain.compression"), (
                    f"{path.name}: {name}"
                )


def test_every_module_states_its_rule() -> None:
    package = pathlib.Path(compression.__file__).parent
    for path in sorted(package.glob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "pure, no I/O" in docstring, path.name
