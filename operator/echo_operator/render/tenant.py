"""One tenant's names, labels, ports and URLs, derived from its name, namespace and spec. Pure."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from echo_operator import spec as spec_module

__all__ = [
    "COMPONENT",
    "EMBEDDING_PORT",
    "HOOKS_PORT",
    "INSTANCE",
    "MANAGED_BY",
    "METRICS_TENANT_LABEL",
    "OPERATOR",
    "QDRANT_GRPC_PORT",
    "QDRANT_HTTP_PORT",
    "TENANT_ID_MAX",
    "WORKER_METRICS_PORT",
    "Tenant",
    "tenant_id",
]

NAME = "app.kubernetes.io/name"
INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
PART_OF = "app.kubernetes.io/part-of"
MANAGED_BY = "app.kubernetes.io/managed-by"
OPERATOR = "echo-operator"
METRICS_TENANT_LABEL = "tenant"
"""The label the tenant's ServiceMonitors add to every series (value: the EchoDeployment's name);
the distiller's autoscalers select `echo_jobs_pending` by it and by `namespace`."""

HOOKS_PORT = 9099
WORKER_METRICS_PORT = 9101
EMBEDDING_PORT = 7997
QDRANT_HTTP_PORT = 6333
QDRANT_GRPC_PORT = 6334

VALVES_DIR = "/etc/echo/valves"
THRESHOLDS_DIR = "/etc/echo/model-thresholds"
VALVES_KEY = "valves.yaml"
THRESHOLDS_KEY = "model-thresholds.yaml"
API_KEY_KEY = "api-key"


@dataclass(frozen=True)
class Tenant:
    """An EchoDeployment as the render functions see it."""

    name: str
    namespace: str
    spec: spec_module.EchoDeploymentSpec

    @property
    def tenant_id(self) -> str:
        """`ECHO_TENANT`: unique per namespace and name, and a valid store tenant (see `tenant_id`)."""
        return tenant_id(self.namespace, self.name)

    def child(self, component: str) -> str:
        """The name of a child object: `<name>-<component>`."""
        return f"{self.name}-{component}"

    def selector(self, component: str) -> dict[str, str]:
        """Labels that select a component's pods (immutable in Deployments: keep them few)."""
        return {NAME: "echo", INSTANCE: self.name, COMPONENT: component}

    def labels(self, component: str) -> dict[str, str]:
        """Every label of a child; `managed-by` + `instance` is what pruning selects on."""
        return {**self.selector(component), PART_OF: "echo", MANAGED_BY: OPERATOR}

    def metadata(self, name: str, component: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "namespace": self.namespace, "labels": self.labels(component), **extra}

    @property
    def standalone(self) -> bool:
        """Mode standalone: one pod (`<name>-standalone-0`) instead of the distributed workloads."""
        return self.spec.mode == "standalone"

    @property
    def serving_component(self) -> str:
        """The component whose pods the hooks Service `<name>-hooks` routes to."""
        return "standalone" if self.standalone else "hooks"

    def tenant_selector(self) -> dict[str, str]:
        """Selects every pod of this tenant."""
        return {INSTANCE: self.name, MANAGED_BY: OPERATOR}

    @property
    def hooks_endpoint(self) -> str:
        return f"http://{self.child('hooks')}.{self.namespace}.svc:{HOOKS_PORT}"

    @property
    def qdrant_url(self) -> str:
        external = self.spec.qdrant.external_url
        return external or f"http://{self.child('qdrant')}.{self.namespace}.svc:{QDRANT_HTTP_PORT}"

    @property
    def embedding_url(self) -> str:
        external = self.spec.embedding.external_url
        return external or f"http://{self.child('embedding')}.{self.namespace}.svc:{EMBEDDING_PORT}"

    @property
    def api_key_ref(self) -> tuple[str, str]:
        """(Secret, key) of ECHO_API_KEY: the user's, or the one the operator generates."""
        ref = self.spec.hooks.api_key_secret_ref
        return (ref.name, ref.key) if ref else (self.generated_api_key_secret, API_KEY_KEY)

    @property
    def generated_api_key_secret(self) -> str:
        return self.child("api-key")

    @property
    def valves_ref(self) -> tuple[str, str]:
        """(ConfigMap, key) of the valves file: the user's, or the one rendered from inline valves."""
        ref = self.spec.valves.config_map_ref
        return (ref.name, ref.key) if ref else (self.child("valves"), VALVES_KEY)

    @property
    def thresholds_ref(self) -> tuple[str, str]:
        ref = self.spec.model_thresholds.config_map_ref
        return (ref.name, ref.key) if ref else (self.child("model-thresholds"), THRESHOLDS_KEY)

    def image(self, override: str | None, component: str) -> str:
        """A component's image: its own override, else images.<echo|embedding|qdrant|standalone>."""
        if override:
            return override
        image = getattr(self.spec.images, component)
        return f"{image.repository}:{image.tag}"


TENANT_ID_MAX = 40  # the services' rule: schema `echo_<id>` and its NOTIFY channel fit in 63 bytes
DIGEST_LENGTH = 12  # hex characters of sha256: 48 bits
_READABLE_MAX = TENANT_ID_MAX - DIGEST_LENGTH - 1


def tenant_id(namespace: str, name: str) -> str:
    """The services' tenant name (`ECHO_TENANT`) of EchoDeployment `namespace/name`:
    `<namespace>-<name>-<digest>`, where digest = the first 12 hex characters of
    sha256(`<namespace>/<name>`), so `printf %s ns/name | sha256sum | cut -c1-12` finds it.

    The readable part is for people; uniqueness comes from the digest of the exact pair ('/' is
    in neither a namespace nor a name), so two EchoDeployments whose readable parts coincide
    (`team/a-x` and `team-a/x`, or a long pair cut short) never share a database schema or a
    Qdrant collection (DESIGN §7). Always a valid store tenant: lowercase letters, digits and '-',
    starting with a letter ('t-' is prepended to a readable part that does not), at most 40
    characters (the readable part is cut to 27)."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:DIGEST_LENGTH]
    readable = re.sub(r"[^a-z0-9-]+", "-", f"{namespace}-{name}".lower()).strip("-")
    if not readable[:1].isalpha():
        readable = f"t-{readable}"
    readable = readable[:_READABLE_MAX].rstrip("-")
    return f"{readable}-{digest}"
