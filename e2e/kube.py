"""kubectl and helm against the cluster under test, with the waits the e2e suite needs.

The suite drives a cluster the way its user does — `helm install`, `kubectl apply` of the documented
examples, `kubectl port-forward` — so this wraps the real binaries (tools/bin, `make tools`), not a client
library. Every wait has a deadline and says what it waited for; `dump` saves what a failure needs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools" / "bin"
ARTIFACTS = ROOT / "e2e" / "artifacts"
T = TypeVar("T")


class Timeout(AssertionError):
    """A wait ran past its deadline."""


class KubectlError(AssertionError):
    """kubectl failed (a wait tries again until its deadline: the API server may be busy)."""


def eventually(what: str, probe: Callable[[], T | None], seconds: float, every: float = 1.0) -> T:
    """Call `probe` until it returns something true (not None, False or empty); fail with `what` after
    `seconds`."""
    deadline = time.monotonic() + seconds
    last_error: Exception | None = None
    while True:
        try:
            value = probe()
        except (subprocess.CalledProcessError, KubectlError, httpx.HTTPError, KeyError, IndexError) as error:
            value, last_error = None, error
        if value:  # None, False, an empty list: not yet
            return value
        if time.monotonic() > deadline:
            detail = getattr(last_error, "output", None) or getattr(last_error, "stderr", None) or ""
            raise Timeout(f"{what}: not within {seconds:.0f} s (last error: {last_error} {detail})")
        time.sleep(every)


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path
    platform: str  # "node" (scripts/cluster.sh) or "kind"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def run(self, tool: str, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 300):
        return subprocess.run(
            [str(TOOLS / tool), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            check=check,
            timeout=timeout,
        )

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 300) -> str:
        try:
            return self.run("kubectl", *args, stdin=stdin, check=check, timeout=timeout).stdout
        except subprocess.CalledProcessError as error:
            raise KubectlError(f"kubectl {' '.join(args)}: {error.stderr.strip()}") from error

    def helm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, check=False, timeout=timeout)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def exists(self, *args: str) -> bool:
        return self.run("kubectl", "get", *args, "-o", "name", check=False).returncode == 0

    def apply(self, manifest: str | Path, namespace: str | None = None) -> str:
        scope = ["-n", namespace] if namespace else []
        if isinstance(manifest, Path):
            return self.kubectl("apply", *scope, "-f", str(manifest))
        return self.kubectl("apply", *scope, "-f", "-", stdin=manifest)

    def condition(self, obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
        for condition in obj.get("status", {}).get("conditions", []) or []:
            if condition.get("type") == kind:
                return condition
        return None

    def wait_condition(self, namespace: str, resource: str, kind: str, status: str, seconds: float) -> dict:
        def probe() -> dict | None:
            condition = self.condition(self.get("-n", namespace, resource), kind)
            return condition if condition and condition.get("status") == status else None

        return eventually(f"{namespace}/{resource} {kind}={status}", probe, seconds, every=2)

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.get("-n", namespace, "pods", "-l", selector)["items"]

    def ready_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [
            pod
            for pod in self.pods(namespace, selector)
            if not pod["metadata"].get("deletionTimestamp")
            and (self.condition(pod, "Ready") or {}).get("status") == "True"
        ]

    def secret(self, namespace: str, name: str, key: str) -> str:
        data = self.get("-n", namespace, "secret", name)["data"][key]
        return base64.b64decode(data).decode()

    @contextlib.contextmanager
    def port_forward(self, namespace: str, target: str, port: int, seconds: float = 120) -> Iterator[str]:
        """`kubectl port-forward` on a free local port, kept up: when kubectl exits (its pod replaced,
        a rolling update) it is started again on the same port, as a user's `while true` loop would.
        Yields the base URL once a connection goes through."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            local = probe.getsockname()[1]
        command = [str(TOOLS / "kubectl"), "-n", namespace, "port-forward", target, f"{local}:{port}"]
        stopping = threading.Event()
        current: list[subprocess.Popen[bytes]] = []

        def keep_up() -> None:
            while not stopping.is_set():
                process = subprocess.Popen(
                    command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env
                )
                current[:] = [process]
                while process.poll() is None and not stopping.is_set():
                    time.sleep(0.2)
                stop(process)
                stopping.wait(1)

        keeper = threading.Thread(target=keep_up, name=f"port-forward-{target}", daemon=True)
        keeper.start()

        def connects() -> bool:
            with socket.socket() as client:
                client.settimeout(2)
                return client.connect_ex(("127.0.0.1", local)) == 0

        try:
            eventually(f"port-forward {namespace}/{target}", connects, seconds, every=0.5)
            yield f"http://127.0.0.1:{local}"
        finally:
            stopping.set()
            keeper.join(timeout=15)
            for process in current:
                stop(process)

    def dump(self, name: str, namespaces: list[str]) -> Path:
        """Objects, events, descriptions and logs of `namespaces` into e2e/artifacts/<name>/."""
        folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        folder.mkdir(parents=True, exist_ok=True)
        for namespace in namespaces:
            for what, args in (
                ("objects", ["get", "all,echodeployments,configmaps,pvc,events", "-o", "wide"]),
                ("echodeployments", ["get", "echodeployments", "-o", "yaml"]),
                ("describe-pods", ["describe", "pods"]),
            ):
                result = self.run("kubectl", "-n", namespace, *args, check=False)
                (folder / f"{namespace}-{what}.txt").write_text(result.stdout + result.stderr)
            listing = self.run("kubectl", "-n", namespace, "get", "pods", "-o", "name", check=False).stdout
            for pod in listing.split():
                result = self.run(
                    "kubectl", "-n", namespace, "logs", pod, "--all-containers", "--tail=300", check=False
                )
                log = folder / f"{namespace}-{pod.replace('/', '_')}.log"
                log.write_text(result.stdout + result.stderr)
        return folder


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
