"""Process settings from `ECHO_*` environment variables (DESIGN §3), read once at the entrypoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    """Every `ECHO_*` variable; unset means embedded mode for that part."""

    model_config = SettingsConfigDict(env_prefix="ECHO_", extra="ignore", populate_by_name=True)

    data_dir: Path = Field(Path(".echo"), description="Embedded state (database, vectors, valves overrides).")
    database_url: str | None = Field(
        None, description="postgresql://… DSN; unset = embedded PostgreSQL under data_dir."
    )
    qdrant_url: str | None = Field(None, description="Qdrant server URL; unset = local mode.")
    qdrant_path: Path | None = Field(
        None, description="Qdrant local-mode directory; default data_dir/qdrant."
    )
    qdrant_api_key: SecretStr | None = Field(None, description="API key of an external Qdrant.")
    embedding_url: str | None = Field(
        None, description="Infinity/OpenAI-style base URL serving /embeddings; unset = local model."
    )
    embedding_model_path: Path | None = Field(
        None, description="Local sentence-transformers model directory; default the packaged MiniLM."
    )
    gemini_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("ECHO_GEMINI_API_KEY", "GEMINI_API_KEY"),
        description="Gemini API key; unset = no Gemini pipe models, offline summaries.",
    )
    gemini_base_url: str | None = Field(None, description="Gemini API base URL (tests point it at a fake).")
    api_key: SecretStr | None = Field(
        None, description="Bearer key Open WebUI sends; unset = no auth (logged loudly)."
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
    host: str = Field("127.0.0.1", description="Hook service bind address.")
    port: int = Field(9099, ge=1, le=65535, description="Hook service port (the Pipelines default).")
    max_body_bytes: int = Field(
        32 * 1024 * 1024, gt=0, description="Largest request body (bytes); pasted images make bodies big."
    )
    pipe_models: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["gemini-2.5-flash", "gemini-2.5-pro"],
        description="Gemini models served as pipe models `echo.<model>` (comma-separated).",
    )
    llm_timeout_seconds: float = Field(120.0, gt=0, description="Timeout of one LLM call (s).")
    otlp_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("ECHO_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP/HTTP collector base URL; unset = no trace export.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level.")
    log_format: Literal["json", "console"] = Field(
        "json", description="json for clusters, console for humans."
    )

    @field_validator("pipe_models", mode="before")
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

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value
