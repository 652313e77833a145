"""Spec sections about what a tenant talks to (database, LLM, Open WebUI) and what watches and
guards it (monitoring, network policies), as pydantic models. Pure.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from echo_operator import shapes
from echo_operator.shapes import HTTP_URL, Rule, Section, check, section_config

__all__ = [
    "Database",
    "Llm",
    "Monitoring",
    "NetworkPolicy",
    "OpenWebUI",
    "OpenWebUIAdminKeyRef",
    "OpenWebUIConnect",
    "OpenWebUIPods",
]

LLM_KEY_REQUIRED = Rule(
    "self.provider != 'gemini' || has(self.apiKeySecretRef)",
    "llm.apiKeySecretRef is required when llm.provider is gemini",
)
LLM_OPENAI_URL = Rule(
    "self.provider != 'openai' || has(self.baseUrl)",
    "llm.baseUrl is required when llm.provider is openai (an OpenAI-compatible endpoint)",
)
OPENWEBUI_KEY_NEEDS_URL = Rule(
    "!has(self.apiKeySecretRef) || has(self.url)", "openwebui.apiKeySecretRef needs openwebui.url"
)
OPENWEBUI_CONNECT_NEEDS_URL = Rule(
    "!has(self.connect) || has(self.url)",
    "openwebui.connect needs openwebui.url (the Open WebUI the connect Job installs ECHO in)",
)


class Database(Section):
    """PostgreSQL: the tenant's schema lives there (shadow, summaries, jobs, registries)."""

    dsn_secret_ref: shapes.DsnSecretRef = Field(description="Secret key holding the postgresql:// DSN.")


class Llm(Section):
    """The LLM of background work and of the pipe models."""

    model_config = section_config(LLM_KEY_REQUIRED, LLM_OPENAI_URL)

    provider: Literal["gemini", "openai", "offline"] = Field(
        "gemini", description="gemini, openai (any OpenAI-compatible endpoint) or offline heuristics."
    )
    models: list[str] = Field(
        default_factory=lambda: ["gemini-2.5-flash", "gemini-2.5-pro"],
        json_schema_extra={"default": ["gemini-2.5-flash", "gemini-2.5-pro"]},
        description="Model ids: the first does background work; with gemini each is a pipe model echo.<id>.",
    )
    api_key_secret_ref: shapes.SecretKeyRef | None = Field(None, description="Secret key of the API key.")
    base_url: str | None = Field(None, pattern=HTTP_URL, description="API base URL (openai: required).")

    @model_validator(mode="after")
    def _rules(self) -> Llm:
        check(self.provider != "gemini" or self.api_key_secret_ref is not None, LLM_KEY_REQUIRED)
        check(self.provider != "openai" or self.base_url is not None, LLM_OPENAI_URL)
        return self


class OpenWebUIAdminKeyRef(shapes.SecretKeyRef):
    """The Secret key holding an Open WebUI admin's API key (sk-…; Open WebUI needs ENABLE_API_KEYS=true)."""

    key: str = Field("admin-key", min_length=1, max_length=253, description="Key in the Secret.")


class OpenWebUIConnect(Section):
    """`echoctl openwebui connect` run by the operator as a Job: ECHO's Function and tool server
    installed in Open WebUI through its admin API, again whenever these settings change."""

    admin_key_secret_ref: OpenWebUIAdminKeyRef = Field(
        description="Secret key of an Open WebUI admin's API key (the Job's ECHO_OPENWEBUI_API_KEY, never "
        "in a log)."
    )
    echo_url: str | None = Field(
        None,
        pattern=HTTP_URL,
        description="echo-hooks as Open WebUI reaches it (the Function's ECHO_URL, the tool server's URL); "
        "default the hooks Service, http://<name>-hooks.<namespace>.svc:9099.",
    )
    timeout_seconds: int = Field(10, ge=1, le=300, description="Seconds per call to Open WebUI.")


class OpenWebUI(Section):
    """Open WebUI: its files API, read to fetch attachments, and `connect`, ECHO installed in it."""

    model_config = section_config(OPENWEBUI_KEY_NEEDS_URL, OPENWEBUI_CONNECT_NEEDS_URL)

    url: str | None = Field(None, pattern=HTTP_URL, description="Open WebUI base URL, as pods reach it.")
    api_key_secret_ref: shapes.SecretKeyRef | None = Field(None, description="Secret key of an API key.")
    connect: OpenWebUIConnect | None = Field(
        None,
        description="Install ECHO in this Open WebUI (a Job running `echoctl openwebui connect`; status "
        "condition OpenWebUIConnected).",
    )

    @model_validator(mode="after")
    def _rules(self) -> OpenWebUI:
        check(self.api_key_secret_ref is None or self.url is not None, OPENWEBUI_KEY_NEEDS_URL)
        check(self.connect is None or self.url is not None, OPENWEBUI_CONNECT_NEEDS_URL)
        return self


class Monitoring(Section):
    """Prometheus Operator ServiceMonitors and Grafana dashboards."""

    service_monitor: bool = Field(
        False, description="ServiceMonitors (when the Prometheus Operator is there)."
    )
    dashboards: bool = Field(False, description="Grafana dashboard ConfigMaps (grafana_dashboard=1).")
    interval: str = Field("30s", pattern=r"^[0-9]+(ms|s|m|h)$", description="Scrape interval.")
    labels: dict[str, str] | None = Field(None, description="Extra labels, e.g. a Prometheus selector.")
    prometheus_namespace: str = Field(
        "monitoring", min_length=1, description="Namespace allowed to scrape metrics ports."
    )


class OpenWebUIPods(Section):
    """Open WebUI's pods: the one caller of echo-hooks."""

    namespace: str | None = Field(
        None,
        min_length=1,
        max_length=63,
        pattern=shapes.DNS_LABEL,
        description="Open WebUI's namespace (its kubernetes.io/metadata.name label); default the tenant's.",
    )
    pod_labels: dict[str, str] = Field(
        min_length=1,
        description="Labels of Open WebUI's pods, e.g. {app.kubernetes.io/component: open-webui} (its "
        "Helm chart's).",
    )


class NetworkPolicy(Section):
    """NetworkPolicies: only the hooks Service is reachable from outside the tenant."""

    enabled: bool = Field(True, description="Render NetworkPolicies.")
    openwebui: OpenWebUIPods | None = Field(
        None,
        description="Let only Open WebUI's pods reach echo-hooks (with hooksFrom, those peers too); "
        "unset with hooksFrom unset: anyone may.",
    )
    hooks_from: list[shapes.NetworkPeer] | None = Field(
        None,
        description="Who else may reach echo-hooks (beside openwebui); neither set: anyone (Open WebUI "
        "may live anywhere).",
    )
