"""The distributed tenant (docs/examples/echo-cpu.yaml) as its example applies it: PostgreSQL, hooks,
distiller, embedding (MiniLM) and a managed Qdrant.

On the single-node tier no Qdrant image exists (no registry, no binary, no package): the tenant still
applies its Qdrant StatefulSet, and the operator must say so — `QdrantReady=False` with the kubelet's
own reason, `Ready=False` — while the hooks answer every filter (memory fails open, counted). A long
chat is summarised by the distiller pod (a `summary` job it ran against PostgreSQL), the summary
injected on the next inlet. On kind, where Qdrant's image is loaded, a fact is also recalled in a later chat.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import conversation
import httpx
import pytest
from conftest import PLATFORM, Tenant
from conversation import Hooks, Metrics, User
from kube import eventually

NAMESPACES = ["echo-test"]
KUBELET_IMAGE_REASONS = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull")
# No Qdrant on the single-node tier: the hooks are ready but degraded by their vector store.
DEGRADED_BY = ("vectors",) if PLATFORM == "node" else ()

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def hooks(distributed: Tenant) -> Iterator[Hooks]:
    forward = distributed.cluster.port_forward(
        distributed.namespace, f"service/{distributed.hooks_service}", 9099
    )
    with forward as url, Hooks(url, distributed.api_key) as client:
        client.wait_ready(within=300, degraded_by=DEGRADED_BY)
        yield client


def test_every_component_runs_as_a_pod(distributed: Tenant) -> None:
    cluster, namespace = distributed.cluster, distributed.namespace
    for component in ("hooks", "distiller", "embedding"):
        condition = distributed.cluster.wait_condition(
            namespace, f"echodeployment/{distributed.name}", f"{component.capitalize()}Ready", "True", 600
        )
        assert condition["status"] == "True"
    assert cluster.ready_pods(namespace, "app.kubernetes.io/name=postgres"), "the PostgreSQL is not Ready"


@pytest.mark.skipif(PLATFORM != "node", reason="kind loads the Qdrant image: Qdrant runs there")
def test_the_missing_qdrant_image_is_reported_with_the_kubelets_reason(distributed: Tenant) -> None:
    def reported() -> dict | None:
        condition = distributed.condition("QdrantReady")
        if (
            condition
            and condition["status"] == "False"
            and any(r in condition["message"] for r in KUBELET_IMAGE_REASONS)
        ):
            return condition
        return None

    condition = eventually("QdrantReady=False naming the image fault", reported, 300, every=2)
    ready = distributed.condition("Ready")
    assert ready is not None, "no Ready condition"
    assert ready["status"] == "False", ready
    assert "qdrant" in ready["message"].lower(), ready
    print(f"QdrantReady: {condition['reason']}: {condition['message']}")


def test_the_hooks_serve_every_filter(hooks: Hooks) -> None:
    conversation.check_service(hooks, degraded_by=DEGRADED_BY)
    chat = conversation.Chat(User.new("office"), conversation.OTHER_MODEL)
    before = hooks.metrics()
    turn = conversation.turn(hooks, chat, "What is on the agenda today?", answer="The budget review.")
    assert turn.sent["messages"][-1]["content"].endswith("What is on the agenda today?")
    conversation.masking(hooks, User.new("office-mask"))
    if PLATFORM == "node":  # no Qdrant: recall failed open, and says so in the metrics
        after = hooks.metrics()
        failed = sum(
            after.total("echo_memory_recalls_total", outcome=o)
            - before.total("echo_memory_recalls_total", outcome=o)
            for o in ("error", "timeout")
        )
        assert failed >= 1, "the memory recall without Qdrant was not counted"


def distiller_metrics(tenant: Tenant) -> Metrics:
    pods = tenant.cluster.ready_pods(
        tenant.namespace, f"app.kubernetes.io/instance={tenant.name},app.kubernetes.io/component=distiller"
    )
    with tenant.cluster.port_forward(tenant.namespace, f"pod/{pods[0]['metadata']['name']}", 9101) as url:
        return Metrics.parse(httpx.get(url + "/metrics", timeout=10).text)


def test_a_long_chat_is_summarised_by_the_distiller_pod(distributed: Tenant, hooks: Hooks) -> None:
    patch = conversation.spec_patch(conversation.quick_valves())
    distributed.cluster.kubectl(
        "-n", distributed.namespace, "patch", "echodeployment", distributed.name, "--type", "merge", "-p",
        json.dumps(patch),
    )  # fmt: skip
    service = conversation.check_service(hooks, degraded_by=DEGRADED_BY)
    assert not service.in_process_worker, "the hooks of a distributed tenant must leave jobs to the distiller"
    conversation.configure(hooks, conversation.quick_valves(), within=240)
    summarised = conversation.long_conversation(hooks, User.new("office-long"), within=300)
    assert re.search(r"\S", summarised.summary)
    created = distiller_metrics(distributed).total("echo_compression_summaries_total", outcome="created")
    assert created >= 1, "the summary was not written by the distiller pod"


@pytest.mark.skipif(PLATFORM == "node", reason="no Qdrant image on the single-node tier: no vector store")
def test_a_fact_is_recalled_in_a_later_chat(hooks: Hooks) -> None:
    conversation.memory_across_chats(hooks, User.new("office-memory"), User.new("office-other"), within=300)
