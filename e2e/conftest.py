"""The e2e suite's cluster, chart and tenants: kind (e2e/run.sh) or the single-node tier (make test-cluster).

E2E_KUBECONFIG names the cluster; without it every test here is skipped. E2E_PLATFORM says what it is:
`node` (scripts/cluster.sh: one node, images built here and never pulled, no Qdrant image) or `kind`.
E2E_IMAGE_REGISTRY / E2E_IMAGE_TAG name the images (default ghcr.io/echo-k8s and the chart's appVersion).
The chart is installed once per run as a user types it (repository, tag and pullPolicy only); the
uninstall test runs last. A failing test leaves its namespaces' objects and logs in e2e/artifacts/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kube import ROOT, Cluster

KUBECONFIG = os.environ.get("E2E_KUBECONFIG", "")
PLATFORM = os.environ.get("E2E_PLATFORM", "node")
REGISTRY = os.environ.get("E2E_IMAGE_REGISTRY", "ghcr.io/echo-k8s")
CHART = ROOT / "charts" / "echo-operator"
APP_VERSION = re.search(r'^appVersion:\s*"?([^"\n]+)"?', (CHART / "Chart.yaml").read_text(), re.M).group(1)  # type: ignore[union-attr]
TAG = os.environ.get("E2E_IMAGE_TAG", APP_VERSION)
OPERATOR_NAMESPACE = "echo-system"
RELEASE = "echo-operator"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The faults after the other tests, the chart's uninstall last."""
    if not KUBECONFIG:
        skip = pytest.mark.skip(
            reason="E2E_KUBECONFIG unset: make test-cluster (this node) or e2e/run.sh (kind)"
        )
        for item in items:
            if "test_conversation_local" not in item.nodeid and "test_chat.py" not in item.nodeid:
                item.add_marker(skip)
    # The faults (a kubelet restart among them) after the other checks, the uninstall at the very end.
    items.sort(key=lambda item: (item.get_closest_marker("last") is not None, "test_faults" in item.nodeid))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "last: runs after every other e2e test (the chart's uninstall)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed and KUBECONFIG:
        cluster = Cluster(Path(KUBECONFIG), PLATFORM)
        namespaces = [OPERATOR_NAMESPACE, *getattr(item.module, "NAMESPACES", [])]
        folder = cluster.dump(item.nodeid, namespaces)
        report.sections.append(("e2e artifacts", str(folder)))
    return report


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return Cluster(Path(KUBECONFIG), PLATFORM)


def image(name: str) -> str:
    return f"{REGISTRY}/{name}:{TAG}"


@pytest.fixture(scope="session")
def operator(cluster: Cluster) -> str:
    """`helm install` of the chart as its README says, with only the operator image set; Ready."""
    result = cluster.helm(
        "upgrade", "--install", RELEASE, str(CHART), "--namespace", OPERATOR_NAMESPACE, "--create-namespace",
        "--set", f"image.repository={REGISTRY}/echo-operator", "--set", f"image.tag={TAG}",
        "--set", "image.pullPolicy=Never", "--wait", "--timeout", "5m",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    cluster.kubectl("wait", "--for=condition=Established", "crd/echodeployments.echo.dev", "--timeout=60s")
    return OPERATOR_NAMESPACE


EXAMPLES = ROOT / "docs" / "examples"


@dataclass(frozen=True)
class Tenant:
    """An EchoDeployment applied from docs/examples/ as it is, in a namespace of its own."""

    cluster: Cluster
    namespace: str
    name: str

    @property
    def hooks_service(self) -> str:
        return f"{self.name}-hooks"

    @property
    def api_key(self) -> str:
        return self.cluster.secret(self.namespace, f"{self.name}-api-key", "api-key")

    def resource(self) -> dict:
        return self.cluster.get("-n", self.namespace, "echodeployment", self.name)

    def condition(self, kind: str) -> dict | None:
        return self.cluster.condition(self.resource(), kind)

    def service_url(self) -> str:
        """The hooks Service by its ClusterIP (the single-node tier routes the host to Services)."""
        service = self.cluster.get("-n", self.namespace, "service", self.hooks_service)
        return f"http://{service['spec']['clusterIP']}:9099"


def apply_example(cluster: Cluster, example: str, namespace: str) -> Tenant:
    path = EXAMPLES / example
    cluster.kubectl("create", "namespace", namespace)
    cluster.apply(path, namespace)
    documents = [doc for doc in path.read_text().split("\n---") if "kind: EchoDeployment" in doc]
    name = re.search(r"^  name:\s*(\S+)", documents[0], re.M).group(1)  # type: ignore[union-attr]
    return Tenant(cluster, namespace, name)


def delete_tenant(tenant: Tenant) -> None:
    """Delete the EchoDeployment (the operator lets go; its children are collected), then the namespace."""
    cluster = tenant.cluster
    gone = ["--ignore-not-found", "--timeout=120s"]
    cluster.kubectl("-n", tenant.namespace, "delete", "echodeployment", tenant.name, *gone)
    cluster.kubectl("delete", "namespace", tenant.namespace, "--ignore-not-found", "--timeout=300s")


@pytest.fixture(scope="session")
def distributed(cluster: Cluster, operator: str) -> Iterator[Tenant]:
    """docs/examples/echo-cpu.yaml: PostgreSQL, hooks, distiller, embedding (MiniLM) and a managed Qdrant."""
    tenant = apply_example(cluster, "echo-cpu.yaml", "echo-test")
    cluster.wait_condition(tenant.namespace, f"echodeployment/{tenant.name}", "HooksReady", "True", 600)
    yield tenant
    delete_tenant(tenant)


@pytest.fixture(scope="session")
def standalone(cluster: Cluster, operator: str) -> Iterator[Tenant]:
    """docs/examples/echo-standalone.yaml: one pod, embedded PostgreSQL, local Qdrant, MiniLM, on a PVC."""
    tenant = apply_example(cluster, "echo-standalone.yaml", "echo-home")
    cluster.wait_condition(tenant.namespace, f"echodeployment/{tenant.name}", "Ready", "True", 600)
    yield tenant
    delete_tenant(tenant)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    table = ROOT / "e2e" / "artifacts" / "faults.md"
    if KUBECONFIG and table.exists():
        terminalreporter.write_sep("-", "faults on the cluster")
        terminalreporter.write(table.read_text())


def pytest_sessionstart(session: pytest.Session) -> None:
    (ROOT / "e2e" / "artifacts" / "faults.md").unlink(missing_ok=True)  # this run's table only
