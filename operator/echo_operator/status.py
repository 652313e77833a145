"""Status of an EchoDeployment from its children's real state. Pure (the clock is an argument).

One condition per component (`HooksReady`, `DistillerReady`, `EmbeddingReady`, `QdrantReady`;
a standalone tenant has one, `StandaloneReady`) and a summary `Ready`; a condition keeps its
lastTransitionTime while its status is unchanged, and the conditions of the other mode go when a
tenant switches. An external embedding server or Qdrant counts as ready with reason `External`.
The Ready message names the fields the tenant's mode ignores (`modes.ignored`).

With `spec.openwebui.connect`, `OpenWebUIConnected` reports the connect Job (`render_openwebui`):
True once it completed, False when it failed (the reason from connect's exit code: something
missing in Open WebUI, a call that failed, or the Job's own reason) or when its pod cannot start
(the kubelet's reason, e.g. a missing Secret), Unknown while it runs. Ready does not include it: the
tenant serves whether or not Open WebUI has been connected for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo_operator.render import modes
from echo_operator.render import openwebui as render_openwebui
from echo_operator.render.tenant import Tenant

__all__ = [
    "BLOCKING_REASONS",
    "COMPONENT_CONDITIONS",
    "JOB_FAILED",
    "OPENWEBUI_CONDITION",
    "SETTLED_CONNECT_REASONS",
    "STANDALONE_CONDITIONS",
    "Connection",
    "Observation",
    "Workload",
    "build_status",
    "connection",
    "invalid_status",
    "keep_blocked_ready",
    "merge_conditions",
    "observe",
    "workloads",
]

COMPONENT_CONDITIONS = ("HooksReady", "DistillerReady", "EmbeddingReady", "QdrantReady")
STANDALONE_CONDITIONS = ("StandaloneReady",)
BLOCKING_REASONS = frozenset({"InvalidSpec", "ChildRejected"})
"""Reasons of a Ready=False that only a change of the spec can clear."""
OPENWEBUI_CONDITION = "OpenWebUIConnected"
EXIT_REASONS = {
    1: (
        "SomethingMissing",
        "connect ran, but something ECHO needs is missing in Open WebUI (native function calling, or "
        "Open WebUI cannot reach the ECHO URL)",
    ),
    2: ("UsageError", "echoctl refused its arguments (the image's echoctl may be older than the operator)"),
    3: ("OpenWebUICallFailed", "a call to Open WebUI failed (unreachable, or the admin key refused)"),
}
"""`echoctl openwebui connect`'s exit codes -> the condition's reason and what it means."""
JOB_FAILED = "JobFailed"
"""The reason of a failed connect Job whose exit code is unknown (its pods gone, or the deadline)."""
SETTLED_CONNECT_REASONS = frozenset({*(reason for reason, _ in EXIT_REASONS.values()), JOB_FAILED})
"""Reasons of an OpenWebUIConnected=False that stays until the Job is deleted or the spec changes."""


@dataclass(frozen=True)
class Workload:
    """The child whose readiness a condition reports (None for an external service)."""

    kind: str
    name: str


@dataclass(frozen=True)
class Observation:
    ready: bool
    reason: str
    message: str


def workloads(tenant: Tenant) -> dict[str, Workload | None]:
    """Condition type -> the Deployment/StatefulSet behind it, or None when external."""
    spec = tenant.spec
    if tenant.standalone:
        return {"StandaloneReady": Workload("StatefulSet", tenant.child("standalone"))}
    return {
        "HooksReady": Workload("Deployment", tenant.child("hooks")),
        "DistillerReady": Workload("Deployment", tenant.child("distiller")),
        "EmbeddingReady": None
        if spec.embedding.external_url
        else Workload("Deployment", tenant.child("embedding")),
        "QdrantReady": None
        if spec.qdrant.managed is None
        else Workload("StatefulSet", tenant.child("qdrant")),
    }


def pod_problem(pods: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The kubelet's own reason why a pod is not running, and its message: a container waiting
    (ErrImagePull, ImagePullBackOff, ErrImageNeverPull, CrashLoopBackOff, CreateContainerConfigError…),
    the last termination of a restarting one (OOMKilled, Error), or a pod the scheduler cannot place."""
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name", "?")
        status = pod.get("status") or {}
        containers = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        for container in containers:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
                last = ((container.get("lastState") or {}).get("terminated") or {}).get("reason")
                detail = waiting.get("message") or (f"last ended: {last}" if last else "")
                said = f"pod {name}: {waiting['reason']}"
                return waiting["reason"], f"{said}: {detail}" if detail else said
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                reason = condition.get("reason") or "Unschedulable"
                return reason, f"pod {name}: {reason}: {condition.get('message', '')}".rstrip(": ")
    return None


def observe(
    workload: Workload | None, obj: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]] = ()
) -> Observation:
    """Readiness of one child from its status (readyReplicas vs replicas, rollout caught up); when it is
    not ready, the kubelet's reason from its pods (`pod_problem`) is the condition's reason."""
    if workload is None:
        return Observation(True, "External", "an external service is configured")
    if obj is None:
        return Observation(False, "NotFound", f"{workload.kind} {workload.name} does not exist yet")
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    desired = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0)
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and observed is not None and observed < generation:
        return Observation(False, "Progressing", f"{workload.kind} {workload.name} is rolling out")
    if desired == 0:
        return Observation(True, "ScaledToZero", f"{workload.kind} {workload.name} has 0 replicas wanted")
    if ready >= desired:
        return Observation(True, "Available", f"{ready}/{desired} replicas ready")
    problem = pod_problem(pods)
    if problem is not None:
        return Observation(False, problem[0], f"{ready}/{desired} replicas ready; {problem[1]}")
    return Observation(False, "Unavailable", f"{ready}/{desired} replicas ready")


