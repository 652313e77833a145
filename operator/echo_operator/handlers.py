"""The kopf handlers, thin: validate, render, apply, prune, write status.

`build_registry()` returns a fresh kopf registry holding them (nothing registers at import), so
the CLI and the tests each run their own. The memo carries `config` (settings.OperatorConfig,
given by the caller) and `kube` (kube.Kube, the operator's one API client, connected in on.startup).
"""

from __future__ import annotations

from typing import Any

import kopf

from echo_operator import apply, children, crd, metrics, status
from echo_operator import settings as settings_module
from echo_operator import spec as spec_module
from echo_operator import status as status_module  # `status` is also kopf's keyword argument
from echo_operator.kube import Kube
from echo_operator.render import modes
from echo_operator.render import tenant as tenant_module
from echo_operator.render.tenant import Tenant

__all__ = ["build_registry"]


async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: Any, **_: Any) -> None:
    config: settings_module.OperatorConfig = memo.config
    settings_module.configure(settings, config)
    memo.kube = await Kube.connect(config.kubeconfig, request_timeout=config.request_timeout)
    logger.info(f"echo-operator ready: finalizer {config.finalizer}, storage prefix {config.storage_prefix}")


async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    kube = memo.get("kube")
    if kube is not None:
        await kube.close()


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod the service account, else $KUBECONFIG or ~/.kube/config (read at login time)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


