"""The cluster itself: the network guard holds, Services and cluster DNS work from pods.

On the single-node tier (E2E_PLATFORM=node) the guard is scripts/netguard.sh; on kind these tests check
only what kind provides (Services and DNS).
"""

from __future__ import annotations

import json
import socket
import subprocess
import textwrap
import time

import pytest
from conftest import PLATFORM, image
from kube import ROOT, Cluster, eventually

NAMESPACES = ["echo-node-check"]
NAMESPACE = NAMESPACES[0]
UNUSED_CLUSTER_IP = "10.0.0.250"
OUTSIDE_ADDRESS = "203.0.113.10"  # TEST-NET-3: documentation only, never routed

pytestmark = pytest.mark.timeout(300)
node_only = pytest.mark.skipif(PLATFORM != "node", reason="the guard belongs to the single-node tier")


def run_in_pod(cluster: Cluster, name: str, program: str, seconds: float = 90) -> dict:
    """Run a Python program in a pod of the echo image; return the JSON it prints last."""
    cluster.kubectl("-n", NAMESPACE, "delete", "pod", name, "--ignore-not-found", "--wait=true")
    cluster.kubectl(
        "-n", NAMESPACE, "run", name, f"--image={image('echo')}", "--image-pull-policy=Never",
        "--restart=Never", "--command", "--", "python", "-c", textwrap.dedent(program),
    )  # fmt: skip

    def finished() -> str | None:
        phase = cluster.get("-n", NAMESPACE, "pod", name)["status"].get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = eventually(f"pod {name} finished", finished, seconds)
    logs = cluster.kubectl("-n", NAMESPACE, "logs", name)
    assert phase == "Succeeded", logs
    return json.loads(logs.strip().splitlines()[-1])


def connect_program(address: str) -> str:
    """A pod's program: connect to address:80 and print how it ended (refused, connected, an error)."""
    return f"""
import json, socket, time
started = time.monotonic()
try:
    socket.create_connection(("{address}", 80), timeout=5).close()
    outcome = "connected"
except ConnectionRefusedError:
    outcome = "refused"
except OSError as error:
    outcome = type(error).__name__
print(json.dumps({{"outcome": outcome, "seconds": time.monotonic() - started}}))
"""


@pytest.fixture(scope="module", autouse=True)
def namespace(cluster: Cluster) -> str:
    cluster.kubectl("create", "namespace", NAMESPACE)
    yield NAMESPACE
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")


@node_only
def test_the_guard_rejects_an_unused_cluster_ip_from_the_host() -> None:
    probe = subprocess.run([ROOT / "scripts" / "netguard.sh", "probe"], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert probe.stdout.startswith("rejected:"), probe.stdout


def guard_rejections() -> int:
    listing = ["iptables", "-w", "-L", "ECHO-GUARD", "-n", "-v", "-x"]
    rules = subprocess.run(listing, capture_output=True, text=True, check=True)
    return sum(int(line.split()[0]) for line in rules.stdout.splitlines() if "REJECT" in line)


@node_only
def test_the_guard_rejects_an_unused_cluster_ip_from_a_pod(cluster: Cluster) -> None:
    before = guard_rejections()
    outcome = run_in_pod(
        cluster,
        "guard-probe",
        connect_program(UNUSED_CLUSTER_IP),
    )
    assert outcome["outcome"] == "refused", outcome  # rejected here, not timed out somewhere outside
    assert outcome["seconds"] < 1, outcome
    assert guard_rejections() > before  # and it was the guard that rejected it


def test_a_pod_reaches_a_service_by_its_dns_names(cluster: Cluster) -> None:
    cluster.apply(
        f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: {image("echo")}
          imagePullPolicy: Never
          command: ["python", "-m", "http.server", "8080", "--directory", "/opt/echo"]
          ports: [{{containerPort: 8080}}]
          readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080}}]
""",
        NAMESPACE,
    )
    cluster.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/web", "--timeout=120s")
    outcome = run_in_pod(
        cluster,
        "dns-probe",
        f"""
        import json, socket, time, urllib.request
        names = ["web", "web.{NAMESPACE}", "web.{NAMESPACE}.svc.cluster.local", "kubernetes.default.svc"]
        seen = {{}}
        for name in names:
            address = socket.gethostbyname(name)
            status = 0
            for attempt in range(40):  # the endpoints and kube-proxy's rules follow the rollout by a moment
                if not name.startswith("web"):
                    break
                try:
                    status = urllib.request.urlopen(f"http://{{name}}/", timeout=5).status
                    break
                except OSError:
                    time.sleep(0.5)
            seen[name] = [address, status]
        print(json.dumps(seen))
        """,
    )
    service_ip = cluster.get("-n", NAMESPACE, "service", "web")["spec"]["clusterIP"]
    for name in ("web", f"web.{NAMESPACE}", f"web.{NAMESPACE}.svc.cluster.local"):
        assert outcome[name] == [service_ip, 200], outcome
    assert outcome["kubernetes.default.svc"][0] == "10.0.0.1", outcome


@node_only
def test_a_service_whose_endpoints_lie_outside_is_refused_here(cluster: Cluster) -> None:
    """A Service backed by an Endpoints object naming an outside address (TEST-NET-3): kube-proxy rewrites
    the ClusterIP to it, and the guard refuses the rewritten packet before it leaves — from the host
    (OUTPUT) and from a pod (FORWARD)."""
    cluster.apply(
        f"""
apiVersion: v1
kind: Service
metadata: {{name: outside}}
spec:
  ports: [{{port: 80, targetPort: 80}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: outside}}
subsets: [{{addresses: [{{ip: {OUTSIDE_ADDRESS}}}], ports: [{{port: 80}}]}}]
""",
        NAMESPACE,
    )
    service_ip = cluster.get("-n", NAMESPACE, "service", "outside")["spec"]["clusterIP"]

    def refused_from_the_host() -> str | None:
        started = time.monotonic()
        try:
            socket.create_connection((service_ip, 80), timeout=3).close()
        except ConnectionRefusedError:
            return f"refused in {time.monotonic() - started:.3f} s"
        except OSError:
            return None  # kube-proxy has not written the rule yet (the guard rejects the bare ClusterIP too)
        raise AssertionError("connected to an outside address")

    before = guard_rejections()
    eventually("the host refused locally", refused_from_the_host, 60)
    assert guard_rejections() > before
    outcome = run_in_pod(
        cluster,
        "outside-probe",
        connect_program(service_ip),
    )
    assert outcome["outcome"] == "refused", outcome