@dataclass(frozen=True)
class Connection:
    """The connect Job's outcome: connected True, False, or None (not known yet: Unknown)."""

    connected: bool | None
    reason: str
    message: str


def _true_condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _last_exit_code(pods: Sequence[Mapping[str, Any]]) -> int | None:
    """The exit code of the connect container that finished last."""
    ended = []
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or ():
            terminated = (container.get("state") or {}).get("terminated") or {}
            if container.get("name") == render_openwebui.CONTAINER and "exitCode" in terminated:
                ended.append((str(terminated.get("finishedAt") or ""), int(terminated["exitCode"])))
    return max(ended)[1] if ended else None


def connection(
    tenant: Tenant, name: str, job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]] = ()
) -> Connection:
    """`OpenWebUIConnected` from connect Job `name` (None: not there) and its pods."""
    if job is None:
        return Connection(None, "Pending", f"Job {name} does not exist yet")
    logs = f"kubectl -n {tenant.namespace} logs job/{name}"
    if _true_condition(job, "Complete") is not None:
        return Connection(True, "Connected", f"Job {name} installed ECHO in Open WebUI ({logs})")
    failed = _true_condition(job, "Failed")
    if failed is not None:
        code = _last_exit_code(pods)
        said = ": ".join(str(failed[k]) for k in ("reason", "message") if failed.get(k))
        known = EXIT_REASONS.get(-1 if code is None else code)
        reason, what = known or (JOB_FAILED, said or "the Job failed")
        rerun = f"delete the Job to run it again: kubectl -n {tenant.namespace} delete job {name}"
        return Connection(False, reason, f"Job {name}: {what}; {logs}; {rerun}")
    problem = pod_problem(pods)
    if problem is not None:
        return Connection(False, problem[0], f"Job {name}: {problem[1]}")
    retries = int((job.get("status") or {}).get("failed") or 0)
    tried = f" ({retries} failed attempt{'s' * (retries != 1)}, retrying; {logs})" if retries else ""
    return Connection(None, "Connecting", f"Job {name} is running{tried}")


def _condition(
    kind: str, ready: bool | None, reason: str, message: str, generation: int | None, now: str
) -> dict[str, Any]:
    status = "Unknown" if ready is None else "True" if ready else "False"
    out: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def merge_conditions(
    new: Sequence[dict[str, Any]], previous: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """The new conditions, each keeping its previous lastTransitionTime if its status is unchanged."""
    before = {c.get("type"): c for c in previous or ()}
    out = []
    for condition in new:
        old = before.get(condition["type"])
        if old is not None and old.get("status") == condition["status"] and old.get("lastTransitionTime"):
            condition = {**condition, "lastTransitionTime": old["lastTransitionTime"]}
        out.append(condition)
    return out


def build_status(
    tenant: Tenant,
    observations: Mapping[str, Observation],
    *,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] | None,
    now: str,
    connected: Connection | None = None,
) -> dict[str, Any]:
    """The status subresource: per-component conditions, the summary Ready, the hooks endpoint, and
    `OpenWebUIConnected` when the spec asks for connect (`connected`, not part of Ready)."""
    conditions = [
        _condition(kind, obs.ready, obs.reason, obs.message, generation, now)
        for kind, obs in ((kind, observations[kind]) for kind in workloads(tenant))
    ]
    waiting = [f"{c['type']} ({c['message']})" for c in conditions if c["status"] != "True"]
    ignored = modes.ignored(tenant.spec)
    note = f"; ignored in mode {tenant.spec.mode}: {', '.join(ignored)}" if ignored else ""
    if waiting:
        message = "not ready: " + "; ".join(waiting) + note
        ready = _condition("Ready", False, "ComponentsNotReady", message, generation, now)
    else:
        message = "every component is ready" + note
        ready = _condition("Ready", True, "AllComponentsReady", message, generation, now)
    if connected is not None:
        conditions.append(
            _condition(
                OPENWEBUI_CONDITION,
                connected.connected,
                connected.reason,
                connected.message,
                generation,
                now,
            )
        )
    return {
        "observedGeneration": generation,
        "hooksEndpoint": tenant.hooks_endpoint,
        "conditions": merge_conditions([ready, *conditions], previous),
    }


def invalid_status(
    message: str,
    *,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] | None,
    now: str,
    reason: str = "InvalidSpec",
) -> dict[str, Any]:
    """Ready=False with the reason (InvalidSpec, ChildRejected) and the message; component conditions
    are kept as they were."""
    ready = _condition("Ready", False, reason, message, generation, now)
    kept = [dict(c) for c in previous or () if c.get("type") != "Ready"]
    return {"observedGeneration": generation, "conditions": merge_conditions([ready, *kept], previous)}


def keep_blocked_ready(new: dict[str, Any], previous: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """`new`, but a previous Ready=False with a blocking reason stays (a child's event cannot clear it)."""
    old = next((c for c in previous or () if c.get("type") == "Ready"), None)
    if old is None or old.get("reason") not in BLOCKING_REASONS:
        return new
    conditions = [dict(old) if c["type"] == "Ready" else c for c in new["conditions"]]
    return {**new, "conditions": conditions}
