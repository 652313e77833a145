"""The workload sections of an EchoDeployment spec (images, hooks, distiller, embedding, Qdrant). Pure.

The CRD is generated from these models (`echo_operator.crd`); each cross-field CEL rule of the CRD
is a `shapes.Rule` checked here by a model validator with the same message.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from echo_operator import shapes
from echo_operator.shapes import HTTP_URL, Quantity, Rule, Section, check, section_config

__all__ = [
    "Distiller",
    "Embedding",
    "Gpu",
    "Hooks",
    "HooksAutoscaling",
    "Image",
    "Images",
    "ManagedQdrant",
    "PodDisruptionBudget",
    "Qdrant",
    "QdrantStorage",
    "Standalone",
    "StandaloneStorage",
]

VERSION = "0.1.0"

MIN_LE_MAX = Rule("self.minReplicas <= self.maxReplicas", "minReplicas must be <= maxReplicas")
QDRANT_ONE_SOURCE = Rule(
    "has(self.managed) != has(self.externalUrl)",
    "set exactly one of qdrant.managed (a StatefulSet run by the operator) and qdrant.externalUrl",
)
QDRANT_KEY_EXTERNAL = Rule(
    "!has(self.apiKeySecretRef) || has(self.externalUrl)",
    "qdrant.apiKeySecretRef applies to an external Qdrant only (set externalUrl)",
)
ADMIN_KEY_APART = Rule(
    "!has(self.adminKeySecretRef) || !has(self.apiKeySecretRef) || "
    "self.adminKeySecretRef.name != self.apiKeySecretRef.name || "
    "self.adminKeySecretRef.key != self.apiKeySecretRef.key",
    "hooks.adminKeySecretRef must differ from hooks.apiKeySecretRef (the key Open WebUI holds must not "
    "list or forget users)",
)
EMBEDDING_SCHEDULING_MANAGED = Rule(
    "!has(self.externalUrl) || "
    "(!has(self.nodeSelector) && !has(self.tolerations) && !has(self.runtimeClassName))",
    "embedding.nodeSelector, tolerations and runtimeClassName apply to a managed embedding only "
    "(remove them or externalUrl)",
)


class Image(Section):
    """A container image."""

    repository: str = Field(min_length=1, description="Image repository.")
    tag: str = Field(min_length=1, description="Image tag.")


class Images(Section):
    """Default images of every component; a component's own `image` overrides them."""

    echo: Image = Field(
        Image(repository="ghcr.io/echo-k8s/echo", tag=VERSION), description="echo-hooks and echo-distiller."
    )
    embedding: Image = Field(
        Image(repository="ghcr.io/echo-k8s/echo-embedding", tag=VERSION),
        description="Infinity with the embedding model (services/embedding).",
    )
    qdrant: Image = Field(
        Image(repository="qdrant/qdrant", tag="v1.13.6-unprivileged"),
        description="Qdrant; the -unprivileged flavour runs as a non-root user.",
    )
    standalone: Image = Field(
        Image(repository="ghcr.io/echo-k8s/echo-standalone", tag=VERSION),
        description="The standalone pod (mode standalone): the echo image plus the `local` extra "
        "(embedded PostgreSQL, the packaged MiniLM embedder).",
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent", description="Pull policy."
    )
    pull_secrets: list[str] | None = Field(None, description="imagePullSecrets names.")


class HooksAutoscaling(Section):
    """A CPU HorizontalPodAutoscaler for echo-hooks."""

    model_config = section_config(MIN_LE_MAX)

    enabled: bool = Field(False, description="Scale hooks on CPU (replicas is then ignored).")
    min_replicas: int = Field(2, ge=1, le=100, description="Fewest replicas.")
    max_replicas: int = Field(10, ge=1, le=100, description="Most replicas.")
    target_cpu_utilization: int = Field(70, ge=1, le=100, description="Average CPU use aimed at (%).")

    @model_validator(mode="after")
    def _rules(self) -> HooksAutoscaling:
        check(self.min_replicas <= self.max_replicas, MIN_LE_MAX)
        return self


class PodDisruptionBudget(Section):
    """A PodDisruptionBudget for echo-hooks."""

    enabled: bool = Field(True, description="Render a PodDisruptionBudget.")
    max_unavailable: int = Field(1, ge=1, description="Pods a voluntary disruption may take at once.")


