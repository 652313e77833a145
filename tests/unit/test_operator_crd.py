"""The generated EchoDeployment CRD: in sync on disk, a valid structural CRD, and sample CRs checked
against its schema (jsonschema) and against the models that mirror its CEL rules (pydantic)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from echo_operator import crd
from echo_operator.spec import InvalidSpec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
BASE: dict[str, Any] = {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}}


def schema() -> dict[str, Any]:
    return crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    for item in node.get("anyOf") or ():
        yield from walk(item, path)


def strict(node: dict[str, Any]) -> dict[str, Any]:
    """The CRD schema as the API server with strict field validation applies it: unknown fields refused."""
    node = copy.deepcopy(node)
    for _, sub in walk(node):
        if "properties" in sub and not sub.get("x-kubernetes-preserve-unknown-fields"):
            sub["additionalProperties"] = False
    return node


VALIDATOR = jsonschema.Draft4Validator(strict(schema()))


def custom_resource(spec: dict[str, Any], name: str = "acme") -> dict[str, Any]:
    return {
        "apiVersion": "echo.dev/v1alpha1",
        "kind": "EchoDeployment",
        "metadata": {"name": name, "namespace": "tenants"},
        "spec": spec,
    }


def schema_errors(body: dict[str, Any]) -> list[str]:
    return [error.message for error in VALIDATOR.iter_errors(body)]


def with_changes(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    change(spec)
    return spec


def example_specs() -> list[tuple[str, dict[str, Any]]]:
    """The EchoDeployments of docs/examples/ and of the kind e2e suite."""
    out = []
    e2e = ROOT / "e2e" / "manifests" / "echodeployment.yaml"
    for path in [*sorted(EXAMPLES.glob("*.yaml")), *([e2e] if e2e.is_file() else [])]:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "EchoDeployment":
                out.append((doc["metadata"]["name"], doc["spec"]))
    return out


# --- the file and the CRD itself ---------------------------------------------------------------


@pytest.mark.parametrize("output", crd.OUTPUTS, ids=lambda output: str(output.path))
def test_crd_files_are_in_sync(output: crd.Output) -> None:
    path = ROOT / output.path
    assert path.is_file(), f"{output.path} is missing: run `make crds`"
    assert path.read_text() == crd.render_yaml(cel=output.cel), (
        f"{output.path} is out of date: run `make crds`"
    )


def test_the_files_are_the_kubectl_crd_and_the_charts_two() -> None:
    expected = (
        Path("crds/echo.dev_echodeployments.yaml"),
        Path("charts/echo-operator/files/echo.dev_echodeployments.yaml"),
        Path("charts/echo-operator/files/echo.dev_echodeployments.without-cel.yaml"),
    )
    assert expected == crd.DEFAULT_PATHS
    assert [output.cel for output in crd.OUTPUTS] == [True, True, False]
    # A CRD in the chart's crds/ would be installed by Helm before templates/crd.yaml, which would then
    # fail on an object it does not own.
    assert not list((ROOT / "charts" / "echo-operator" / "crds").glob("*.yaml"))


def test_crd_main_writes_then_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "nested" / "crd.yaml"
    assert crd.main(["--check", str(target)]) == 1
    assert not target.exists()
    assert crd.main([str(target)]) == 0
    assert crd.main(["--check", str(target)]) == 0
    assert yaml.safe_load(target.read_text()) == crd.build_crd()
    assert "wrote" in capsys.readouterr().err
    assert crd.main(["--check", "--without-cel", str(target)]) == 1
    assert crd.main(["--without-cel", str(target)]) == 0
    assert yaml.safe_load(target.read_text()) == crd.build_crd(cel=False)


def test_crd_main_refuses_a_charts_crds_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\n")
    target = tmp_path / "crds" / "crd.yaml"
    assert crd.main([str(target)]) == 2
    assert not target.exists()
    assert "templates/crd.yaml" in capsys.readouterr().err


@pytest.mark.parametrize("cel", [True, False])
def test_crd_is_a_valid_custom_resource_definition(cel: bool) -> None:
    kubernetes_validate.validate(crd.build_crd(cel=cel), "1.33", strict=True)


def test_the_crd_for_older_servers_is_the_same_without_its_cel_rules() -> None:
    """An API server before 1.23 refuses a whole CRD that names x-kubernetes-validations."""
    plain = crd.build_crd(cel=False)
    assert "x-kubernetes-validations" not in json.dumps(plain)
    full = crd.build_crd()
    assert crd.without_cel(full) == plain
    assert full["metadata"] == plain["metadata"]
    assert cel_rules()  # the rules exist in the other one
    assert crd.render_yaml(cel=False).startswith(crd.HEADER + crd.HEADER_WITHOUT_CEL)


def test_crd_names_scope_status_and_columns() -> None:
    spec = crd.build_crd()["spec"]
    assert crd.build_crd()["metadata"]["name"] == "echodeployments.echo.dev"
    assert spec["group"] == "echo.dev"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "EchoDeployment"
    assert spec["names"]["shortNames"] == ["echo"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Hooks"] == ".status.hooksEndpoint"
    assert columns["Age"] == ".metadata.creationTimestamp"


def test_schema_is_structural() -> None:
    for path, node in walk(schema()):
        assert "$ref" not in node, path
        assert "title" not in node, path
        assert node.get("additionalProperties") is not False, path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
        elif not node.get("x-kubernetes-preserve-unknown-fields") and path != ".metadata":
            assert "type" in node, path
        assert not ("properties" in node and "additionalProperties" in node), path


def test_unknown_fields_are_preserved_only_inside_valves() -> None:
    preserved = {path for path, node in walk(schema()) if node.get("x-kubernetes-preserve-unknown-fields")}
    assert preserved == {
        ".spec.valves.inline.echo_context",
        ".spec.valves.inline.echo_compression",
        ".spec.valves.inline.echo_memory",
    }


def test_defaults_and_enums() -> None:
    props = dict(walk(schema()))
    assert props[".spec.embedding.model"]["default"] == "BAAI/bge-m3"
    assert props[".spec.embedding.dimension"]["default"] == 1024
    assert props[".spec.embedding.gpu.resourceName"]["default"] == "nvidia.com/gpu"
    assert props[".spec.llm.provider"]["enum"] == ["gemini", "openai", "offline"]
    assert props[".spec.qdrant"]["default"] == {"managed": {}}
    assert props[".spec.hooks"]["default"] == {}
    assert props[".status.conditions"]["x-kubernetes-list-type"] == "map"
    assert set(props[".spec"]["required"]) == {"llm"}  # database: a CEL rule, distributed mode only
    assert props[".spec.mode"]["enum"] == ["distributed", "standalone"]
    assert props[".spec.mode"]["default"] == "distributed"
    assert props[".spec.standalone"]["default"] == {}
    assert props[".spec.images.standalone"]["default"] == {
        "repository": "ghcr.io/echo-k8s/echo-standalone",
        "tag": "0.1.0",
    }


# --- sample custom resources ---------------------------------------------------------------------


VALID: list[tuple[str, dict[str, Any]]] = [
    ("minimal", BASE),
    (
        "external-services",
        {
            **BASE,
            "qdrant": {"externalUrl": "https://q.example.com", "apiKeySecretRef": {"name": "q"}},
            "embedding": {"externalUrl": "http://embed:7997", "model": "m", "dimension": 768},
        },
    ),
    ("keda", {**BASE, "distiller": {"keda": True, "minReplicas": 2, "maxReplicas": 2}}),
    (
        "config-maps",
        {
            **BASE,
            "valves": {"configMapRef": {"name": "v", "key": "valves.yaml"}},
            "modelThresholds": {"configMapRef": {"name": "t", "key": "t.yaml"}},
        },
    ),
    ("gemini", {**BASE, "llm": {"apiKeySecretRef": {"name": "g"}}}),
    (
        "admin-key",
        {
            **BASE,
            "hooks": {"apiKeySecretRef": {"name": "k"}, "adminKeySecretRef": {"name": "k", "key": "admin"}},
        },
    ),
    (
        "openwebui-pods",
        {
            **BASE,
            "networkPolicy": {
                "openwebui": {
                    "namespace": "chat",
                    "podLabels": {"app.kubernetes.io/component": "open-webui"},
                },
                "hooksFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
            },
        },
    ),
    (
        "openai",
        {**BASE, "llm": {"provider": "openai", "baseUrl": "http://vllm:8000/v1", "models": ["qwen3"]}},
    ),
    (
        "summary-window",
        {
            **BASE,
            "valves": {
                "inline": {
                    "echo_compression": {"summary_model_max_context": 20000, "max_summary_tokens": 15999}
                }
            },
        },
    ),
    ("standalone", {"mode": "standalone", "llm": {"provider": "offline"}}),
    (
        "standalone-all-set",
        {
            "mode": "standalone",
            "llm": {"apiKeySecretRef": {"name": "g"}},
            "images": {"standalone": {"repository": "registry.local/echo-standalone", "tag": "dev"}},
            "standalone": {
                "image": "registry.local/echo-standalone:other",
                "workerConcurrency": 4,
                "startupTimeoutSeconds": 600,
                "resources": {"limits": {"memory": "4Gi"}},
                "storage": {"size": "20Gi", "storageClassName": "fast", "retainOnDelete": False},
            },
            "hooks": {"apiKeySecretRef": {"name": "k"}, "serviceType": "NodePort"},
            # ignored in standalone mode (the Ready message says so), not refused
            "distiller": {"replicas": 3},
        },
    ),
    *example_specs(),
]


@pytest.mark.parametrize(("case", "spec"), VALID, ids=[case for case, _ in VALID])
def test_valid_samples_pass_schema_and_models(case: str, spec: dict[str, Any]) -> None:
    assert schema_errors(custom_resource(spec)) == []
    parse_spec("acme", spec)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = spec
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value

    return change


def _compression(**valves: Any) -> Callable[[dict[str, Any]], None]:
    return _set("valves", {"inline": {"echo_compression": valves}})


def _standalone(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        del spec["database"]
        spec.update(mode="standalone", **changes)

    return change


# (case, change, fragment of the error, whether the structural schema already refuses it)
INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str, bool]] = [
    ("unknown-field", _set("hooks.colour", "blue"), "Extra inputs are not permitted", True),
    ("wrong-type", _set("hooks.replicas", "two"), "valid integer", True),
    ("below-minimum", _set("distiller.concurrency", 0), "greater than or equal to 1", True),
    ("bad-enum", _set("llm.provider", "anthropic"), "'gemini', 'openai' or 'offline'", True),
    ("bad-url", _set("embedding.externalUrl", "embed:7997"), "should match pattern", True),
    ("bad-mode", _set("mode", "embedded"), "'distributed' or 'standalone'", True),
    ("unknown-filter", _set("valves", {"inline": {"echo_magic": {}}}), "unknown filter id", True),
    (
        "threshold-entry-type",
        _set("modelThresholds", {"inline": {"m": {"max_context_tokens": "big"}}}),
        "valid integer",
        True,
    ),
    # CEL rules: the schema alone lets these through; the API server's CEL and the models refuse them.
    (
        "missing-database",
        lambda spec: spec.pop("database"),
        "database is required in mode distributed",
        False,
    ),
    (
        "standalone-with-database",
        _set("mode", "standalone"),
        "a standalone tenant keeps its data in its own pod",
        False,
    ),
    (
        "standalone-with-external-qdrant",
        _standalone(qdrant={"externalUrl": "http://q:1"}),
        "remove database, qdrant.externalUrl and embedding.externalUrl",
        False,
    ),
    (
        "standalone-with-external-embedding",
        _standalone(embedding={"externalUrl": "http://e:1"}),
        "a standalone tenant keeps its data in its own pod",
        False,
    ),
    (
        "qdrant-both",
        _set("qdrant", {"managed": {}, "externalUrl": "http://q:6333"}),
        "set exactly one of qdrant",
        False,
    ),
    ("qdrant-neither", _set("qdrant", {}), "set exactly one of qdrant", False),
    (
        "qdrant-key-managed",
        _set("qdrant", {"managed": {}, "apiKeySecretRef": {"name": "k"}}),
        "apiKeySecretRef applies to an external Qdrant only",
        False,
    ),
    (
        "hooks-min-max",
        _set("hooks.autoscaling", {"minReplicas": 5, "maxReplicas": 3}),
        "minReplicas must be <= maxReplicas",
        False,
    ),
    (
        "distiller-min-max",
        _set("distiller", {"minReplicas": 4, "maxReplicas": 2}),
        "minReplicas must be <= maxReplicas",
        False,
    ),
    (
        "embedding-external-scheduling",
        _set("embedding", {"externalUrl": "http://e:1", "nodeSelector": {"gpu": "y"}}),
        "apply to a managed embedding only",
        False,
    ),
    ("gemini-without-key", _set("llm", {"provider": "gemini"}), "llm.apiKeySecretRef is required", False),
    ("openai-without-url", _set("llm", {"provider": "openai"}), "llm.baseUrl is required", False),
    (
        "admin-key-is-the-hooks-key",
        _set(
            "hooks", {"apiKeySecretRef": {"name": "k"}, "adminKeySecretRef": {"name": "k", "key": "api-key"}}
        ),
        "hooks.adminKeySecretRef must differ from hooks.apiKeySecretRef",
        False,
    ),
    (
        "openwebui-pods-without-labels",
        _set("networkPolicy", {"openwebui": {"namespace": "chat", "podLabels": {}}}),
        "at least 1 item",
        True,
    ),
    (
        "openwebui-bad-namespace",
        _set("networkPolicy", {"openwebui": {"namespace": "Chat_NS", "podLabels": {"app": "open-webui"}}}),
        "should match pattern",
        True,
    ),
    (
        "openwebui-key-without-url",
        _set("openwebui", {"apiKeySecretRef": {"name": "o"}}),
        "needs openwebui.url",
        False,
    ),
    (
        "valves-two-sources",
        _set("valves", {"inline": {}, "configMapRef": {"name": "v", "key": "k"}}),
        "set at most one of inline and configMapRef",
        False,
    ),
    (
        "thresholds-two-sources",
        _set("modelThresholds", {"inline": {}, "configMapRef": {"name": "t", "key": "k"}}),
        "set at most one of inline and configMapRef",
        False,
    ),
    (
        "summary-budget-default-window",
        _compression(max_summary_tokens=110000),
        "max_summary_tokens must be strictly below 80% of the effective summary input window",
        False,
    ),
    (
        "summary-budget-own-window",
        _compression(summary_model_max_context=10000, max_summary_tokens=8000),
        "max_summary_tokens must be strictly below 80% of the effective summary input window",
        False,
    ),
    (
        "summary-budget-small-ceiling",
        _compression(max_context_tokens=16000, compression_threshold_tokens=8000),
        "max_summary_tokens must be strictly below 80% of the effective summary input window",
        False,
    ),
    (
        "threshold-above-ceiling",
        _compression(compression_threshold_tokens=90000, max_context_tokens=80000, max_summary_tokens=1000),
        "must not exceed max_context_tokens",
        False,
    ),
    (
        "threshold-entry-above-ceiling",
        _set(
            "modelThresholds",
            {"inline": {"m": {"compression_threshold_tokens": 9000, "max_context_tokens": 8000}}},
        ),
        "must not exceed max_context_tokens",
        False,
    ),
    (
        "unknown-valve",
        _set("valves", {"inline": {"echo_memory": {"WINDOW": 3}}}),
        "Extra inputs are not permitted",
        False,
    ),
]


@pytest.mark.parametrize(("case", "change", "fragment", "structural"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_samples_are_refused(
    case: str, change: Callable[[dict[str, Any]], None], fragment: str, structural: bool
) -> None:
    spec = with_changes(change)
    with pytest.raises(InvalidSpec) as caught:
        parse_spec("acme", spec)
    assert fragment in str(caught.value)
    assert bool(schema_errors(custom_resource(spec))) is structural


def cel_rules() -> list[dict[str, str]]:
    return [rule for _, node in walk(schema()) for rule in node.get("x-kubernetes-validations") or ()]


def test_every_cel_rule_has_an_invalid_sample_with_its_message() -> None:
    covered = [fragment for _, _, fragment, structural in INVALID if not structural]
    for rule in cel_rules():
        if rule["message"].startswith("metadata.name"):
            continue  # test_name_rule
        assert any(fragment in rule["message"] for fragment in covered), rule["message"]
    for fragment in covered:
        if fragment != "Extra inputs are not permitted":  # the services' own unknown-valve check
            assert any(fragment in rule["message"] for rule in cel_rules()), fragment


def test_cel_rules_use_only_declared_fields() -> None:
    """CEL cannot see undeclared fields: every `self.x` of a rule is a property of its node."""
    import re

    for path, node in walk(schema()):
        props = set(node.get("properties") or {})
        for rule in node.get("x-kubernetes-validations") or ():
            for field in re.findall(r"self\.([A-Za-z_]+)", rule["rule"]):
                assert field in props, f"{path}: {rule['rule']} uses undeclared {field}"


def test_name_rule() -> None:
    (rule,) = schema()["x-kubernetes-validations"]
    assert "self.metadata.name.size() <= 40" in rule["rule"]
    with pytest.raises(InvalidSpec, match="DNS-1035"):
        parse_spec("Not-A-Label", BASE)
