"""Process settings from `ECHO_*` environment variables (DESIGN §3), read once at the entrypoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["Settings"]

_BLANK_KEY_HINTS = {
    "ECHO_API_KEY": "set a key, or unset it and set ECHO_ALLOW_UNAUTHENTICATED=true for a trial without auth",
    "ECHO_ADMIN_KEY": "set a key, or unset it to turn the memory-management API off",
}


class Settings(BaseSettings):
    """Every `ECHO_*` variable; unset means embedded mode for that part."""

    # No input in the text of a validation error: a model-wide rule's input is every setting, keys included.
    model_config = SettingsConfigDict(
        env_prefix="ECHO_", extra="ignore", populate_by_name=True, hide_input_in_errors=True
    )

    data_dir: Path = Field(Path(".echo"), description="Embedded state (database, vectors, valves overrides).")
    database_url: str | None = Field(
        None, description="postgresql://… DSN; unset = embedded PostgreSQL under data_dir."
    )
    tenant: str = Field(
        "echo",
        description="Tenant name (one EchoDeployment = one tenant); its data lives in PostgreSQL schema "
        "`echo_<tenant>` ('-' as '_') and Qdrant collections `<tenant>__echo_memory|ephemeral`, so tenants "
        "never share either. Default `echo`: the single tenant of an embedded install.",
    )
    database_pool_size: int = Field(
        10,
        ge=1,
        le=1000,
        description="Most PostgreSQL connections of this process (connections). 10 covers a worker's "
        "default concurrency plus its bookkeeping while N replicas stay under the server's default "
        "max_connections of 100.",
    )
    database_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Timeout to connect or to get a pooled connection (s); long enough for a server "
        "restart or a failover, short enough for a readiness probe to notice.",
    )
    migrate_on_start: bool = Field(
        True,
        description="Apply pending migrations when a process opens the store (safe concurrently); "
        "turn off when `echoctl migrate` runs as a separate deploy step.",
    )
    job_lease_seconds: float = Field(
        30.0,
        gt=0,
        description="Lease of a claimed job (s), renewed every third of it while the job runs; a crashed "
        "worker's job is re-delivered after at most this long. 30 s: a pod kill is noticed quickly, a "
        "slow heartbeat (GC pause, busy loop) does not lose the lease.",
    )
    job_poll_seconds: float = Field(
        5.0,
        gt=0,
        description="Longest idle wait between two looks at the queue (s); NOTIFY wakes workers at once, "
        "so this only bounds the delay when a notification is lost (listener reconnecting).",
    )
    job_grace_seconds: float = Field(
        20.0,
        ge=0,
        description="On SIGTERM, how long running jobs may finish before their leases are released (s); "
        "below Kubernetes' default terminationGracePeriodSeconds of 30.",
    )
    job_metrics_seconds: float = Field(
        15.0,
        gt=0,
        description="How often a worker refreshes the queue-depth gauges (s): Prometheus' usual scrape "
        "interval, so the HPA sees fresh numbers without a count query per scrape.",
    )
    job_done_retention_seconds: float = Field(
        7 * 86400.0,
        gt=0,
        description="How long a done job is kept (s) before the retention sweep deletes it; 7 days: an "
        "outlet retried within a week still finds its job by idempotency key, and the table holds a "
        "week of work instead of all of it.",
    )
    job_dead_retention_seconds: float = Field(
        30 * 86400.0,
        gt=0,
        description="How long a dead-lettered job is kept (s); 30 days leave time to read its last_error "
        "and requeue it after a fix.",
    )
    job_sweep_seconds: float = Field(
        600.0,
        gt=0,
        description="How often each worker tries the retention sweep (s); one sweeps at a time (advisory "
        "lock), 1000 rows per delete, so every 10 min keeps each sweep short.",
    )
    worker_metrics_port: int = Field(
        9101,
        ge=0,
        le=65535,
        description="Port of `echoctl worker`'s /metrics (0 = none); 9101 avoids node-exporter's 9100 "
        "on developer machines.",
    )
    inprocess_worker: bool | None = Field(
        None,
        description="Run a job worker inside `echoctl serve`; unset = only in embedded mode (no "
        "database_url), since a cluster runs the distiller Deployment instead.",
    )
    inprocess_worker_concurrency: int = Field(
        2,
        ge=1,
        le=64,
        description="Jobs the in-process worker runs at once; small, it shares the hooks' CPU.",
    )
    qdrant_url: str | None = Field(None, description="Qdrant server URL; unset = local mode.")
    qdrant_path: Path | None = Field(
        None, description="Qdrant local-mode directory; default data_dir/qdrant."
    )
    qdrant_api_key: SecretStr | None = Field(None, description="API key of an external Qdrant.")
    qdrant_timeout_seconds: int = Field(
        10,
        ge=1,
        description=(
            "Timeout of one Qdrant request (s, whole seconds as the client takes them); a filtered"
            " search answers in milliseconds, so 10 s only trips on a stuck server."
        ),
    )
    embedding_url: str | None = Field(
        None, description="Infinity/OpenAI-style base URL serving /embeddings; unset = local model."
    )
    embedding_model_path: Path | None = Field(
        None, description="Local sentence-transformers model directory; default the packaged MiniLM."
    )
    embedding_dimension: int | None = Field(
        None,
        gt=0,
        description="Dimension the deployment expects (the operator sets it from the CRD); the served "
        "dimension always comes from the embedder, and a different one makes /readyz fail.",
    )
    openwebui_url: str | None = Field(
        None,
        description="Open WebUI base URL (its root), for its REST API: file text for attachments, the "
        "transcript of a referenced chat ECHO has not seen (only a chat of the same user is used).",
    )
    openwebui_api_key: SecretStr | None = Field(
        None,
        description="Open WebUI admin API key (`sk-…`; Open WebUI needs ENABLE_API_KEYS=true) for its files "
        "and chats API; an admin reads other users' chats while ENABLE_ADMIN_CHAT_ACCESS is on (default).",
    )
    embedding_model: str | None = Field(
        None,
        description=(
            "Model name sent to the embedding server; OpenAI-style servers need one, Infinity serving one"
            " model ignores it; unset = not sent, the name is taken from the server's answer."
        ),
    )
    embedding_api_key: SecretStr | None = Field(
        None, description="Bearer key of the embedding server (Infinity --api-key); unset = none sent."
    )
    embedding_batch_size: int = Field(
        32,
        ge=1,
        le=2048,
        description=(
            "Texts per /embeddings request or local encode call; 32 is Infinity's own batch size, so a"
            " request fills one model batch and a query never queues behind more than one batch."
        ),
    )
    embedding_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description=(
            "Timeout of one /embeddings request (s); 32 long chunks on bge-m3 take a few seconds on a"
            " GPU; hot-path callers hold their own, tighter deadline."
        ),
    )
    embedding_max_attempts: int = Field(
        4,
        ge=1,
        description=(
            "Attempts per batch on 408/429/5xx, timeouts and transport errors (1 = no retry); 4 rides out"
            " an overload or a dropped connection, and the job queue retries anything longer."
        ),
    )
    embedding_retry_max_wait_seconds: float = Field(
        10.0,
        ge=0,
        description=(
            "Longest wait between two attempts (s), exponential backoff from 0.5 s; it also caps a"
            " server's Retry-After so that a misbehaving server cannot park a worker."
        ),
    )
    gemini_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("ECHO_GEMINI_API_KEY", "GEMINI_API_KEY"),
        description="Gemini API key; unset = no Gemini pipe models, offline summaries.",
    )
    gemini_base_url: str | None = Field(None, description="Gemini API base URL (tests point it at a fake).")
    api_key: SecretStr | None = Field(
        None,
        description="Bearer key of the hook, pipe and tool routes, held by Open WebUI (its Pipelines "
        "connection, the Function's valves, the tool server connection); it cannot reach the "
        "memory-management API. Unset: `echoctl serve` refuses to start unless "
        "ECHO_ALLOW_UNAUTHENTICATED=true; empty or blank: a configuration error. Surrounding whitespace "
        "(a Secret's trailing newline) is dropped.",
    )
    admin_key: SecretStr | None = Field(
        None,
        description="Bearer key of the memory-management API (`/memories…`, `/users/…`, `POST "
        "/chats/{id}/compact`), held by operators, never by Open WebUI; it must differ from "
        "ECHO_API_KEY. Unset: that API is off (403), but open in a trial without auth "
        "(ECHO_ALLOW_UNAUTHENTICATED). Empty or blank: a configuration error.",
    )
    allow_unauthenticated: bool = Field(
        False,
        description="Run without ECHO_API_KEY, every caller of the hook, pipe and tool routes trusted "
        "(and of the memory-management API unless ECHO_ADMIN_KEY is set): a trial on one machine. "
        "`echoctl serve` then binds to 127.0.0.1 unless ECHO_HOST or --host names another address "
        "(logged as a warning). true with ECHO_API_KEY set is a configuration error.",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Without ECHO_API_KEY, the Host names a request may carry besides loopback ones "
        "(localhost, *.localhost, 127.0.0.0/8, ::1), comma-separated: a page that rebinds its own "
        "domain to 127.0.0.1 (DNS rebinding) reaches the port with its domain as Host and is refused "
        "(421). Name the host Open WebUI uses when it is not a loopback one (host.docker.internal). "
        "With a key, not checked.",
    )
    valves_file: Path | None = Field(None, description="YAML/JSON: filter id -> valves; hot-reloaded.")
    model_thresholds_file: Path | None = Field(
        None, description="YAML/JSON: model id -> thresholds; merged over echo_compression.model_thresholds."
    )
    config_reload_seconds: float = Field(
        5.0,
        gt=0,
        description="How often mounted config files are checked (s); a ConfigMap update takes ~60 s.",
    )
    host: str = Field(
        "127.0.0.1",
        description="Hook service bind address (also the worker's /metrics); loopback unless given, "
        "the image and the operator give 0.0.0.0.",
    )
    port: int = Field(9099, ge=1, le=65535, description="Hook service port (the Pipelines default).")
    keep_alive_seconds: int = Field(
        75,
        ge=1,
        le=3600,
        description="How long an idle HTTP connection is kept open (s). Above the idle timeout of the "
        "proxies that pool connections to pods (nginx ingress 60 s, most cloud load balancers 60 s), so "
        "the proxy closes an idle connection first and never sends a request on one the service is "
        "closing (uvicorn's own default of 5 s races them).",
    )
    max_body_bytes: int = Field(
        32 * 1024 * 1024, gt=0, description="Largest request body (bytes); pasted images make bodies big."
    )
    pipe_models: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["gemini-2.5-flash", "gemini-2.5-pro"],
        description="Gemini models served as pipe models `echo.<model>` (comma-separated).",
    )
    llm_timeout_seconds: float = Field(120.0, gt=0, description="Timeout of one LLM call (s).")
    pipe_max_tool_rounds: int = Field(
        5,
        ge=0,
        le=50,
        description=(
            "Rounds of ECHO's own tools (search_memories, …) the pipe runs for one answer (count); past"
            " them Gemini is asked to answer without tools. 5 covers a search refined a few times while"
            " bounding the cost of a model that keeps calling."
        ),
    )
    pipe_shadow_deadline_ms: int = Field(
        1000,
        gt=0,
        description=(
            "Longest a rich-shadow read or write of the pipe may take (ms); past it the call goes on with"
            " the plain history (counted in echo_shadow_failures_total). Far above the few ms it takes, so"
            " only a stalled store trips it."
        ),
    )
    llm_provider: Literal["auto", "gemini", "openai", "offline"] = Field(
        "auto",
        description=(
            "LLM of background work (summaries, distillation, merges): auto = Gemini when a Gemini key is"
            " set, else offline heuristics; openai = any OpenAI-compatible endpoint at openai_base_url."
        ),
    )
    llm_model: str = Field(
        "gemini-2.5-flash",
        min_length=1,
        description=(
            "Model of background work when a valve names none; gemini-2.5-flash is the seed's distillation"
            " model (set e.g. deepseek-chat with llm_provider=openai)."
        ),
    )
    openai_base_url: str | None = Field(
        None,
        description="OpenAI-compatible base URL, before /chat/completions (e.g. http://vllm:8000/v1).",
    )
    openai_api_key: SecretStr | None = Field(
        None, description="Bearer key of the OpenAI-compatible endpoint; unset = none sent (a local vLLM)."
    )
    openai_json_mode: Literal["json_schema", "json_object_schema", "json_object"] = Field(
        "json_schema",
        description=(
            "First form in which JSON answers (distillation, merges) are asked of the OpenAI-compatible"
            " endpoint: json_schema (OpenAI's structured outputs; vLLM, Ollama and llama.cpp's server"
            " enforce the schema with a grammar), json_object_schema (json_object plus a schema key, which"
            " llama-cpp-python's server enforces), json_object (any server, DeepSeek included; the schema"
            " goes in the prompt). A server that refuses a form (400/422) is asked in the next one at"
            " once, and the first that works is kept."
        ),
    )
    openai_max_output_tokens: int | None = Field(
        None,
        gt=0,
        description=(
            "Ceiling on max_tokens of every call to the OpenAI-compatible endpoint (tokens); unset = each"
            " call's own bound: a summary its target (at most max_summary_tokens), a distillation 1,516"
            " (10 facts with their fields), a merge 180. Lower it to bound how long a slow CPU model may"
            " generate; a distillation cut short is refused, never stored."
        ),
    )
    llm_max_retries: int = Field(
        4,
        ge=0,
        description=(
            "Retries of one LLM call on 408/429/5xx, timeouts and transport errors (count, after the first"
            " attempt); 4 rides out a short overload, and the job queue retries anything longer."
        ),
    )
    llm_retry_max_wait_seconds: float = Field(
        60.0,
        ge=0,
        description=(
            "Most time one LLM call spends waiting between retries, all waits together (s), Retry-After"
            " included; 60 keeps a job from sitting on its lease; a longer Retry-After ends the retries."
        ),
    )
    otlp_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("ECHO_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP/HTTP collector base URL; unset = no trace export.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level.")
    log_format: Literal["json", "console"] = Field(
        "json", description="json for clusters, console for humans."
    )

    @field_validator("pipe_models", "allowed_hosts", mode="before")
    @classmethod
    def _split_models(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("database_url")
    @classmethod
    def _postgres_only(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// DSN")
        return value

    @field_validator("tenant")
    @classmethod
    def _safe_tenant(cls, value: str) -> str:
        from echo.config import tenancy
        from echo.errors import ConfigError

        try:
            return tenancy.validate_tenant(value)
        except ConfigError as error:
            raise ValueError(str(error).removeprefix("tenant: ")) from error

    @field_validator("api_key", "admin_key", mode="after")
    @classmethod
    def _a_key_is_never_blank(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """An empty key used to turn auth off without a word; now it is an error, and a key is kept
        without the whitespace around it (an HTTP header cannot carry it)."""
        if value is None:
            return None
        key = value.get_secret_value().strip()
        if not key:
            variable = f"ECHO_{str(info.field_name).upper()}"
            hint = _BLANK_KEY_HINTS.get(variable, "")
            raise ValueError(f"{variable}: must not be empty (an empty key would turn auth off); {hint}")
        return SecretStr(key)

    @model_validator(mode="after")
    def _keys_are_consistent(self) -> Settings:
        admin, hooks = (key.get_secret_value() if key else None for key in (self.admin_key, self.api_key))
        if admin is not None and admin == hooks:
            raise ValueError(
                "ECHO_ADMIN_KEY: must differ from ECHO_API_KEY (the key Open WebUI holds would "
                "get the power to list and forget users)"
            )
        if self.allow_unauthenticated and self.api_key is not None:
            raise ValueError(
                "ECHO_ALLOW_UNAUTHENTICATED: true while ECHO_API_KEY is set; unset one of them "
                "(with a key every hook call must carry it)"
            )
        return self

    @model_validator(mode="after")
    def _llm_provider_is_usable(self) -> Settings:
        if self.llm_provider == "openai" and not self.openai_base_url:
            raise ValueError("openai_base_url: required when llm_provider is openai (ECHO_OPENAI_BASE_URL)")
        if self.llm_provider == "gemini" and self.gemini_api_key is None:
            raise ValueError("gemini_api_key: required when llm_provider is gemini (ECHO_GEMINI_API_KEY)")
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value
