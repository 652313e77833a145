"""`echoctl operator` as a process: flags, liveness endpoint, metrics, SIGTERM; against the emulator."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import kmock
import pytest
import yaml
from click.testing import CliRunner
from fakes.kube_emulator import KubeEmulator

from echo.entrypoints.cli import main

pytestmark = pytest.mark.timeout(60)


def test_operator_needs_a_namespace_choice() -> None:
    result = CliRunner().invoke(main, ["operator"])
    assert result.exit_code == 2
    assert "--namespace" in result.output
    result = CliRunner().invoke(main, ["operator", "-n", "a", "--all-namespaces"])
    assert result.exit_code == 2


def test_operator_refuses_broken_dashboards(tmp_path: Path) -> None:
    (tmp_path / "queue.json").write_text("{not json")
    result = CliRunner().invoke(main, ["operator", "-A", "--dashboards-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "queue.json is not JSON" in result.output


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def emulator() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator() as kube, kmock.Server(kube):
        yield kube


async def poll(client: httpx.AsyncClient, url: str, within: float = 20.0) -> httpx.Response:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            response = await client.get(url)
            if response.status_code == 200:
                return response
        except httpx.TransportError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{url} never answered 200")
        await asyncio.sleep(0.1)


async def test_operator_process_serves_liveness_and_metrics(emulator: KubeEmulator, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    cluster = {"name": "e", "cluster": {"server": str(emulator.url).rstrip("/")}}
    context = {"name": "c", "context": {"cluster": "e", "user": "u"}}
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "clusters": [cluster],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [context],
                "current-context": "c",
            }
        )
    )
    liveness, metrics_port = free_port(), free_port()
    echoctl = shutil.which("echoctl", path=str(Path(sys.executable).parent)) or "echoctl"
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"} | {
        "KUBECONFIG": str(kubeconfig)
    }
    process = await asyncio.create_subprocess_exec(
        echoctl,
        "operator",
        "--all-namespaces",
        f"--liveness=http://127.0.0.1:{liveness}/healthz",
        f"--metrics-port={metrics_port}",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        body = {
            "apiVersion": "echo.dev/v1alpha1",
            "kind": "EchoDeployment",
            "metadata": {"name": "acme"},
            "spec": {"database": {"dsnSecretRef": {"name": "db"}}, "llm": {"provider": "offline"}},
        }
        assert (
            await emulator.post("/apis/echo.dev/v1alpha1/namespaces/t/echodeployments", json=body)
        ).status == 201
        async with httpx.AsyncClient(timeout=2) as client:
            probe = await poll(client, f"http://127.0.0.1:{liveness}/healthz")
            assert probe.json()["operator"] == {"kube": "connected"}
            deadline = asyncio.get_running_loop().time() + 20
            while "acme-hooks" not in emulator.names("apps/v1/deployments", "t"):
                assert asyncio.get_running_loop().time() < deadline, "no children rendered"
                await asyncio.sleep(0.1)
            text = ""
            while 'echo_operator_reconciles_total{handler="reconcile",result="success"} 1.0' not in text:
                assert asyncio.get_running_loop().time() < deadline, text
                text = (await poll(client, f"http://127.0.0.1:{metrics_port}/metrics")).text
                await asyncio.sleep(0.1)
            assert "echo_operator_reconcile_seconds_bucket" in text
            assert "echo_operator_errors_total" in text
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=20)
    assert process.returncode == 0, stderr.decode()[-2000:]
