"""What the handlers do with a tenant's children: apply, prune, observe (through `kube.Kube`)."""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import kopf

from echo_operator import apply, metrics, render, status
from echo_operator import spec as spec_module
from echo_operator.kube import ApiError, Kube
from echo_operator.render import config as render_config
from echo_operator.render import openwebui as render_openwebui
from echo_operator.render import tenant as tenant_module
from echo_operator.render.tenant import Tenant

__all__ = [
    "STATUS_ATTEMPTS",
    "ensure_api_key",
    "now",
    "observe_connection",
    "observe_tenant",
    "prune",
    "refresh_status",
    "sync",
]

Identity = tuple[str, str, str]
OWNER_API = "echo.dev/v1alpha1"
OWNER_KIND = "EchoDeployment"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def ensure_api_key(kube: Kube, tenant: Tenant, owner: Mapping[str, Any]) -> Identity:
    """Create the generated API key Secret once; an existing one is never rewritten."""
    name = tenant.generated_api_key_secret
    if await kube.get("v1", "Secret", tenant.namespace, name) is None:
        secret = render_config.api_key_secret(tenant, secrets.token_urlsafe(32))
        kopf.adopt(secret, owner=owner)  # type: ignore[arg-type]
        try:
            await kube.create(secret)
        except ApiError as error:
            if error.status != 409:
                raise
    return ("v1", "Secret", name)


def _owned_by(obj: Mapping[str, Any], name: str) -> bool:
    """Not owned by anything else: no ownerReferences, or one to EchoDeployment `name`."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return not refs or any(r.get("kind") == OWNER_KIND and r.get("name") == name for r in refs)


async def prune(
    kube: Kube, namespace: str, name: str, keep: Iterable[Identity], apis: Iterable[str]
) -> list[Identity]:
    """Delete the labelled children of `name` that are not in `keep`; return what went."""
    keep, apis = set(keep), set(apis)
    labels = {tenant_module.INSTANCE: name, tenant_module.MANAGED_BY: tenant_module.OPERATOR}
    deleted = []
    for newest, kind in apply.CHILD_KINDS:
        api_version = apply.served_version(newest, apis)
        if api_version is None:
            continue
        for obj in await kube.list(api_version, kind, namespace, labels):
            identity = (api_version, kind, obj["metadata"]["name"])
            if identity in keep or not _owned_by(obj, name):
                continue
            if await kube.delete(api_version, kind, namespace, identity[2]):
                metrics.PRUNED.labels(kind).inc()
                deleted.append(identity)
    return deleted


async def sync(
    kube: Kube,
    tenant: Tenant,
    owner: Mapping[str, Any],
    *,
    dashboards: Mapping[str, str],
    logger: Any,
) -> list[Identity]:
    """Apply every child the spec wants (adopted by `owner`), prune the rest; return the pruned."""
    cluster = await apply.cluster_of(kube)
    manifests = []
    for manifest in render.render_tenant(tenant, dashboards=dashboards):
        what = f"{manifest['kind']} {manifest['metadata']['name']}"
        adapted = apply.for_cluster(manifest, cluster)
        if adapted is None:
            logger.warning(f"{what} skipped: {manifest['apiVersion']} is not served by this cluster")
            continue
        if _loses_pvc_deletion(manifest, adapted):
            logger.warning(
                f"{what}: retainOnDelete false is not enforced: Kubernetes 1.{cluster.minor} has no PVC "
                f"retention policy (1.{apply.PVC_RETENTION_MINOR}+), its PVCs stay when the tenant goes"
            )
        for namespace in apply.unlabelled_namespaces(adapted, cluster):
            logger.warning(
                f"{what} selects namespace {namespace} by its {apply.NAMESPACE_NAME_LABEL} label, which "
                f"Kubernetes 1.{cluster.minor} does not set (1.{apply.NAMESPACE_NAME_LABEL_MINOR}+): "
                f"kubectl label namespace {namespace} {apply.NAMESPACE_NAME_LABEL}={namespace}"
            )
        manifests.append(adapted)
    keep = {render.identity(m) for m in manifests}
    if tenant.spec.hooks.api_key_secret_ref is None:
        keep.add(await ensure_api_key(kube, tenant, owner))
    kopf.adopt(manifests, owner=owner)  # type: ignore[arg-type]
    for manifest in manifests:
        try:
            await kube.apply(manifest)
        except ApiError as error:
            if error.status not in (400, 422):
                raise
            what = f"{manifest['kind']} {manifest['metadata']['name']}"
            raise apply.ChildRejected(f"{what} was refused: {error.message or error}") from error
    return await prune(kube, tenant.namespace, tenant.name, keep, cluster.apis)


def _loses_pvc_deletion(rendered: Mapping[str, Any], adapted: Mapping[str, Any]) -> bool:
    """Whether adapting a StatefulSet to an older server dropped a wish to delete its PVCs."""
    field = "persistentVolumeClaimRetentionPolicy"
    retention = (rendered.get("spec") or {}).get(field) or {}
    return retention.get("whenDeleted") == "Delete" and field not in (adapted.get("spec") or {})


async def observe_tenant(kube: Kube, tenant: Tenant) -> dict[str, status.Observation]:
    out = {}
    for condition, workload in status.workloads(tenant).items():
        obj = (
            None
            if workload is None
            else await kube.get("apps/v1", workload.kind, tenant.namespace, workload.name)
        )
        pods: list[dict[str, Any]] = []
        observed = status.observe(workload, obj)
        if obj is not None and not observed.ready and observed.reason == "Unavailable":
            selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if selector:
                pods = await kube.list("v1", "Pod", tenant.namespace, selector)
                observed = status.observe(workload, obj, pods)
        out[condition] = observed
    return out


async def observe_connection(kube: Kube, tenant: Tenant) -> status.Connection | None:
    """The connect Job's outcome (None when the spec asks for no connect); its pods are read too, for
    connect's exit code and for why one cannot start (a missing Secret, an image that does not pull)."""
    name = render_openwebui.job_name(tenant)
    if name is None:
        return None
    job = await kube.get("batch/v1", "Job", tenant.namespace, name)
    pods: list[dict[str, Any]] = []
    if job is not None:
        # job-name: the label the Job controller puts on its pods, on every Kubernetes version
        pods = await kube.list("v1", "Pod", tenant.namespace, {"job-name": name})
    return status.connection(tenant, name, job, pods)


