"""The README and the documentation site say only what the code does.

The README is the front door (what works, the set-up commands, one EchoDeployment, links); the pages
under `docs/` and `bench/README.md` hold the rest. Each test here reads a claim where it now lives
and checks it against the code, so a page and the code cannot drift apart silently. `mkdocs build
--strict` (`make docs-site`) checks the site's own links and anchors; the README's are checked here.
"""

from __future__ import annotations

import importlib
import json
import re
import tomllib
import unicodedata
from pathlib import Path
from typing import Any

import httpx
import yaml

from echo.capabilities.shadow.filter import PipeFilter
from echo.config import valves
from echo.domain import masking
from echo.entrypoints import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCH = ROOT / "bench" / "README.md"
# Dotted names that are not modules: trace spans (docs/operations/observability.md), the CRD's API group.
NOT_MODULES = {"echo.inlet", "echo.outlet", "echo.dev"}


def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def pages() -> list[Path]:
    return [README, BENCH, *sorted(DOCS.rglob("*.md"))]


def section(text: str, heading: str) -> str:
    """The text under `heading` (a whole heading line, '## …'), up to the next heading of its level."""
    level = heading.split(" ", 1)[0]
    assert f"\n{heading}\n" in f"\n{text}", f"no section {heading!r}"
    body = f"\n{text}".split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n{level} ", body, maxsplit=1)[0]


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the Markdown tables in `text`."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not set(line) <= {"|", "-", " "}:
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:] if rows else rows


def capability_rows() -> dict[str, str]:
    """The README's "What works in this version" table: capability cell -> state cell."""
    rows = {}
    for cells in table_rows(section(text_of(README), "## What works in this version")):
        if len(cells) == 2 and cells[0] != "capability":
            rows[cells[0]] = cells[1]
    return rows


def row_about(fragment: str) -> str:
    matches = [state for capability, state in capability_rows().items() if fragment in capability]
    assert len(matches) == 1, f"README's capability table has no single row about {fragment!r}"
    return matches[0]


def test_the_opening_does_not_claim_inactive_capabilities() -> None:
    opening = " ".join(text_of(README).split("\n## ", 1)[0].split())
    assert re.search(
        r"secret masking, context compression, long-term memory, attachments and the rich shadow are active",
        opening,
    )
    assert "not built yet" not in opening


def test_the_rich_shadow_is_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    assert row_about("Rich shadow (seed 001)").startswith("working")
    assert row_about("`echo.<model>` Gemini pipe models").startswith("working")
    assert "come later" not in row_about("`echo.<model>` Gemini pipe models")
    assert "rich shadow" in PipeFilter("gemini-2.5-flash", lambda counts: None).description


def test_attachments_are_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    assert row_about("Attachments (`echo_context` inlet").startswith("working")
    listing = {model["id"]: model for model in client.get("/models").json()["data"]}
    assert "ephemeral RAG" in listing["echo_context"]["description"]
    assert "pass-through" not in listing["echo_context"]["description"]


def test_memory_is_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    assert row_about("`echo_memory`").startswith("working")
    assert row_about("`/memories`").startswith("working")
    listing = {model["id"]: model for model in client.get("/models").json()["data"]}
    assert "distillation" in listing["echo_memory"]["description"]
    assert client.get("/tools/openapi.json").status_code == 200


def test_compression_is_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    state = row_about("`echo_compression`")
    assert state.startswith("working")
    assert "not active" not in state
    listing = {model["id"]: model for model in client.get("/models").json()["data"]}
    description = listing["echo_compression"]["description"]
    assert "return the body unchanged" not in description
    assert "summary" in description
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"chat_id": "c1"}}
    answer = client.post("/echo_compression/filter/inlet", json={"body": body, "user": {"id": "u"}})
    # a short chat has nothing to compress, so nothing is freed for the filters after it
    assert answer.json() == {**body, "metadata": {**body["metadata"], "echo_room_tokens": 0}}


def test_search_session_context_is_said_to_be_served(client: httpx.Client) -> None:
    assert row_about("`search_session_context`").startswith("working")
    answer = client.post("/tools/search_session_context", json={"source_id": "s", "query": "q"})
    assert answer.status_code == 422  # served: it names the missing x-openwebui-user-id header
    assert "x-openwebui-user-id" in answer.text
    paths = client.get("/tools/openapi.json").json()["paths"]
    assert "/tools/search_session_context" in paths


def test_manual_compaction_is_said_to_be_served(client: httpx.Client, admin: dict[str, str]) -> None:
    (capability,) = [name for name in capability_rows() if "`echo_compression`" in name]
    assert "manual compaction" in capability
    assert row_about("`echo_compression`").startswith("working")
    compression = section(text_of(DOCS / "capabilities" / "compression.md"), "## Manual compaction")
    assert "POST /chats/{chat_id}/compact" in compression
    assert "echoctl compact CHAT_ID" in compression
    assert "POST /chats/{chat_id}/compact" in section(text_of(DOCS / "http.md"), "## Compaction")
    commands = text_of(DOCS / "getting-started.md").split("`echoctl` commands:", 1)[1].split("\n\n", 1)[0]
    assert "`compact CHAT_ID" in commands
    answer = client.post("/chats/c1/compact", json={"user_id": "u1"}, headers=admin)
    assert answer.status_code == 503  # served; this app has no store behind it
    assert "no store" in answer.json()["detail"]


