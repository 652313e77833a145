"""What the dashboard tests share: the chart's dashboards, their PromQL expressions with Grafana's
variables made concrete, and the metric names an expression selects."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "DASHBOARDS",
    "GRAFANA_VARIABLES",
    "GROUPING",
    "IDENTIFIER",
    "MATCHERS",
    "PROMQL_AGGREGATIONS",
    "PROMQL_FUNCTIONS",
    "PROMQL_KEYWORDS",
    "SAMPLE_SUFFIXES",
    "STRING_LITERAL",
    "concrete",
    "expressions",
    "load",
    "metric_names",
    "panels",
    "variable_metrics",
]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "charts" / "echo-operator" / "dashboards").glob("*.json"))

# Grafana's built-in and dashboard variables, replaced by values Prometheus would accept.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "${namespace}": ".*",
    "$namespace": ".*",
    "${tenant}": ".*",
    "$tenant": ".*",
}
SAMPLE_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}
PROMQL_FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp", "clamp_max",
    "clamp_min", "count_over_time", "day_of_month", "day_of_week", "delta", "deriv", "exp", "floor",
    "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate", "label_join",
    "label_replace", "last_over_time", "ln", "log10", "log2", "max_over_time", "min_over_time", "minute",
    "month", "predict_linear", "present_over_time", "quantile_over_time", "rate", "resets", "round",
    "scalar", "sgn", "sort", "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time",
    "sum_over_time", "time", "timestamp", "vector", "year",
}  # fmt: skip
PROMQL_AGGREGATIONS = {
    "avg", "bottomk", "count", "count_values", "group", "max", "min", "quantile", "stddev", "stdvar",
    "sum", "topk",
}  # fmt: skip
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
                   "and", "or", "unless", "inf", "nan"}  # fmt: skip
STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
MATCHERS = re.compile(r"\{[^{}]*\}")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
RANGE = re.compile(r"\[[^\[\]]*\]")
IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")
LABEL_VALUES = re.compile(r"^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s*,\s*\w+\s*\)$")


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # panels inside collapsed rows


def expressions(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target; template variable queries are handled apart."""
    for panel in panels(board):
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield f"{board['uid']} / {panel['title']} / {target.get('refId', '?')}", target["expr"]


def variable_metrics(board: dict[str, Any]) -> Iterator[str]:
    for variable in board.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = LABEL_VALUES.match(query.strip())
        assert match, f"{board['uid']}: variable {variable['name']}: unsupported query {query!r}"
        yield match.group(1)


def concrete(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (strings, matchers, groupings and ranges removed)."""
    text = STRING_LITERAL.sub('""', concrete(expr))
    text = MATCHERS.sub("", text)
    text = GROUPING.sub("", text)
    text = RANGE.sub("", text)
    names = set()
    for name, call in IDENTIFIER.findall(text):
        if call or name in PROMQL_KEYWORDS or name in PROMQL_AGGREGATIONS:
            continue
        names.add(name)
    return names
