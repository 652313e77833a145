"""What the LLM tests share: the seed's distillation schema, a request builder, metric samples."""

from __future__ import annotations

from typing import Any

from fakes.metric_samples import sample

from echo.adapters.llm.retries import RetryPolicy
from echo.ports.llm import LLMRequest

__all__ = ["DISTILLATION_SCHEMA", "FAST_RETRIES", "request", "sample"]

# Seed 000: summary (100–1000 words), memory_importance 1–5, a short technical memory_id, 3–5 tags.
DISTILLATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "100–1000 words"},
        "memory_importance": {"type": "integer", "minimum": 1, "maximum": 5},
        "memory_id": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 5},
    },
    "required": ["summary", "memory_importance", "memory_id", "tags"],
}

FAST_RETRIES = RetryPolicy(max_retries=3, max_total_wait_s=5, base_delay_s=0.01, max_delay_s=0.05)


def request(model: str, text: str = "Summarise this.", **fields: Any) -> LLMRequest:
    """A request to `model` with one user message; `fields` override anything."""
    base: dict[str, Any] = {"model": model, "messages": [("user", text)], "purpose": "summary"}
    return LLMRequest(**{**base, **fields})