class Hooks(Section):
    """echo-hooks: the Pipelines server Open WebUI calls (port 9099), stateless."""

    model_config = section_config(ADMIN_KEY_APART)

    replicas: int = Field(2, ge=1, le=100, description="Replicas (without autoscaling).")
    image: str | None = Field(None, description="Full image reference; default images.echo.")
    resources: shapes.Resources | None = Field(
        None,
        description="Default: 250m/384Mi, limit 1Gi (bench/hooks_latency.py: about 16 ms of CPU per turn over"
        " the Function, the recall's embedding and search apart).",
    )
    autoscaling: HooksAutoscaling = Field(default_factory=HooksAutoscaling, json_schema_extra={"default": {}})
    pod_disruption_budget: PodDisruptionBudget = Field(
        default_factory=PodDisruptionBudget, json_schema_extra={"default": {}}
    )
    api_key_secret_ref: shapes.SecretKeyRef | None = Field(
        None,
        description="Bearer key Open WebUI sends (ECHO_API_KEY: hook, pipe and tool routes, not the "
        "memory-management API); default: a Secret <name>-api-key the operator generates once (key api-key).",
    )
    admin_key_secret_ref: shapes.AdminKeySecretRef | None = Field(
        None,
        description="Bearer key of the memory-management API (ECHO_ADMIN_KEY: /memories, /users/…, POST "
        "/chats/{id}/compact), for operators, mounted into the hooks only; unset = that API is off. "
        "Must differ from the key Open WebUI holds.",
    )
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP", description="Type of the hooks Service."
    )

    @model_validator(mode="after")
    def _rules(self) -> Hooks:
        admin, hooks = self.admin_key_secret_ref, self.api_key_secret_ref
        check(
            admin is None or hooks is None or (admin.name, admin.key) != (hooks.name, hooks.key),
            ADMIN_KEY_APART,
        )
        return self


class Distiller(Section):
    """echo-distiller: the job workers (`echoctl worker`), scaled on queue depth."""

    model_config = section_config(MIN_LE_MAX)

    replicas: int = Field(1, ge=0, le=100, description="Replicas when autoscaling is off (0 pauses work).")
    concurrency: int = Field(
        16,
        ge=1,
        le=256,
        description="Jobs one worker runs at once (they mostly wait on the LLM; summary and distill take up "
        "to half each).",
    )
    image: str | None = Field(None, description="Full image reference; default images.echo.")
    resources: shapes.Resources | None = Field(None, description="Default: 100m/384Mi, limit 1Gi.")
    autoscaling: bool = Field(
        True,
        description="Scale on the tenant's pending jobs (echo_jobs_pending, read from Prometheus: the "
        "distillers must be scraped, e.g. monitoring.serviceMonitor).",
    )
    min_replicas: int = Field(1, ge=1, le=100, description="Fewest replicas when autoscaling.")
    max_replicas: int = Field(5, ge=1, le=100, description="Most replicas when autoscaling.")
    target_pending_jobs: int = Field(10, ge=1, description="Pending jobs per replica aimed at.")
    keda: bool = Field(
        True,
        description="A KEDA ScaledObject with a Prometheus trigger (needs KEDA); false: an HPA on the "
        "External metric echo_jobs_pending (needs prometheus-adapter with the chart's rule, "
        "value prometheusAdapterRules).",
    )
    prometheus_address: str = Field(
        "http://prometheus-operated.monitoring.svc:9090",
        pattern=HTTP_URL,
        description="Prometheus queried by the KEDA trigger.",
    )

    @model_validator(mode="after")
    def _rules(self) -> Distiller:
        check(self.min_replicas <= self.max_replicas, MIN_LE_MAX)
        return self


class Gpu(Section):
    """GPUs of one embedding pod."""

    count: int = Field(1, ge=0, le=16, description="GPUs per pod; 0 runs the model on CPU.")
    resource_name: str = Field("nvidia.com/gpu", min_length=1, description="Extended resource name.")


