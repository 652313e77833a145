"""A real kube-apiserver v1.20.2 + etcd for the `kube` tier (scripts/kube-apiserver.sh).

The binaries are built once into a cache (`scripts/kube-apiserver.sh build`, ~5 min of CPU); where
they are absent every test that needs them is skipped with the command that builds them.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kube-apiserver.sh"
# What the chart's templates/crd.yaml installs on a server before 1.25 (no CEL rules).
CRD_FILE = ROOT / "charts" / "echo-operator" / "files" / "echo.dev_echodeployments.without-cel.yaml"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kube: needs the real kube-apiserver that scripts/kube-apiserver.sh builds"
    )


@dataclass(frozen=True)
class RealApiServer:
    """The server; `token`/`kubeconfig` are an admin's, `operator_kubeconfig` the ServiceAccount
    echo-system/echo-operator's (it may do only what RBAC bound to it allows)."""

    url: str
    token: str
    kubeconfig: Path
    state: Path
    operator_kubeconfig: Path


def built() -> bool:
    return subprocess.run([str(SCRIPT), "path"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="session")
def real_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealApiServer]:
    """etcd + kube-apiserver on free loopback ports for the whole session, stopped by PID after it."""
    if not built():
        pytest.skip(
            f"no cached kube-apiserver: run `{SCRIPT.relative_to(SCRIPT.parents[1])} build` (~5 min, once)"
        )
    state = tmp_path_factory.mktemp("kube-apiserver")
    started = subprocess.run(
        [str(SCRIPT), "start", str(state)], capture_output=True, text=True, timeout=90, check=False
    )
    try:
        assert started.returncode == 0, started.stderr + _tail(state / "apiserver.log")
        env = dict(line.split("=", 1) for line in (state / "env").read_text().split())
        yield RealApiServer(
            env["KUBE_APISERVER_URL"],
            env["KUBE_TOKEN"],
            state / "kubeconfig",
            state,
            state / "operator-kubeconfig",
        )
    finally:
        subprocess.run([str(SCRIPT), "stop", str(state)], capture_output=True, timeout=30, check=False)


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@pytest.fixture(scope="session")
def echo_crd(real_apiserver: RealApiServer) -> RealApiServer:
    """The real server with the EchoDeployment CRD the chart gives 1.20, and Established."""
    crd = yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    headers = {"Authorization": f"Bearer {real_apiserver.token}"}
    with httpx.Client(base_url=real_apiserver.url, headers=headers, verify=False, timeout=10) as client:
        answer = client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
        assert answer.status_code in (201, 409), answer.text
        url = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        deadline = time.monotonic() + 20
        while True:
            conditions = (client.get(url).json().get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return real_apiserver
            assert time.monotonic() < deadline, f"CRD not Established: {conditions}"
            time.sleep(0.2)


HELM = ROOT / "tools" / "bin" / "helm"
CHART = ROOT / "charts" / "echo-operator"
OPERATOR_NAMESPACE = "echo-system"
OPERATOR_ACCOUNT = "echo-operator"
_PLURALS = {
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
}


def chart_rbac(watched: str) -> list[dict[str, object]]:
    """The chart's ServiceAccount and RBAC for an operator watching `watched`, as `helm template` renders."""
    rendered = subprocess.run(
        [
            str(HELM), "template", "echo", str(CHART), "--namespace", OPERATOR_NAMESPACE,
            "--set", "watch.allNamespaces=false", "--set", f"watch.namespaces={{{watched}}}",
            "--set", f"serviceAccount.name={OPERATOR_ACCOUNT}",
        ],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    return [doc for doc in yaml.safe_load_all(rendered) if doc and doc.get("kind") in _PLURALS]


@pytest.fixture(scope="session")
def operator_rbac(echo_crd: RealApiServer) -> list[dict[str, object]]:
    """The chart's own RBAC applied for the operator's ServiceAccount (watching `echo-test`): the
    operator then runs with exactly the rights the chart grants."""
    if not HELM.exists():
        pytest.skip("tools/bin/helm is absent: run `make tools` to render the chart's RBAC")
    headers = {"Authorization": f"Bearer {echo_crd.token}"}
    docs = chart_rbac("echo-test")
    with httpx.Client(base_url=echo_crd.url, headers=headers, verify=False, timeout=10) as client:
        for namespace in (OPERATOR_NAMESPACE, "echo-test"):
            answer = client.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
            assert answer.status_code in (201, 409), answer.text
        for doc in docs:
            base, plural, namespaced = _PLURALS[str(doc["kind"])]
            metadata = doc["metadata"]
            assert isinstance(metadata, dict)
            scope = f"/namespaces/{metadata.get('namespace', OPERATOR_NAMESPACE)}" if namespaced else ""
            answer = client.post(f"{base}{scope}/{plural}", json=doc)
            assert answer.status_code in (201, 409), answer.text
    accounts = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert [a["metadata"]["name"] for a in accounts] == [OPERATOR_ACCOUNT]  # type: ignore[index]
    return docs
