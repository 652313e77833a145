"""``OfflineLLM``: the ``LLM`` port without a model, so every feature keeps working (DESIGN §1).

Deterministic and without network: a text request gets an extractive summary of its messages (see
``extractive``), in the ``compression_style`` a summary prompt names (``prompts.style_of``); a JSON
request gets an object shaped by its schema. Fields are filled by name —
``summary``/``text``/``content`` an extractive summary (at most 1,300 tokens, about the distillation's
upper bound of 1000 words), ``*importance*`` 1–5 from cues, ``*_id``/``id``/``slug`` a short slug,
``tags``/``keywords`` 3–5 frequent content words — and otherwise by type (enum's first value,
``default``, minimum, empty). The budget is ``max_output_tokens``, in o200k_base tokens: a text
answer never exceeds it; a JSON answer keeps its summary under it less room for the other fields,
and shortens the summary when the whole answer would still exceed it. Usage is estimated in tokens
(``echo.domain.tokens``).

A memory distillation (purpose ``distill``) gets the heuristic distiller's answer instead
(``echo.domain.memory.facts``): the window's statements, one memory each, not a summary.

It says it is degraded everywhere: a warning ``llm_offline`` with the reason when created, the
``echo_llm_offline_total{purpose}`` counter per generation, and ``provider="offline"`` on results.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import structlog

from echo.adapters.llm import calls, retries
from echo.adapters.llm.errors import LLMError
from echo.domain import extractive, tokens
from echo.domain.compression import prompts
from echo.domain.memory import facts
from echo.ports.llm import LLMRequest, LLMResult, Usage
from echo.support import metrics, offload

__all__ = ["OfflineLLM", "fill_schema"]

log = structlog.get_logger("echo.llm")

_SUMMARY_MAX_TOKENS = 1300  # seed 000: a distilled memory summary is 100–1000 words
_JSON_OVERHEAD_TOKENS = 60  # tokens of the budget kept for the other fields of a JSON answer
_JSON_SHRINKS = 4  # times a JSON answer over budget is remade with a shorter summary
_TAGS = ("tags", "keywords", "topics", "labels")
_FALLBACK_TAGS = ("conversation", "context", "notes", "memory", "general")
_NO_RETRY = retries.RetryPolicy(max_retries=0)
DISTILL_PURPOSE = "distill"  # the memory distillation's requests (echo.capabilities.memory.distill)


@dataclass(frozen=True)
class _Source:
    """The text a JSON answer is made from, with its heuristics computed once each."""

    text: str
    budget_tokens: int

    @cached_property
    def summary(self) -> str:
        room = max(self.budget_tokens - _JSON_OVERHEAD_TOKENS, self.budget_tokens // 2)
        budget = max(1, min(room, _SUMMARY_MAX_TOKENS))
        return extractive.summarize(self.text, budget)

    @cached_property
    def slug(self) -> str:
        return extractive.slug(self.text)

    def tags(self, low: int, high: int) -> list[str]:
        found = extractive.keywords(self.text, high)
        padding = [t for t in _FALLBACK_TAGS if t not in found]
        return found + padding[: max(0, low - len(found))]


def _kind(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and "properties" in schema:
        return "object"
    return kind.lower() if isinstance(kind, str) else None  # Gemini spells types in capitals


def fill_schema(schema: Mapping[str, Any], text: str, budget_tokens: int = 2000) -> Any:
    """A value of ``schema`` made from ``text``, its summaries within ``budget_tokens`` tokens."""
    return _fill(schema, _Source(text, budget_tokens))


def _json_answer(schema: Mapping[str, Any], text: str, budget_tokens: int) -> str:
    """``fill_schema`` as JSON; remade with a summary budget cut by the excess while it is too long."""
    budget = budget_tokens
    answer = json.dumps(fill_schema(schema, text, budget), ensure_ascii=False)
    for _ in range(_JSON_SHRINKS):
        excess = tokens.estimate_tokens(answer) - budget_tokens
        if excess <= 0 or budget <= 1:
            break
        budget = max(1, budget - 2 * excess)
        answer = json.dumps(fill_schema(schema, text, budget), ensure_ascii=False)
    return answer


def _fill(schema: Mapping[str, Any], source: _Source, name: str = "") -> Any:
    key = name.lower()
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = _kind(schema)
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return {}
        return {k: _fill(v, source, k) for k, v in properties.items() if isinstance(v, Mapping)}
    if kind == "array":
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        if any(t in key for t in _TAGS):
            most = min(int(high), 5) if high is not None else 5
            return source.tags(min(max(low, 3), most), most)
        items = schema.get("items")
        return [_fill(items if isinstance(items, Mapping) else {}, source) for _ in range(low)]
    if kind in ("integer", "number"):
        low_n, high_n = schema.get("minimum"), schema.get("maximum")
        if any(word in key for word in ("importance", "priority")):
            value: float = extractive.importance(source.text, int(low_n or 1), int(high_n or 5))
        else:
            value = low_n if low_n is not None else 0
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "string":
        return _string(schema, source, key)
    return None


def _string(schema: Mapping[str, Any], source: _Source, key: str) -> str:
    if key == "id" or key.endswith(("_id", "slug")) or key == "key":
        text = source.slug
    elif any(word in key for word in ("summary", "text", "content", "description", "answer", "merged")):
        text = source.summary
    elif key in ("title", "name", "topic"):
        text = " ".join(extractive.keywords(source.text, 4))
    else:
        text = ""
    limit = schema.get("maxLength")
    return text[: int(limit)] if isinstance(limit, int) else text


class OfflineLLM:
    """Heuristic answers for when no language model is configured; ``reason`` says why."""

    provider_name = "offline"

    def __init__(self, reason: str = "no LLM configured") -> None:
        self.reason = reason
        log.warning("llm_offline", reason=reason, effect="extractive summaries, heuristic JSON")

    async def generate(self, request: LLMRequest) -> LLMResult:
        if request.media:
            raise LLMError(
                f"the offline provider reads no images, audio or video ({self.reason})", None, False
            )
        request = dataclasses.replace(request, model="offline")

        def answer() -> calls.Answer:
            metrics.LLM_OFFLINE.labels(request.purpose).inc()
            budget = max(1, request.max_output_tokens)
            if request.json_schema is None:
                style = prompts.style_of(request.system) or "balanced"
                text = extractive.summarize(extractive.material(request.input_text), budget, style)
            elif request.purpose == DISTILL_PURPOSE:  # a window's facts, by the heuristic distiller
                found = facts.heuristic_answer(extractive.material(request.input_text))
                text = json.dumps(found, ensure_ascii=False)
            else:
                text = _json_answer(request.json_schema, request.input_text, budget)
            prompt = tokens.estimate_tokens(f"{request.system}\n{request.input_text}")
            usage = Usage(prompt, tokens.estimate_tokens(text))
            return calls.Answer(text=text, usage=usage, finish_reason="stop")

        async def attempt() -> calls.Answer:
            # CPU in proportion to the input (a summary window of thousands of messages): on a worker
            # thread, so the event loop (the hooks' own, with the embedded worker) stays free.
            return await offload.to_thread(answer)

        return await calls.generate(self.provider_name, request, attempt, _NO_RETRY)

    async def aclose(self) -> None:
        return None
