"""The Job that installs ECHO in Open WebUI (`spec.openwebui.connect`): `echoctl openwebui connect`. Pure.

The Job runs in the image that serves the tenant's hooks, with the admin key of
`openwebui.connect.adminKeySecretRef` and the tenant's own ECHO key (`Tenant.api_key_ref`) as
`secretKeyRef` env (never in the spec, the args or a log; connect prints no key). Its name is
`<name>-openwebui-<digest>`, the digest of its whole spec: a change of what it connects with (URLs,
Secret references, image, timeout) is a new Job, which runs connect again, and the pruning of
children removes the old one; an unchanged spec keeps the finished Job, so connect does not run
again. A Job's pod template cannot change in place, which the digest makes moot.

No `ttlSecondsAfterFinished`: the Job, kept until it is superseded or its tenant goes, is the record
that this spec was connected; one deleted by a TTL would be applied again by the drift timer and
run connect every few minutes. Deleting it by hand runs connect again (the operator recreates it).

Exit 1 of connect (something ECHO needs is missing in Open WebUI: a setting only its admin changes)
and 2 (a usage error) fail the Job at once (`podFailurePolicy`, Kubernetes 1.26+; older servers get
the Job without it and retry those too); exit 3 (a call failed: Open WebUI starting, unreachable) is
retried with the Job's backoff.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from echo_operator.render import pods
from echo_operator.render.tenant import Tenant

__all__ = [
    "BACKOFF_LIMIT",
    "COMPONENT",
    "CONTAINER",
    "DEADLINE_SECONDS",
    "DEFINITIVE_EXIT_CODES",
    "connect_job",
    "job_name",
    "render_openwebui",
]

Manifest = dict[str, Any]
COMPONENT = "openwebui-connect"
CONTAINER = "connect"
BACKOFF_LIMIT = 3
"""Retries of a failed call (exit 3) before the Job fails: 10 s, 20 s, 40 s apart (the Job's backoff)."""
DEADLINE_SECONDS = 600
"""The whole Job, retries included."""
DEFINITIVE_EXIT_CODES = (1, 2)
"""connect's exits that a retry cannot change: something missing in Open WebUI, a usage error."""
DIGEST_LENGTH = 10
RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}


def _image(tenant: Tenant) -> str:
    """The image that serves the tenant's hooks (it ships echoctl and the Function's source)."""
    if tenant.standalone:
        return tenant.image(tenant.spec.standalone.image, "standalone")
    return tenant.image(tenant.spec.hooks.image, "echo")


def echo_url(tenant: Tenant) -> str:
    """ECHO's URL as Open WebUI reaches it: `connect.echoUrl`, else the hooks Service's DNS name."""
    owui = tenant.spec.openwebui
    given = owui.connect.echo_url if owui is not None and owui.connect is not None else None
    return (given or tenant.hooks_endpoint).rstrip("/")


def _job_spec(tenant: Tenant) -> Manifest | None:
    owui = tenant.spec.openwebui
    if owui is None or owui.connect is None or owui.url is None:
        return None
    admin = owui.connect.admin_key_secret_ref
    echo_key = tenant.api_key_ref
    container = {
        "name": CONTAINER,
        "image": _image(tenant),
        "command": ["echoctl"],
        "args": ["openwebui", "connect", "--timeout", str(owui.connect.timeout_seconds)],
        "env": [
            pods.env("ECHO_OPENWEBUI_URL", owui.url),
            pods.secret_env("ECHO_OPENWEBUI_API_KEY", admin.name, admin.key),
            pods.env("ECHO_HOOKS_URL", echo_url(tenant)),
            pods.secret_env("ECHO_API_KEY", *echo_key),
        ],
        "resources": RESOURCES,
    }
    pod = pods.pod_spec(tenant, [container], [], restartPolicy="Never")
    return {
        "backoffLimit": BACKOFF_LIMIT,
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": CONTAINER,
                        "operator": "In",
                        "values": list(DEFINITIVE_EXIT_CODES),
                    },
                }
            ]
        },
        "template": {"metadata": {"labels": tenant.labels(COMPONENT)}, "spec": pod},
    }


def _name(tenant: Tenant, spec: Manifest) -> str:
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:DIGEST_LENGTH]
    return f"{tenant.child('openwebui')}-{digest}"


def connect_job(tenant: Tenant) -> Manifest | None:
    """The Job, or None when the spec asks for no connect."""
    spec = _job_spec(tenant)
    if spec is None:
        return None
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": tenant.metadata(_name(tenant, spec), COMPONENT),
        "spec": spec,
    }


def job_name(tenant: Tenant) -> str | None:
    """The name of the Job the spec wants (what status reads), or None."""
    job = connect_job(tenant)
    return None if job is None else str(job["metadata"]["name"])


def render_openwebui(tenant: Tenant) -> list[Manifest]:
    job = connect_job(tenant)
    return [] if job is None else [job]
