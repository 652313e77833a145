"""`helm install`, `helm upgrade` and `helm uninstall` of the chart against a real kube-apiserver
v1.20.2: the CRD is a template that this server takes (no CEL rules before 1.25; a 1.20 server
refuses a CRD with `x-kubernetes-validations`), that `helm upgrade` upgrades, and that `helm
uninstall` leaves (crds.keep). No kubelet runs here: the operator's pod is never started, only its
objects are created.

The session's CRD was created before (conftest `echo_crd`, as `kubectl apply` would): Helm refuses to
take over an object it does not own until it is labelled and annotated as the chart's README says.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

pytestmark = [pytest.mark.kube, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / "tools" / "bin" / "helm"
CHART = ROOT / "charts" / "echo-operator"
RELEASE = "echo-operator"
NAMESPACE = "echo-helm"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/echodeployments.echo.dev"
DESCRIPTION = "An ECHO tenant: hooks, distiller, embedding, Qdrant, config, monitoring."


@pytest.fixture(scope="module")
def helm(echo_crd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`helm …` as the cluster admin, with its own cache and config folders."""
    if not HELM.exists():
        pytest.skip("tools/bin/helm is absent: run `make tools`")
    home = tmp_path_factory.mktemp("helm")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "KUBECONFIG": str(echo_crd.kubeconfig),
        **{f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")},
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(HELM), *args], capture_output=True, text=True, timeout=120, env=env, check=False
        )
        if check:
            assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result

    yield run
    run("uninstall", RELEASE, "--namespace", NAMESPACE, check=False)


@pytest.fixture(scope="module")
def admin(echo_crd: Any) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {echo_crd.token}"}
    with httpx.Client(base_url=echo_crd.url, headers=headers, verify=False, timeout=10) as client:
        yield client


def install(helm: Any, chart: Path, verb: str = "install", *extra: str) -> subprocess.CompletedProcess[str]:
    # what a user on a machine without a registry types: only the image's pull policy
    args = [verb, RELEASE, str(chart), "--namespace", NAMESPACE, "--set", "image.pullPolicy=Never", *extra]
    return helm(*args, *(["--create-namespace"] if verb == "install" else []), check=False)


def crd(admin: httpx.Client) -> dict[str, Any]:
    answer = admin.get(CRD)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_install_upgrade_and_uninstall_of_the_chart(helm: Any, admin: httpx.Client, tmp_path: Path) -> None:
    refused = install(helm, CHART)
    assert refused.returncode != 0
    assert "ownership" in refused.stderr  # the CRD of `kubectl apply`: adopted by hand first (README)
    patch = {
        "metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "meta.helm.sh/release-name": RELEASE,
                "meta.helm.sh/release-namespace": NAMESPACE,
            },
        }
    }
    answer = admin.patch(CRD, json=patch, headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status_code == 200, answer.text

    result = install(helm, CHART)
    assert result.returncode == 0, result.stderr
    installed = crd(admin)
    assert installed["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert installed["metadata"]["labels"]["helm.sh/chart"] == "echo-operator-0.1.0"
    assert "x-kubernetes-validations" not in yaml.safe_dump(installed["spec"])
    deployment = admin.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RELEASE}").json()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["imagePullPolicy"] == "Never"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == RELEASE

    # `helm upgrade` upgrades the CRD: a chart whose CRD changed reaches the server. Helm 4 applies
    # server-side: the fields the first manager (kubectl) set are taken over once, --force-conflicts.
    changed = tmp_path / "echo-operator"
    shutil.copytree(CHART, changed)
    plain = changed / "files" / "echo.dev_echodeployments.without-cel.yaml"
    assert DESCRIPTION in plain.read_text()
    plain.write_text(plain.read_text().replace(DESCRIPTION, "An upgraded ECHO tenant."))
    conflict = install(helm, changed, "upgrade")
    assert conflict.returncode != 0
    assert "conflict" in conflict.stderr
    result = install(helm, changed, "upgrade", "--force-conflicts")
    assert result.returncode == 0, result.stderr
    schema = crd(admin)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["description"] == "An upgraded ECHO tenant."
    result = install(helm, CHART, "upgrade")  # Helm owns the fields now: a plain upgrade
    assert result.returncode == 0, result.stderr
    assert crd(admin)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] == DESCRIPTION

    # `helm uninstall` takes the operator and its RBAC, and leaves the CRD (and every tenant)
    helm("uninstall", RELEASE, "--namespace", NAMESPACE)
    assert admin.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RELEASE}").status_code == 404
    assert admin.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{RELEASE}").status_code == 404
    kept = crd(admin)
    established = {c["type"]: c["status"] for c in kept["status"]["conditions"]}
    assert established["Established"] == "True"
