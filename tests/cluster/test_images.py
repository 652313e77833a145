"""The images of `make images`, run: non-root, read-only root filesystem, health checks, what they serve.

Needs a Docker engine (DOCKER_HOST, else the project's own: `scripts/dockerd.sh env`) and the images
(`make images`, tag = the chart's appVersion, IMAGE_REGISTRY default ghcr.io/echo-k8s); skips
otherwise. Every container runs with `--read-only --tmpfs /tmp` (plus a named volume for its data)
on the default bridge; the host reaches it by its address, no port is published. Each container and
volume is removed by id afterwards, also when a test fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TAG = (
    os.environ.get("IMAGE_TAG")
    or yaml.safe_load((ROOT / "charts" / "echo-operator" / "Chart.yaml").read_text())["appVersion"]
)
REGISTRY = os.environ.get("IMAGE_REGISTRY", "ghcr.io/echo-k8s")
IMAGES = {name: f"{REGISTRY}/{name}:{TAG}" for name in ("echo", "echo-standalone", "echo-operator")}
IMAGES |= {name: f"{REGISTRY}/{name}:{TAG}" for name in ("echo-embedding", "echo-postgres")}
IMAGES["echo-pause"] = "echo-pause:local"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
API_KEY = "images-test-key"


def _docker_client() -> str | None:
    explicit = os.environ.get("DOCKER")
    if explicit:
        return explicit
    return "/usr/bin/docker" if Path("/usr/bin/docker").is_file() else shutil.which("docker")


def _docker_host() -> str | None:
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    result = subprocess.run(
        [str(ROOT / "scripts" / "dockerd.sh"), "env"], capture_output=True, text=True, timeout=30, check=False
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode == 0 and lines and lines[-1].startswith("DOCKER_HOST="):
        return lines[-1].split("=", 1)[1]
    return None


class Docker:
    def __init__(self, client: str, host: str) -> None:
        self.client, self.env = client, {**os.environ, "DOCKER_HOST": host}

    def __call__(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        result = subprocess.run(
            [self.client, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout.strip()

    def has(self, ref: str) -> bool:
        return bool(self("image", "inspect", ref, check=False))

    def inspect(self, ref: str) -> dict:
        return json.loads(self("inspect", ref))[0]

    def address(self, container: str) -> str:
        address = self.inspect(container)["NetworkSettings"]["IPAddress"]
        if not address:
            pytest.skip("the container has no address on the default bridge (dockerd --bridge none?)")
        return address

    def logs(self, container: str) -> str:
        result = subprocess.run(
            [self.client, "logs", container], env=self.env, capture_output=True, text=True, timeout=30
        )
        return result.stdout + result.stderr


@pytest.fixture(scope="module")
def docker() -> Docker:
    client, host = _docker_client(), _docker_host()
    if client is None or host is None:
        pytest.skip("no Docker engine: DOCKER_HOST unset and scripts/dockerd.sh is not running")
    engine = Docker(client, host)
    if not engine("version", "--format", "{{.Server.Version}}", check=False):
        pytest.skip(f"no Docker engine answers at {host}")
    return engine


def _image(docker: Docker, name: str) -> str:
    ref = IMAGES[name]
    if not docker.has(ref):
        pytest.skip(f"{ref} is not built (make images)")
    return ref


Run = Callable[..., str]


@pytest.fixture(scope="module")
def run(docker: Docker) -> Iterator[Run]:
    """Start a container read-only (plus docker run flags); removed with its volumes at the end."""
    started: list[str] = []
    volumes: list[str] = []

    def start(image: str, *args: str, flags: tuple[str, ...] = (), volume: str | None = None) -> str:
        mount: tuple[str, ...] = ()
        if volume is not None:
            name = f"echo-images-test-{uuid.uuid4().hex[:8]}"
            docker("volume", "create", name)
            volumes.append(name)
            mount = ("-v", f"{name}:{volume}")
        container = docker("run", "-d", "--read-only", "--tmpfs", "/tmp", *mount, *flags, image, *args)
        started.append(container)
        return container

    yield start
    for container in started:
        docker("rm", "-f", "-v", container, check=False)
    for volume in volumes:
        docker("volume", "rm", "-f", volume, check=False)


def _wait_http(url: str, timeout: float, docker: Docker, container: str) -> httpx.Response:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=3)
            if response.status_code == 200:
                return response
            last = f"{response.status_code} {response.text[:300]}"
        except httpx.HTTPError as error:
            last = repr(error)
        state = docker.inspect(container)["State"]
        if not state["Running"]:
            raise AssertionError(
                f"{container[:12]} exited ({state['ExitCode']}):\n{docker.logs(container)[-3000:]}"
            )
        time.sleep(0.5)
    raise AssertionError(f"{url}: {last} after {timeout} s\n{docker.logs(container)[-3000:]}")


def _wait_healthy(docker: Docker, container: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    status = "?"
    while time.monotonic() < deadline:
        status = docker.inspect(container)["State"].get("Health", {}).get("Status", "none")
        if status == "healthy":
            return
        time.sleep(0.5)
    raise AssertionError(f"{container[:12]}: health {status} after {timeout} s")


# Health checks every 2 s instead of 30, so that `healthy` comes within the test's time.
FAST_HEALTH = ("--health-interval=2s", "--health-timeout=5s")


@pytest.mark.parametrize("name", list(IMAGES))
def test_each_image_is_tagged_non_root_labelled_and_checks_its_health(docker: Docker, name: str) -> None:
    config = docker.inspect(_image(docker, name))["Config"]
    user = config["User"].split(":")
    assert user[0].isdigit(), f"{name}: USER {config['User']} is not numeric"
    assert int(user[0]) != 0
    labels = config["Labels"] or {}
    assert labels["org.opencontainers.image.title"] == name
    assert labels["org.opencontainers.image.source"]
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    if name != "echo-pause":  # scratch + one static binary: nothing to check with
        assert labels["org.opencontainers.image.version"] == TAG
        assert config["Healthcheck"]["Test"][0] == "CMD"


@pytest.fixture(scope="module")
def postgres(docker: Docker, run: Run) -> str:
    container = run(
        _image(docker, "echo-postgres"),
        flags=(*FAST_HEALTH, "-e", "POSTGRES_PASSWORD=images-test", "-e", "POSTGRES_DB=tenant"),
        volume="/var/lib/postgresql/data",
    )
    _wait_healthy(docker, container)
    return container


def test_postgres_accepts_a_password_connection_from_the_network(docker: Docker, postgres: str) -> None:
    asyncpg = pytest.importorskip("asyncpg")
    address = docker.address(postgres)

    async def check() -> None:
        connection = await asyncpg.connect(
            host=address, port=5432, user="echo", password="images-test", database="tenant"
        )
        try:
            assert (await connection.fetchval("show server_version")).startswith("15.")
            assert await connection.fetchval("select current_database()") == "tenant"
        finally:
            await connection.close()
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(host=address, port=5432, user="echo", password="wrong", database="tenant")

    asyncio.run(check())
    assert docker("exec", postgres, "id", "-u") == "999"
    assert docker("exec", postgres, "sh", "-c", "touch /usr/x 2>&1 || true").endswith("Read-only file system")


@pytest.fixture(scope="module")
def embedding(docker: Docker, run: Run) -> tuple[str, str]:
    ref = _image(docker, "echo-embedding")
    model = docker.inspect(ref)["Config"]["Labels"]["dev.echo.embedding.model"]
    # The operator's command line (echo_operator/render/embedding.py): Infinity's own arguments, no command.
    container = run(ref, "v2", "--model-id", model, "--port", "7997", "--device", "cpu", flags=FAST_HEALTH)
    _wait_http(f"http://{docker.address(container)}:7997/health", 240, docker, container)
    return container, model


def test_embedding_serves_the_baked_model_offline(docker: Docker, embedding: tuple[str, str]) -> None:
    container, model = embedding
    base = f"http://{docker.address(container)}:7997"
    models = httpx.get(f"{base}/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [model]
    response = httpx.post(
        f"{base}/embeddings", json={"model": model, "input": ["hello world", "ECHO on a node"]}, timeout=60
    )
    assert response.status_code == 200, response.text
    vectors = [item["embedding"] for item in response.json()["data"]]
    assert len(vectors) == 2
    assert len(vectors[0]) == (384 if model == MINILM else 1024)
    _wait_healthy(docker, container)
    assert docker("exec", container, "id", "-u") == "10001"


def test_hooks_and_worker_serve_on_postgres_and_the_embedding_server(
    docker: Docker, run: Run, postgres: str, embedding: tuple[str, str]
) -> None:
    ref = _image(docker, "echo")
    embedder, model = embedding
    env = (
        "-e", f"ECHO_DATABASE_URL=postgresql://echo:images-test@{docker.address(postgres)}:5432/tenant",
        "-e", f"ECHO_EMBEDDING_URL=http://{docker.address(embedder)}:7997",
        "-e", f"ECHO_EMBEDDING_MODEL={model}",
        "-e", f"ECHO_EMBEDDING_DIMENSION={384 if model == MINILM else 1024}",
    )  # fmt: skip
    hooks = run(ref, flags=(*FAST_HEALTH, "-e", f"ECHO_API_KEY={API_KEY}", *env), volume="/var/lib/echo")
    ready = _wait_http(f"http://{docker.address(hooks)}:9099/readyz", 90, docker, hooks).json()
    assert ready["checks"]["store"]["ok"]
    assert ready["checks"]["embedder"]["ok"]
    worker = run(ref, "worker", flags=(*FAST_HEALTH, *env))
    metrics = _wait_http(f"http://{docker.address(worker)}:9101/metrics", 90, docker, worker)
    assert "echo_" in metrics.text
    _wait_healthy(docker, hooks)
    _wait_healthy(docker, worker)  # the same HEALTHCHECK: /healthz, else the worker's /metrics


def test_standalone_serves_embedded_and_keeps_its_data(docker: Docker, run: Run) -> None:
    ref = _image(docker, "echo-standalone")
    volume = f"echo-images-test-{uuid.uuid4().hex[:8]}"
    docker("volume", "create", volume)
    try:
        flags = (
            *FAST_HEALTH,
            "--user",
            "10001",
            "-e",
            f"ECHO_API_KEY={API_KEY}",
            "-v",
            f"{volume}:/var/lib/echo",
        )
        first = run(ref, flags=flags)
        base = f"http://{docker.address(first)}:9099"
        ready = _wait_http(f"{base}/readyz", 110, docker, first).json()["checks"]
        assert ready["store"]["ok"]
        assert ready["vectors"]["ok"]
        assert ready["embedder"] == {"ok": True, "model": MINILM, "dimension": 384}
        assert ready["jobs"]["in_process"] is True
        assert httpx.get(f"{base}/models", timeout=10).status_code == 401
        auth = {"Authorization": f"Bearer {API_KEY}"}
        assert httpx.get(f"{base}/models", headers=auth, timeout=10).status_code == 200
        _wait_healthy(docker, first)
        assert "migration_applied" in docker.logs(first)
        assert docker("exec", first, "sh", "-c", "touch /opt/x 2>&1 || true").endswith(
            "Read-only file system"
        )
        assert set(docker("exec", first, "ls", "/var/lib/echo").split()) >= {"postgres", "qdrant"}

        # Outside addresses: the container has a route (docker0), but nothing leaves the machine.
        probe = (
            "import socket\n"
            "try:\n"
            "    socket.create_connection(('203.0.113.7', 443), timeout=5)\n"
            "    print('connected')\n"
            "except OSError as error:\n"
            "    print(type(error).__name__)\n"
        )
        assert docker("exec", first, "python", "-c", probe) != "connected"

        docker("stop", first)
        assert docker.inspect(first)["State"]["ExitCode"] == 0
        second = run(ref, flags=flags)
        _wait_http(f"http://{docker.address(second)}:9099/readyz", 110, docker, second)
        assert "migration_applied" not in docker.logs(second), "the data did not survive the container"
    finally:
        for container in docker("ps", "-aq", "--filter", f"volume={volume}").split():
            docker("rm", "-f", container, check=False)
        docker("volume", "rm", "-f", volume, check=False)


def test_the_operator_image_starts_on_a_read_only_root(docker: Docker) -> None:
    ref = _image(docker, "echo-operator")
    out = docker("run", "--rm", "--read-only", "--tmpfs", "/tmp", ref, "--version")
    assert out.startswith("echoctl, version ")
    assert docker("run", "--rm", "--read-only", "--entrypoint", "id", ref, "-u") == "10001"
