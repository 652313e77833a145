"""The kind e2e suite (e2e/), checked statically: it needs Docker and kind, which are not here.

What can be proven without a cluster is: its manifests are valid Kubernetes objects, its
EchoDeployment is accepted by the operator's own parser and renders, it uses the images the suite
builds, and every wait in e2e/run.sh has a timeout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "e2e"
RUN = (E2E / "run.sh").read_text()
RUN_LINES = RUN.replace("\\\n", " ").splitlines()  # continuation lines joined
KUBERNETES_VERSION = "1.33"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _echodeployment() -> dict[str, Any]:
    (doc,) = _docs(E2E / "manifests" / "echodeployment.yaml")
    return doc


@pytest.mark.parametrize("name", ["postgres.yaml", "fake-gemini.yaml"])
def test_the_e2e_manifests_are_valid_kubernetes(name: str) -> None:
    docs = _docs(E2E / "manifests" / name)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_e2e_echodeployment_is_accepted_and_renders() -> None:
    render = pytest.importorskip("echo_operator.render")
    doc = _echodeployment()
    assert (doc["apiVersion"], doc["kind"]) == ("echo.dev/v1alpha1", "EchoDeployment")
    children = render.render(doc["metadata"]["name"], "echo-e2e", doc["spec"])
    kinds = {(child["kind"], child["metadata"]["name"]) for child in children}
    assert {("Deployment", "e2e-hooks"), ("Service", "e2e-hooks"), ("Deployment", "e2e-embedding")} <= kinds
    for child in children:
        if child["apiVersion"].startswith(("monitoring.coreos.com", "keda.sh")):
            continue
        kubernetes_validate.validate(child, KUBERNETES_VERSION, strict=True)
    (embedding,) = [
        c for c in children if c["metadata"]["name"] == "e2e-embedding" and c["kind"] == "Deployment"
    ]
    (container,) = embedding["spec"]["template"]["spec"]["containers"]
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})  # CPU only


def test_the_e2e_echodeployment_fits_the_crd_schema() -> None:
    crd_path = ROOT / "crds" / "echo.dev_echodeployments.yaml"
    if not crd_path.is_file():
        pytest.skip("crds/echo.dev_echodeployments.yaml is not generated yet (make crds)")
    (crd,) = _docs(crd_path)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    jsonschema.Draft202012Validator(version["schema"]["openAPIV3Schema"]).validate(_echodeployment())


def test_the_e2e_uses_the_images_it_builds_and_never_pulls_them() -> None:
    spec = _echodeployment()["spec"]
    assert spec["images"]["pullPolicy"] == "Never"
    assert spec["images"]["echo"] == {"repository": "ghcr.io/echo-k8s/echo", "tag": "e2e"}
    assert spec["images"]["embedding"] == {"repository": "ghcr.io/echo-k8s/echo-embedding", "tag": "e2e"}
    assert 'REGISTRY="ghcr.io/echo-k8s"' in RUN
    assert 'TAG="e2e"' in RUN
    fake = next(d for d in _docs(E2E / "manifests" / "fake-gemini.yaml") if d["kind"] == "Deployment")
    assert fake["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/echo-k8s/echo:e2e"
    assert spec["llm"]["baseUrl"] == "http://fake-gemini:8080"
    assert spec["embedding"]["gpu"]["count"] == 0
    assert "EMBEDDING_MODEL=sentence-transformers/all-MiniLM-L6-v2" in RUN
    assert spec["embedding"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert spec["embedding"]["dimension"] == 384


def test_every_wait_in_the_suite_has_a_timeout() -> None:
    waits = [line for line in RUN_LINES if re.search(r"\b(wait|rollout status)\b", line) and "k " in line]
    assert waits
    for line in waits:
        assert "--timeout" in line, line
    assert "wait --for=condition=Ready" in RUN
    assert "trap cleanup EXIT" in RUN
    assert "kind delete cluster" in RUN


def test_the_kind_nodes_are_pinned() -> None:
    config = yaml.safe_load((E2E / "kind-config.yaml").read_text())
    for node in config["nodes"]:
        assert re.fullmatch(r"kindest/node:v1\.33\.\d+", node["image"]), node


def test_the_makefile_has_the_targets() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("tools", "images", "e2e"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target