async def liveness(memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    """Reported at the --liveness endpoint; kopf answers it only while its loop is alive."""
    return {"kube": "connected" if memo.get("kube") is not None else "starting"}


async def reconcile(
    name: str,
    namespace: str,
    spec: Any,
    body: kopf.Body,
    meta: Any,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: Any,
    **_: Any,
) -> None:
    """Create, update and resume: make the children what the spec says, then report status."""
    with metrics.observe("reconcile"):
        generation = meta.get("generation")
        previous = (body.get("status") or {}).get("conditions")
        try:
            tenant = Tenant(name, namespace, spec_module.parse_spec(name, dict(spec)))
        except spec_module.InvalidSpec as error:
            invalid = status.invalid_status(
                str(error), generation=generation, previous=previous, now=children.now()
            )
            patch.status.update(invalid)
            raise kopf.PermanentError(f"invalid spec: {error}") from error
        ignored = modes.ignored(tenant.spec)
        if ignored:  # a warning Event on the EchoDeployment; the Ready message says it too
            logger.warning(f"ignored in mode {tenant.spec.mode}: {', '.join(ignored)}")
        kube: Kube = memo.kube
        try:
            pruned = await children.sync(kube, tenant, body, dashboards=memo.config.dashboards, logger=logger)
        except apply.ChildRejected as error:
            refused = status.invalid_status(
                str(error),
                generation=generation,
                previous=previous,
                now=children.now(),
                reason="ChildRejected",
            )
            patch.status.update(refused)
            raise kopf.PermanentError(str(error)) from error
        if pruned:
            logger.info("pruned " + ", ".join(f"{kind} {child}" for _, kind, child in pruned))
        observations = await children.observe_tenant(kube, tenant)
        connected = await children.observe_connection(kube, tenant)
        patch.status.update(
            status.build_status(
                tenant,
                observations,
                generation=generation,
                previous=previous,
                now=children.now(),
                connected=connected,
            )
        )


async def repair(name: str, spec: Any, **kwargs: Any) -> None:
    """The drift timer: apply the children again (one deleted or edited by hand comes back). A spec
    that is invalid has nothing to repair: its status already says why, once."""
    try:
        spec_module.parse_spec(name, dict(spec))
    except spec_module.InvalidSpec:
        return
    await reconcile(name=name, spec=spec, **kwargs)


async def delete(name: str, namespace: str, memo: kopf.Memo, logger: Any, **_: Any) -> None:
    """Delete every labelled child now (garbage collection would too, later); PVCs follow retainOnDelete."""
    with metrics.observe("delete"):
        kube: Kube = memo.kube
        gone = await children.prune(kube, namespace, name, (), (await apply.cluster_of(kube)).apis)
        logger.info(f"deleted {len(gone)} children")


async def child_event(
    namespace: str, labels: Any, memo: kopf.Memo, logger: Any, type: str | None = None, **_: Any
) -> None:
    """A Deployment, StatefulSet or Job of ours changed: refresh its EchoDeployment's conditions; one
    deleted by hand is applied again at once (the drift timer would take up to its interval), so
    deleting the connect Job runs connect again."""
    kube = memo.get("kube")
    if kube is None:
        return
    name = labels[tenant_module.INSTANCE]
    if type == "DELETED":
        with metrics.observe("repair"):
            await children.restore(kube, namespace, name, dashboards=memo.config.dashboards, logger=logger)
    with metrics.observe("status"):
        await children.refresh_status(kube, namespace, name)


def not_ready(status: Any, **_: Any) -> bool:
    """A tenant whose Ready is not True, or whose connect Job has not settled: its pods may change (an
    image pull failing, a crash loop, a Secret created at last) without any event on the
    Deployments, StatefulSets and Jobs the operator watches."""
    conditions = {c.get("type"): c for c in (status or {}).get("conditions") or []}
    if (conditions.get("Ready") or {}).get("status") != "True":
        return True
    connect = conditions.get(status_module.OPENWEBUI_CONDITION)
    return connect is not None and not (
        connect.get("status") == "True" or connect.get("reason") in status_module.SETTLED_CONNECT_REASONS
    )


async def refresh(name: str, namespace: str, memo: kopf.Memo, **_: Any) -> None:
    """The status timer of a tenant not ready: its conditions again, with the kubelet's reasons."""
    kube = memo.get("kube")
    if kube is None:
        return
    with metrics.observe("status"):
        await children.refresh_status(kube, namespace, name)


STATUS_SECONDS = 20.0
"""How often the conditions of a tenant that is not ready are read again from its children and pods."""


def build_registry(*, drift_seconds: float = 300.0) -> kopf.OperatorRegistry:
    """A registry with every handler of the operator; `drift_seconds`: the drift timer's interval
    (`OperatorConfig.drift_seconds`)."""
    registry = kopf.OperatorRegistry()
    resource = (crd.GROUP, crd.VERSION, crd.PLURAL)
    kopf.on.startup(registry=registry)(startup)
    kopf.on.cleanup(registry=registry)(cleanup)
    kopf.on.login(registry=registry)(login)
    kopf.on.probe(id="operator", registry=registry)(liveness)
    # kopf's callback protocols list every keyword it may pass; ours take the few they use + **_.
    for decorator in (kopf.on.resume, kopf.on.create, kopf.on.update):
        decorator(*resource, id="reconcile", registry=registry)(reconcile)  # type: ignore[arg-type]
    kopf.on.delete(*resource, id="delete", registry=registry)(delete)  # type: ignore[arg-type]
    # Not while the resource changes (idle): create/update already apply it then.
    drift = kopf.timer(
        *resource, id="drift", interval=drift_seconds, idle=drift_seconds / 2, registry=registry
    )
    drift(repair)
    kopf.timer(*resource, id="status", interval=STATUS_SECONDS, when=not_ready, registry=registry)(refresh)  # type: ignore[arg-type]
    owned: dict[str, Any] = {
        tenant_module.MANAGED_BY: tenant_module.OPERATOR,
        tenant_module.INSTANCE: kopf.PRESENT,
    }
    for group, plural in (("apps", "deployments"), ("apps", "statefulsets"), ("batch", "jobs")):
        kopf.on.event(group, "v1", plural, id=f"{plural}-status", labels=owned, registry=registry)(
            child_event  # type: ignore[arg-type]
        )
    return registry
