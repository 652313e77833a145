"""Per-model context thresholds (seed 002 `model_thresholds`), pure.

A custom Open WebUI model (a preset over a base model) inherits its base model's thresholds.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_MODEL_THRESHOLDS", "ModelThreshold", "lookup_threshold", "normalise_model_id"]


class ModelThreshold(BaseModel):
    """Token thresholds for one model id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compression_threshold_tokens: int = Field(
        gt=0, description="Tokens of context above which a background summary is made (tokens)."
    )
    max_context_tokens: int = Field(
        gt=0, description="Hard context ceiling: above it the oldest unprotected messages go (tokens)."
    )

    @model_validator(mode="after")
    def _threshold_below_ceiling(self) -> ModelThreshold:
        if self.compression_threshold_tokens > self.max_context_tokens:
            raise ValueError(
                f"compression_threshold_tokens ({self.compression_threshold_tokens}) must not exceed "
                f"max_context_tokens ({self.max_context_tokens})"
            )
        return self


def _pair(window: int, ratio: float = 0.7) -> dict[str, int]:
    return {"compression_threshold_tokens": int(window * ratio), "max_context_tokens": window}


# Recommended thresholds: compress at ~70% of the model's context window (seed 002 advises 50–70%).
DEFAULT_MODEL_THRESHOLDS: dict[str, dict[str, int]] = {
    "gpt-4": {"compression_threshold_tokens": 8000, "max_context_tokens": 32000},
    "gpt-4-turbo": _pair(128000),
    "gpt-4o": _pair(128000),
    "gpt-4o-mini": _pair(128000),
    "claude-3-5-sonnet": _pair(200000),
    "claude-3-5-haiku": _pair(200000),
    "gemini-1.5-pro": _pair(2097152),
    "gemini-1.5-flash": _pair(1048576),
    "gemini-2.0-flash": _pair(1048576),
    "gemini-2.5-flash": {"compression_threshold_tokens": 734000, "max_context_tokens": 1048576},
    "gemini-2.5-pro": {"compression_threshold_tokens": 734000, "max_context_tokens": 1048576},
    "qwen2.5": _pair(131072),
    "qwen3": _pair(131072),
    "deepseek-v3": _pair(65536),
    "deepseek-chat": _pair(65536),
}


def normalise_model_id(model_id: str) -> str:
    """Strip what a connection or a pipe adds in front of a model id (`echo.`, `models/`)."""
    model_id = model_id.strip()
    for prefix in ("echo.", "models/"):
        if model_id.startswith(prefix):
            model_id = model_id[len(prefix) :]
    return model_id


def lookup_threshold(
    table: Mapping[str, ModelThreshold], model_id: str | None, base_model_id: str | None = None
) -> ModelThreshold | None:
    """The thresholds of `model_id`, else of its base model, else None (use the global valves)."""
    for candidate in (model_id, base_model_id):
        if not candidate:
            continue
        for key in (candidate, normalise_model_id(candidate)):
            if key in table:
                return table[key]
    return None
