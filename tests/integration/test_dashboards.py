"""The Grafana dashboards of the chart: well-formed, valid PromQL, and every metric they query exists.

DESIGN section 8: every metric a dashboard queries must exist. The `echo_*` names each expression
reads are extracted and looked up among the series that can exist: the `/metrics` exposition of a
running echo-hooks service, and the registries of the modules that define the worker's and the
operator's metrics. A labelled metric has no sample until its first child exists, so the
lookup goes by each family's name and type (a counter `x` can be queried as `x_total`, a histogram
as `x_bucket`, `x_sum`, `x_count`), not by the samples present. PromQL is parsed by promtool when
`make tools` fetched it (`promtool check rules` on one recording rule per expression), else checked
by a small parser of our own (balanced brackets, known functions, durations, operators).
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import prometheus_client
import pytest
import yaml
from fakes.dashboards import (
    DASHBOARDS,
    GROUPING,
    IDENTIFIER,
    MATCHERS,
    PROMQL_AGGREGATIONS,
    PROMQL_FUNCTIONS,
    PROMQL_KEYWORDS,
    SAMPLE_SUFFIXES,
    STRING_LITERAL,
    metric_names,
)
from fakes.dashboards import concrete as _concrete
from fakes.dashboards import expressions as _expressions
from fakes.dashboards import load as _load
from fakes.dashboards import panels as _panels
from fakes.dashboards import variable_metrics as _variable_metrics
from fakes.live_server import LiveServer
from prometheus_client.parser import text_string_to_metric_families

from echo.config.settings import Settings
from echo.entrypoints.http import create_app

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = ROOT / "tools" / "bin" / "promtool"
# Modules whose import registers the metrics of the processes that do not serve echo-hooks' /metrics:
# the distiller worker (its series live in echo.support.metrics, the default registry) and the operator (its
# own registry, `echo_operator.metrics.REGISTRY`, served on :9090).
METRIC_MODULES = (
    "echo.support.metrics",
    *(
        f"echo.capabilities.{name}.metrics"
        for name in ("compression", "context", "masking", "memory", "shadow")
    ),
    "echo_operator.metrics",
)


def _check_syntax(expr: str) -> list[str]:
    """A careful fallback when promtool is absent: brackets, functions, ranges, operators."""
    problems = []
    text = STRING_LITERAL.sub('""', _concrete(expr))
    stack = []
    for char in text:
        if char in "([{":
            stack.append(char)
        elif char in ")]}" and (not stack or "([{"[")]}".index(char)] != stack.pop()):
            problems.append(f"unbalanced {char!r}")
            break
    if stack:
        problems.append(f"unclosed {stack[-1]!r}")
    for content in re.findall(r"\[([^\[\]]*)\]", text):
        if not re.fullmatch(r"\d+(ms|s|m|h|d|w|y)(:\d+(ms|s|m|h|d|w|y)?)?", content.strip()):
            problems.append(f"bad range [{content}]")
    for name, call in IDENTIFIER.findall(GROUPING.sub("", MATCHERS.sub("", text))):
        if call and name not in PROMQL_FUNCTIONS | PROMQL_AGGREGATIONS | PROMQL_KEYWORDS:
            problems.append(f"unknown function {name}()")
    for matchers in re.findall(r"\{([^{}]*)\}", text):
        for matcher in filter(None, (m.strip() for m in matchers.split(","))):
            if not re.fullmatch(r'[A-Za-z_]\w*\s*(=~|!~|!=|=)\s*""', matcher):
                problems.append(f"bad label matcher {matcher!r}")
    if re.search(r"(^|[^=!<>])=($|[^=~])", MATCHERS.sub("", text)):
        problems.append("assignment '=' outside a matcher")
    return problems


def _sample_names(name: str, kind: str) -> set[str]:
    return {name + suffix for suffix in SAMPLE_SUFFIXES.get(kind, ("",))}


@pytest.fixture(scope="module")
def queryable(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every series name that a running deployment can expose."""
    names: set[str] = set()
    settings = Settings(data_dir=tmp_path_factory.mktemp("echo"), api_key="dashboards-test-key")
    with LiveServer(create_app(settings), name="echo-hooks-metrics") as server:
        response = httpx.get(server.url + "/metrics", timeout=10)
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.text):
        names |= _sample_names(family.name, family.type)
        names |= {sample.name for sample in family.samples}
    registries = [prometheus_client.REGISTRY]
    for module_name in METRIC_MODULES:
        module = importlib.import_module(module_name)
        own = getattr(module, "REGISTRY", None)  # the operator serves its own registry
        if isinstance(own, prometheus_client.CollectorRegistry) and own is not prometheus_client.REGISTRY:
            registries.append(own)
    for registry in registries:
        for family in registry.collect():
            names |= _sample_names(family.name, family.type)
    return names