class Embedding(Section):
    """echo-embedding: Infinity serving the embedding model on GPU nodes (:7997), or an external URL."""

    model_config = section_config(EMBEDDING_SCHEDULING_MANAGED)

    model: str = Field("BAAI/bge-m3", min_length=1, description="Embedding model id.")
    dimension: int = Field(1024, ge=1, le=65536, description="Vector size of the model.")
    external_url: str | None = Field(
        None, pattern=HTTP_URL, description="An existing /embeddings server; no Deployment then."
    )
    replicas: int = Field(1, ge=1, le=32, description="Replicas.")
    image: str | None = Field(None, description="Full image reference; default images.embedding.")
    resources: shapes.Resources | None = Field(None, description="Default: 1 CPU / 4Gi, limit 8Gi.")
    gpu: Gpu = Field(default_factory=Gpu, json_schema_extra={"default": {}})
    node_selector: dict[str, str] | None = Field(None, description="Node labels, e.g. GPU nodes.")
    tolerations: list[shapes.Toleration] | None = Field(
        None, description="Default with GPUs: tolerate the <gpu.resourceName> NoSchedule taint."
    )
    runtime_class_name: str | None = Field(None, description="e.g. nvidia.")
    startup_timeout_seconds: int = Field(
        900, ge=60, le=7200, description="Time allowed to load the model before the pod restarts (s)."
    )
    shm_size: Quantity = Field("1Gi", description="Size of the /dev/shm memory volume.")
    model_cache_size: Quantity = Field("20Gi", description="Size limit of the model cache volume.")

    @model_validator(mode="after")
    def _rules(self) -> Embedding:
        scheduling = self.node_selector is not None or self.tolerations is not None
        check(
            not self.external_url or not (scheduling or self.runtime_class_name), EMBEDDING_SCHEDULING_MANAGED
        )
        return self


class QdrantStorage(Section):
    """The volume of each Qdrant pod."""

    size: Quantity = Field("10Gi", description="Requested storage.")
    storage_class_name: str | None = Field(None, description="Storage class; default the cluster's.")
    retain_on_delete: bool = Field(True, description="Keep the PVCs when the EchoDeployment is deleted.")


class ManagedQdrant(Section):
    """A Qdrant StatefulSet run by the operator."""

    image: str | None = Field(None, description="Full image reference; default images.qdrant.")
    resources: shapes.Resources | None = Field(None, description="Default: 250m/512Mi, limit 2Gi.")
    storage: QdrantStorage = Field(default_factory=QdrantStorage, json_schema_extra={"default": {}})


class Qdrant(Section):
    """The vector store: a managed StatefulSet, or an external server."""

    model_config = section_config(QDRANT_ONE_SOURCE, QDRANT_KEY_EXTERNAL)

    managed: ManagedQdrant | None = Field(None, description="Run Qdrant in the tenant.")
    external_url: str | None = Field(None, pattern=HTTP_URL, description="An existing Qdrant server.")
    api_key_secret_ref: shapes.SecretKeyRef | None = Field(
        None, description="API key of the external Qdrant."
    )

    @model_validator(mode="after")
    def _rules(self) -> Qdrant:
        check((self.managed is not None) != (self.external_url is not None), QDRANT_ONE_SOURCE)
        check(self.api_key_secret_ref is None or self.external_url is not None, QDRANT_KEY_EXTERNAL)
        return self


class StandaloneStorage(Section):
    """The volume of the standalone pod: embedded PostgreSQL, Qdrant local mode, saved valves."""

    size: Quantity = Field("5Gi", description="Requested storage.")
    storage_class_name: str | None = Field(None, description="Storage class; default the cluster's.")
    retain_on_delete: bool = Field(
        True, description="Keep the PVC (the tenant's data) when the EchoDeployment is deleted."
    )


class Standalone(Section):
    """The one pod of a standalone tenant (mode standalone): `echoctl serve` in embedded mode."""

    image: str | None = Field(None, description="Full image reference; default images.standalone.")
    resources: shapes.Resources | None = Field(
        None, description="Default: 500m/1Gi, limit 3Gi (PostgreSQL, the embedder and the worker in one pod)."
    )
    worker_concurrency: int = Field(
        2, ge=1, le=64, description="Jobs the in-process worker runs at once (it shares the pod's CPU)."
    )
    startup_timeout_seconds: int = Field(
        300,
        ge=30,
        le=3600,
        description="Time allowed to start (first initdb, migrations, loading the embedder) before the "
        "pod restarts (s).",
    )
    storage: StandaloneStorage = Field(default_factory=StandaloneStorage, json_schema_extra={"default": {}})
