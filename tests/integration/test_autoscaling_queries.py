"""The distiller autoscalers' PromQL, evaluated by the real Prometheus engine (`promtool test rules`).

Every worker reports its tenant's whole queue (`echo_jobs_pending{kind}`), so the tenant's pending
jobs are the sum over kinds of the max over workers. The KEDA trigger's query and the
prometheus-adapter rule of the HPA fallback (the chart's, checked equal to `ADAPTER_METRICS_QUERY`
in tests/integration/test_chart.py) must both give that number: neither the queue once per
replica, nor another tenant's jobs. promtool 2.42 comes from `make tools`; without it these skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from echo_operator.render import distiller as render_distiller
from echo_operator.render.tenant import Tenant
from echo_operator.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = ROOT / "tools" / "bin" / "promtool"
SPEC = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}}
TENANT = Tenant("acme", "tenants", parse_spec("acme", SPEC))
# What prometheus-adapter puts in place of its placeholders for the HPA of tenants/acme.
ADAPTER_QUERY = render_distiller.ADAPTER_METRICS_QUERY.replace("<<.Series>>", "echo_jobs_pending").replace(
    "<<.LabelMatchers>>", 'namespace="tenants",tenant="acme"'
)


def _series(
    value: int, *, pod: str, kind: str, tenant: str = "acme", namespace: str = "tenants"
) -> dict[str, str]:
    labels = f'namespace="{namespace}",tenant="{tenant}",pod="{pod}",kind="{kind}",job="acme-distiller"'
    return {"series": f"echo_jobs_pending{{{labels}}}", "values": f"{value}x5"}


# Three workers of tenants/acme, each showing the whole queue: summary 6, distill 4, merge 2; the
# third has just started and shows no `merge` yet. Noise: another tenant of the namespace, and a
# tenant `acme` in another namespace.
INPUT_SERIES = [
    _series(6, pod="acme-distiller-a", kind="summary"),
    _series(4, pod="acme-distiller-a", kind="distill"),
    _series(2, pod="acme-distiller-a", kind="merge"),
    _series(6, pod="acme-distiller-b", kind="summary"),
    _series(4, pod="acme-distiller-b", kind="distill"),
    _series(2, pod="acme-distiller-b", kind="merge"),
    _series(6, pod="acme-distiller-c", kind="summary"),
    _series(4, pod="acme-distiller-c", kind="distill"),
    _series(100, pod="other-distiller-a", kind="summary", tenant="other"),
    _series(50, pod="acme-distiller-z", kind="summary", namespace="staging"),
]
TENANT_TOTAL = 6 + 4 + 2


def _promtool() -> str:
    found = str(PROMTOOL) if PROMTOOL.is_file() else shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is absent: run `make tools` (scripts/helm-tools.sh promtool)")
    return found


def _run_rule_tests(tmp_path: Path, expressions: dict[str, str], expected: dict[str, float]) -> None:
    rules = {
        "groups": [
            {"name": "echo-autoscaling", "rules": [{"record": r, "expr": e} for r, e in expressions.items()]}
        ]
    }
    tests: dict[str, Any] = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": INPUT_SERIES,
                "promql_expr_test": [
                    {
                        "expr": record,
                        "eval_time": "2m",
                        "exp_samples": [
                            {"labels": f'{record}{{namespace="tenants",tenant="acme"}}', "value": value}
                        ],
                    }
                    for record, value in expected.items()
                ],
            }
        ],
    }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        [_promtool(), "test", "rules", "tests.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_keda_and_the_adapter_count_each_pending_job_once(tmp_path: Path) -> None:
    _run_rule_tests(
        tmp_path,
        {
            "echo:keda_pending_jobs": render_distiller.pending_jobs_query(TENANT),
            "echo:adapter_pending_jobs": ADAPTER_QUERY,
        },
        {"echo:keda_pending_jobs": TENANT_TOTAL, "echo:adapter_pending_jobs": TENANT_TOTAL},
    )


def test_a_sum_over_workers_would_count_the_queue_once_per_replica(tmp_path: Path) -> None:
    """Why the max: the naive query asks for ~3x the replicas with 3 replicas, and more with more."""
    naive = 'sum by (namespace, tenant) (echo_jobs_pending{namespace="tenants",tenant="acme"})'
    _run_rule_tests(
        tmp_path, {"echo:naive_pending_jobs": naive}, {"echo:naive_pending_jobs": 3 * (6 + 4) + 2 * 2}
    )