def test_the_dashboards_ship() -> None:
    shipped = {path.stem for path in DASHBOARDS}
    assert shipped == {"compression", "memory", "queue", "latency", "context", "shadow"}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_a_dashboard_is_well_formed(path: Path) -> None:
    board = _load(path)
    assert board["uid"] == f"echo-{path.stem}"
    assert board["title"].startswith("ECHO / ")
    assert "echo" in board["tags"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids, cells = set(), set()
    for panel in _panels(board):
        assert panel["id"] not in ids, f"{path.stem}: duplicate panel id {panel['id']}"
        ids.add(panel["id"])
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"{path.stem}: {panel['title']} overlaps another panel"
        cells |= mine


def test_dashboard_uids_are_unique() -> None:
    uids = [_load(path)["uid"] for path in DASHBOARDS]
    assert len(uids) == len(set(uids))


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le, filter) (rate(echo_a_bucket{job="echo_b", x=~"$namespace"}[5m]))', {"echo_a_bucket"}),
        ("echo_x / on (kind) group_left (state) echo_y", {"echo_x", "echo_y"}),
        ("max by (kind) (echo_jobs_pending)", {"echo_jobs_pending"}),
        ("histogram_quantile(0.95, sum by (le) (rate(echo_h_bucket[$__rate_interval])))", {"echo_h_bucket"}),
        ("sum(increase(echo_c_total[1h])) > bool 0", {"echo_c_total"}),
    ],
)
def test_metric_names_are_extracted_from_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_fallback_parser_rejects_broken_promql() -> None:
    assert _check_syntax("sum(rate(echo_a_total[5m])") == ["unclosed '('"]
    assert _check_syntax("rate(echo_a_total[5 minutes])") == ["bad range [5 minutes]"]
    assert _check_syntax("summ(echo_a)") == ["unknown function summ()"]
    assert _check_syntax('echo_a{job="x"}') == []


def test_every_expression_is_valid_promql(tmp_path: Path) -> None:
    expressions = [
        (where, _concrete(expr)) for path in DASHBOARDS for where, expr in _expressions(_load(path))
    ]
    assert expressions
    problems = [f"{where}: {p}" for where, expr in expressions for p in _check_syntax(expr)]
    assert not problems, "\n".join(problems)
    promtool = PROMTOOL if PROMTOOL.is_file() else shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is absent (run `make tools`); the fallback parser passed")
    rules = {
        "groups": [
            {
                "name": "echo-dashboards",
                "rules": [
                    {"record": f"echo:dashboard_expr:{i}", "expr": expr}
                    for i, (_, expr) in enumerate(expressions)
                ],
            }
        ]
    }
    rules_file = tmp_path / "dashboards.rules.yaml"
    rules_file.write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        [str(promtool), "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert f"SUCCESS: {len(expressions)} rules found" in result.stdout


def test_every_metric_a_dashboard_queries_exists(queryable: set[str]) -> None:
    missing = []
    queried = set()
    for path in DASHBOARDS:
        board = _load(path)
        for where, expr in _expressions(board):
            names = metric_names(expr)
            assert names, f"{where}: no metric in {expr!r}"
            for name in names:
                assert name.startswith("echo_"), f"{where}: {name} is not an ECHO metric"
                queried.add(name)
                if name not in queryable:
                    missing.append(f"{where}: {name}")
        for name in _variable_metrics(board):
            queried.add(name)
            if name not in queryable:
                missing.append(f"{board['uid']} variables: {name}")
    assert not missing, "dashboards query metrics nothing defines:\n" + "\n".join(missing)
    assert len(queried) >= 10
