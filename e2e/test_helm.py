"""The chart as its user installs it: the operator as a pod under the chart's own ServiceAccount and RBAC,
`helm upgrade` upgrading the CRD too, `helm uninstall` leaving nothing of the release behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from conftest import CHART, OPERATOR_NAMESPACE, RELEASE
from kube import Cluster, eventually

pytestmark = pytest.mark.timeout(600)
OPERATOR_SELECTOR = "app.kubernetes.io/name=echo-operator,app.kubernetes.io/component=operator"
CRD = "crd/echodeployments.echo.dev"


def test_the_operator_runs_as_a_pod_under_the_charts_service_account(cluster: Cluster, operator: str) -> None:
    pods = eventually("a Ready operator pod", lambda: cluster.ready_pods(operator, OPERATOR_SELECTOR), 120)
    pod = pods[0]
    assert pod["spec"]["serviceAccountName"] == RELEASE
    container = pod["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "Never"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    # The token the ServiceAccount admission plugin mounted is the one kopf uses: no 403 in its log.
    logs = eventually(
        "the operator's log", lambda: cluster.kubectl("-n", operator, "logs", pod["metadata"]["name"]), 60
    )
    assert "Forbidden" not in logs, logs[-2000:]
    assert cluster.condition(pod, "Ready")["status"] == "True"


def test_helm_upgrade_upgrades_the_crd(cluster: Cluster, operator: str, tmp_path: Path) -> None:
    """A new chart whose CRD gains a field: `helm upgrade` alone must bring it (crds/ never would)."""
    chart = tmp_path / "echo-operator"
    shutil.copytree(CHART, chart)
    crd_files = [path for path in chart.rglob("*.yaml") if "openAPIV3Schema:" in path.read_text()]
    assert crd_files, "no CRD in the chart"
    for path in crd_files:
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            version["schema"]["openAPIV3Schema"]["description"] = "e2e-upgrade-probe"
        path.write_text(yaml.safe_dump(crd, sort_keys=False))

    def upgrade(source: Path) -> None:
        result = cluster.helm(
            "upgrade", RELEASE, str(source), "--namespace", OPERATOR_NAMESPACE, "--reuse-values",
            "--wait", "--timeout", "5m",
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr

    def schema_description() -> str:
        versions = cluster.get(CRD)["spec"]["versions"]
        return versions[0]["schema"]["openAPIV3Schema"].get("description", "")

    upgrade(chart)
    assert schema_description() == "e2e-upgrade-probe"
    upgrade(CHART)
    assert schema_description() != "e2e-upgrade-probe"


@pytest.mark.last
def test_helm_uninstall_leaves_no_orphan(cluster: Cluster, operator: str) -> None:
    # As the README says to remove ECHO: the tenants first (the operator lets go of each), then the chart.
    for tenant in cluster.get("echodeployments", "-A")["items"]:
        meta = tenant["metadata"]
        cluster.kubectl("-n", meta["namespace"], "delete", "echodeployment", meta["name"], "--timeout=180s")
    result = cluster.helm("uninstall", RELEASE, "-n", OPERATOR_NAMESPACE, "--wait", "--timeout", "3m")
    assert result.returncode == 0, result.stdout + result.stderr
    selector = f"app.kubernetes.io/instance={RELEASE}"

    def released() -> bool:
        kinds = "all,configmaps,secrets,serviceaccounts,roles,rolebindings"
        namespaced = cluster.kubectl("get", kinds, "-A", "-l", selector, "-o", "name")
        cluster_wide = cluster.kubectl("get", "clusterroles,clusterrolebindings", "-l", selector, "-oname")
        return not namespaced.strip() and not cluster_wide.strip()

    eventually("every object of the release gone", released, 120)
    # The CRD is kept on purpose (crds.keep: deleting it would delete every tenant); it is the only one left.
    crd = cluster.get(CRD)
    assert crd["metadata"]["annotations"].get("helm.sh/resource-policy") == "keep"