def test_the_echoctl_commands_listed_are_the_clis() -> None:
    listed = text_of(DOCS / "getting-started.md").split("`echoctl` commands:", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z]+)(?: [^`]*)?`\s+\(", listed))
    assert named == set(cli.main.commands), "docs/getting-started.md lists other commands than echoctl has"


def test_the_readme_gives_the_two_setup_commands_and_make_test_runs_the_docs() -> None:
    quick = section(text_of(README), "## Quick start")
    block = quick.split("```sh\n", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in block.splitlines()] == [["make", "run"], ["make", "test"]]
    makefile = text_of(ROOT / "Makefile")
    assert re.search(r"^run: ", makefile, re.MULTILINE)
    # `make test` runs the lint, the docs build and the suite side by side, as one sub-make.
    recipe = re.search(r"^test: .*\n\t(.*)$", makefile, re.MULTILINE)
    assert recipe is not None
    assert {"lint", "docs-site", "suite"} <= set(recipe.group(1).split())
    assert re.search(r"^suite: .*\n\t.*pytest .*--cov-fail-under", makefile, re.MULTILINE)
    assert re.search(r"^docs-site: .*\n\t.*mkdocs build --strict", makefile, re.MULTILINE)
    ci = text_of(ROOT / ".ci" / "run")
    assert re.search(r"^make test$", ci, re.MULTILINE)  # CI runs the test command the README gives


def test_the_readmes_echodeployment_is_the_example_file() -> None:
    kubernetes = section(text_of(README), "## On Kubernetes")
    shown = yaml.safe_load(kubernetes.split("```yaml\n", 1)[1].split("```", 1)[0])
    assert "docs/examples/echo-standalone.yaml" in kubernetes
    assert shown == yaml.safe_load(text_of(DOCS / "examples" / "echo-standalone.yaml"))


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading; an explicit `{#id}` wins."""
    explicit = re.search(r"\{#([^}]+)\}\s*$", heading)
    if explicit:
        return explicit.group(1)
    text = unicodedata.normalize("NFKD", re.sub(r"[`*]", "", heading)).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", text_of(page), flags=re.DOTALL)
    return {_slug(line.lstrip("#").strip()) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def test_the_links_of_the_readme_and_the_bench_page_resolve() -> None:
    for page in (README, BENCH):
        text = re.sub(r"```.*?```", "", text_of(page), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.is_file(), f"{page.name}: link to {target!r}: no such file"
            if anchor:
                assert anchor in _anchors(linked), f"{page.name}: link to {target!r}: no such anchor"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                try:  # a submodule not imported by its package
                    found = importlib.import_module(f"{found.__name__}.{name}")
                except (ModuleNotFoundError, AttributeError):
                    return False
            else:
                found = getattr(found, name)
        return True
    return False


def test_every_echo_module_the_pages_name_exists() -> None:
    """`echo.…` in a page (a module, a class, a function) names something the code has, at that place."""
    missing = []
    for page in pages():
        named = set(re.findall(r"`(echo(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`", text_of(page)))
        layout = page.name == "layout.md"
        if layout:  # the tree is a code block: every dotted name in it
            named |= set(re.findall(r"\b(echo(?:\.[a-z_]+)+)\b", text_of(page)))
        where = page.relative_to(ROOT)
        missing += [f"{where}: {name}" for name in sorted(named - NOT_MODULES) if not _resolves(name)]
    assert not missing, "pages name what the code does not have:\n" + "\n".join(missing)


def test_the_layout_names_every_package_and_every_import_contract() -> None:
    layout = text_of(DOCS / "contributing" / "layout.md")
    packages = sorted(
        ".".join(init.parent.relative_to(ROOT / "services").parts)
        for init in (ROOT / "services" / "echo").rglob("__init__.py")
    )
    assert [package for package in packages if package not in layout] == []
    linter = text_of(ROOT / ".importlinter")
    contracts = set(re.findall(r"^\[importlinter:contract:([\w-]+)\]$", linter, re.MULTILINE))
    listed = set(re.findall(r"^- `([\w-]+)`:", section(layout, "## The contracts"), re.MULTILINE))
    assert listed == contracts


def test_the_valves_tables_are_the_valves_models() -> None:
    page = text_of(DOCS / "valves.md")
    for filter_id, model in valves.FILTER_VALVES.items():
        rows = {cells[0].strip("`"): cells[1] for cells in table_rows(section(page, f"### `{filter_id}`"))}
        assert list(rows) == list(model.model_fields), f"{filter_id}: the valves listed are not the model's"
        defaults = model().model_dump(mode="json")
        for name, shown in rows.items():
            if isinstance(defaults[name], dict):
                continue  # a table (model_thresholds): described, not spelled out
            assert shown.startswith("`"), (filter_id, name)
            assert json.loads(shown.strip("`")) == defaults[name], (filter_id, name)


def test_the_masking_labels_are_the_detectors() -> None:
    table = table_rows(section(text_of(DOCS / "capabilities" / "masking.md"), "## What is masked"))
    assert {cells[1].strip("`") for cells in table} == {kind.label for kind in masking.SECRET_KINDS}


def _normalised(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_dependency_is_justified_in_the_docs() -> None:
    project = tomllib.loads(text_of(ROOT / "pyproject.toml"))["project"]
    required = {_normalised(item) for item in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        required |= {_normalised(item) for item in extra}
    table = table_rows(section(text_of(DOCS / "contributing" / "dependencies.md"), "## Python packages"))
    listed = {_normalised(name.strip()) for cells in table for name in cells[0].split(",")}
    assert listed == required, f"missing: {sorted(required - listed)}; not one: {sorted(listed - required)}"
