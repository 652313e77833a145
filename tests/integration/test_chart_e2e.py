"""The e2e suite (e2e/), checked statically; it runs for real in `make test-cluster` (the single-node
tier) and `e2e/run.sh` (kind), which need a cluster.

What can be proven without one: the examples it applies are valid Kubernetes objects and accepted by the
operator's own parser, the images they name are the ones `make images` builds (or Qdrant's, which kind
loads), the chart is installed as a user types it, every wait has a deadline, kind's nodes are pinned.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "e2e"
EXAMPLES = ROOT / "docs" / "examples"
KUBERNETES_VERSION = "1.33"
BUILT = {"echo", "echo-standalone", "echo-operator", "echo-embedding", "echo-postgres"}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _tenants() -> list[dict[str, Any]]:
    return [doc for path in EXAMPLES.glob("*.yaml") for doc in _docs(path) if doc["kind"] == "EchoDeployment"]


@pytest.mark.parametrize("example", ["echo-cpu.yaml", "echo-standalone.yaml"])
def test_the_examples_the_suite_applies_are_valid_kubernetes(example: str) -> None:
    docs = _docs(EXAMPLES / example)
    assert any(doc["kind"] == "EchoDeployment" for doc in docs)
    for doc in docs:
        if doc["kind"] != "EchoDeployment":
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("example", ["echo-cpu.yaml", "echo-standalone.yaml"])
def test_the_examples_images_are_the_ones_make_images_builds(example: str) -> None:
    render = pytest.importorskip("echo_operator.render")
    images = set()
    for doc in _docs(EXAMPLES / example):
        if doc["kind"] == "EchoDeployment":
            children = render.render(doc["metadata"]["name"], "echo-test", doc["spec"])
        else:
            children = [doc]
        for child in children:
            pod = child.get("spec", {}).get("template", {}).get("spec", {})
            images |= {c["image"] for c in pod.get("containers", []) + pod.get("initContainers", [])}
    assert images
    for image in images:
        repository, tag = image.rsplit(":", 1)
        if repository.startswith("qdrant/"):
            continue  # kind loads it; the single-node tier has none, and the test says so
        assert repository.startswith("ghcr.io/echo-k8s/"), image
        assert repository.rsplit("/", 1)[1] in BUILT, image
        assert tag == "0.1.0", image


def test_the_chart_is_installed_as_a_user_types_it() -> None:
    conftest = (E2E / "conftest.py").read_text()
    settings = re.findall(r'"--set", f?"([a-zA-Z.]+)=', conftest)
    assert sorted(settings) == ["image.pullPolicy", "image.repository", "image.tag"]
    assert "charts/echo-operator/crds" not in (E2E / "run.sh").read_text()


def test_every_wait_in_the_suite_has_a_deadline() -> None:
    import inspect
    import sys

    sys.path.insert(0, str(E2E))
    try:
        import kube
    finally:
        sys.path.remove(str(E2E))
    seconds = inspect.signature(kube.eventually).parameters["seconds"]
    assert seconds.default is inspect.Parameter.empty  # no wait without a deadline
    for path in E2E.glob("*.py"):
        text = path.read_text()
        assert "while True" not in text or path.name in ("kube.py", "conversation.py"), path.name
        assert "kubectl wait" not in text or "--timeout" in text, path.name
    run = (E2E / "run.sh").read_text()
    assert "trap cleanup EXIT" in run
    assert "kind delete cluster" in run
    assert "E2E_PLATFORM=kind" in run


def test_the_kind_nodes_are_pinned() -> None:
    config = yaml.safe_load((E2E / "kind-config.yaml").read_text())
    for node in config["nodes"]:
        assert re.fullmatch(r"kindest/node:v1\.33\.\d+", node["image"]), node


def test_the_makefile_has_the_targets() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = ("tools", "images", "e2e", "cluster-up", "cluster-down", "cluster-kubeconfig", "test-cluster")
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target
    assert re.search(r"^(make|part) test-cluster$", (ROOT / ".ci" / "run").read_text(), re.MULTILINE)
