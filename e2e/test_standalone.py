"""A standalone tenant (docs/examples/echo-standalone.yaml, `mode: standalone`) serves a whole conversation.

One pod runs `echoctl serve` in embedded mode on a PersistentVolume. After the example is applied as it
is, the test gives it what a test needs and a user would set the same way: the quick valves (a summary
within a dozen turns), an admin key, and Open WebUI's files API (a fake file server on the host's bridge
address, which pods reach; Open WebUI sends a filter only file references). Then, through a
port-forward of the hooks Service with the generated key: summary, memory distilled and recalled in a
later chat, `search_session_context` on a large file, masking; the pod is deleted and the data is there.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import conversation
import pytest
from conftest import PLATFORM, Tenant
from conversation import Hooks, User
from fakes.openwebui_files import OWUI_FILES_KEY, FakeFiles, fake_files
from kube import eventually

NAMESPACES = ["echo-home"]
ADMIN_KEY = secrets.token_hex(16)
# Where pods reach the host: the bridge of the single-node tier.
HOST_ADDRESS = "172.17.0.1"
STATE: dict[str, object] = {}

pytestmark = pytest.mark.timeout(900)


def selector(tenant: Tenant) -> str:
    return f"app.kubernetes.io/instance={tenant.name},app.kubernetes.io/component=standalone"


@pytest.fixture(scope="module")
def files() -> Iterator[FakeFiles]:
    if PLATFORM != "node":
        pytest.skip("the fake file server listens on the single-node tier's bridge")
    with fake_files(host=HOST_ADDRESS) as served:
        yield served


@pytest.fixture(scope="module")
def configured(standalone: Tenant, files: FakeFiles) -> Tenant:
    cluster, namespace = standalone.cluster, standalone.namespace
    for name, value in (("e2e-admin-key", ADMIN_KEY), ("e2e-openwebui-key", OWUI_FILES_KEY)):
        cluster.kubectl(
            "-n", namespace, "create", "secret", "generic", name, f"--from-literal=api-key={value}"
        )
    spec = conversation.spec_patch(conversation.quick_valves())["spec"]
    spec["hooks"] = {"adminKeySecretRef": {"name": "e2e-admin-key", "key": "api-key"}}
    spec["openwebui"] = {"url": files.url, "apiKeySecretRef": {"name": "e2e-openwebui-key", "key": "api-key"}}
    cluster.kubectl(
        "-n", namespace, "patch", "echodeployment", standalone.name, "--type", "merge", "-p",
        json.dumps({"spec": spec}),
    )  # fmt: skip
    generation = standalone.resource()["metadata"]["generation"]
    eventually(
        "the patched standalone tenant Ready again",
        lambda: (
            (standalone.resource().get("status", {}).get("observedGeneration") == generation)
            and (standalone.condition("Ready") or {}).get("status") == "True"
        ),
        600,
        every=2,
    )
    # The new settings are in the pod's environment: wait for the pod the StatefulSet rolled to them
    # (Ready=True above may still be the old pod's), or a port-forward would reach a pod about to go.
    statefulset = f"statefulset/{standalone.name}-standalone"

    def rolled() -> bool:
        status = cluster.get("-n", namespace, statefulset)["status"]
        pods = cluster.ready_pods(namespace, selector(standalone))
        return (
            status.get("updateRevision") == status.get("currentRevision")
            and status.get("readyReplicas") == 1
            and len(pods) == 1
            and pods[0]["metadata"]["labels"].get("controller-revision-hash") == status.get("updateRevision")
        )

    eventually("the standalone pod rolled to the patched spec", rolled, 600, every=2)
    return standalone


@pytest.fixture
def hooks(configured: Tenant) -> Iterator[Hooks]:
    with (
        configured.cluster.port_forward(
            configured.namespace, f"service/{configured.hooks_service}", 9099
        ) as url,
        Hooks(url, configured.api_key, ADMIN_KEY) as client,
    ):
        client.wait_ready(within=300)
        yield client


def test_one_pod_serves_everything(configured: Tenant) -> None:
    cluster, namespace = configured.cluster, configured.namespace
    kinds = cluster.kubectl("-n", namespace, "get", "deployments,statefulsets", "-o", "name").split()
    assert kinds == [f"statefulset.apps/{configured.name}-standalone"], kinds
    claims = cluster.get("-n", namespace, "pvc")["items"]
    assert [claim["status"]["phase"] for claim in claims] == ["Bound"], claims


def test_the_service_answers(hooks: Hooks) -> None:
    service = conversation.check_service(hooks)
    assert service.in_process_worker, "a standalone pod runs its jobs in process"
    conversation.configure(hooks, conversation.quick_valves(), within=180)


def test_a_long_chat_is_summarised(hooks: Hooks) -> None:
    summarised = conversation.long_conversation(hooks, User.new("home-long"), within=240)
    assert summarised.summaries_created


def test_a_fact_is_recalled_in_a_later_chat(hooks: Hooks) -> None:
    user = User.new("home-memory")
    STATE["memory_user"] = user
    conversation.memory_across_chats(hooks, user, User.new("home-other"), within=240)


def test_a_large_file_is_searched(hooks: Hooks, files: FakeFiles) -> None:
    conversation.large_attachment(hooks, User.new("home-file"), files, within=300)


def test_a_leaked_key_is_masked(hooks: Hooks) -> None:
    conversation.masking(hooks, User.new("home-mask"))


def test_the_data_survives_the_pod(configured: Tenant) -> None:
    user = STATE.get("memory_user")
    if not isinstance(user, User):
        pytest.skip("the memory test did not run")
    cluster, namespace = configured.cluster, configured.namespace
    old = cluster.ready_pods(namespace, selector(configured))[0]["metadata"]["uid"]
    cluster.kubectl("-n", namespace, "delete", "pod", f"{configured.name}-standalone-0", "--wait=true")
    eventually(
        "the standalone pod back and Ready",
        lambda: [
            p for p in cluster.ready_pods(namespace, selector(configured)) if p["metadata"]["uid"] != old
        ],
        600,
        every=2,
    )
    forward = cluster.port_forward(namespace, f"service/{configured.hooks_service}", 9099)
    with forward as url, Hooks(url, configured.api_key, ADMIN_KEY) as client:
        client.wait_ready(within=300)
        assert client.memories(user.id)["total"] >= 1, "the memories did not survive the pod"