STATUS_ATTEMPTS = 5
"""Reads and writes of one status refresh before a run of conflicts is left to the next event
(client-go's RetryOnConflict makes 5 too)."""


async def restore(
    kube: Kube, namespace: str, name: str, *, dashboards: Mapping[str, str], logger: Any
) -> bool:
    """A child was deleted by hand: apply its EchoDeployment's children again now, not at the next drift
    timer. Nothing when the EchoDeployment is gone or going, or its spec is invalid (its status says why)."""
    live = await _live_tenant(kube, namespace, name)
    if live is None:
        return False
    owner, tenant = live
    try:
        await sync(kube, tenant, owner, dashboards=dashboards, logger=logger)
    except ApiError as error:  # the namespace going away, the spec changing meanwhile: the timer's turn
        logger.warning(f"could not restore the children of {namespace}/{name}: {error}")
        return False
    return True


async def refresh_status(kube: Kube, namespace: str, name: str, *, attempts: int = STATUS_ATTEMPTS) -> bool:
    """Recompute an EchoDeployment's status from its children; patch it if it changed.

    The patch carries the resourceVersion of the read it was computed from: a write from a stale
    read (the spec turned invalid and the reconcile handler wrote InvalidSpec meanwhile, and kopf
    never retries that) is a 409 instead of a lost update, and is recomputed from a fresh read.
    The last attempt's 409 is raised.
    """
    for _ in range(attempts - 1):
        try:
            return await _refresh_once(kube, namespace, name)
        except ApiError as error:
            if error.status != 409:
                raise
    return await _refresh_once(kube, namespace, name)


async def _live_tenant(kube: Kube, namespace: str, name: str) -> tuple[dict[str, Any], Tenant] | None:
    """The EchoDeployment and its parsed tenant; None when it is gone or going, or its spec is invalid
    (the reconcile handler has said why in its status)."""
    owner = await kube.get(OWNER_API, OWNER_KIND, namespace, name)
    if owner is None or (owner.get("metadata") or {}).get("deletionTimestamp"):
        return None
    try:
        return owner, Tenant(name, namespace, spec_module.parse_spec(name, owner.get("spec") or {}))
    except spec_module.InvalidSpec:
        return None


async def _refresh_once(kube: Kube, namespace: str, name: str) -> bool:
    live = await _live_tenant(kube, namespace, name)
    if live is None:
        return False
    owner, tenant = live
    old: dict[str, Any] = owner.get("status") or {}
    previous = _conditions(old)
    new = status.build_status(
        tenant,
        await observe_tenant(kube, tenant),
        generation=old.get("observedGeneration"),
        previous=previous,
        now=now(),
        connected=await observe_connection(kube, tenant),
    )
    new = status.keep_blocked_ready(new, previous)
    if all(old.get(key) == value for key, value in new.items()):
        return False
    version = owner["metadata"].get("resourceVersion")
    await kube.patch_status(OWNER_API, OWNER_KIND, namespace, name, new, resource_version=version)
    return True


def _conditions(status_body: Mapping[str, Any]) -> Sequence[Mapping[str, Any]] | None:
    conditions = status_body.get("conditions")
    return conditions if isinstance(conditions, list) else None
