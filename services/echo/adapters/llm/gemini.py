"""``GeminiLLM``: the ``LLM`` port on Google Gemini through the google-genai SDK.

A JSON request sets ``response_mime_type="application/json"`` and ``response_schema`` (the JSON
Schema reduced to the keywords Gemini's schema accepts). The answer text is read by
``responses.extract_text`` from the response dumped to JSON, so thought parts are never taken as
the answer and an empty answer reports the response's structure. Errors are translated by
``gemini_chat.translate_error``; the SDK's own retries stay off and ``calls.generate`` retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from google import genai
from google.genai import types

from echo.adapters.llm import calls, gemini_chat, responses, retries
from echo.domain.openai_to_gemini import gemini_model_id
from echo.ports.llm import LLMRequest, LLMResult, Usage

__all__ = ["GeminiLLM", "gemini_schema"]

# JSON Schema keyword -> Gemini Schema field; anything else ($schema, $id, const, examples…) is dropped.
_SCHEMA_KEYS = {
    "type": "type",
    "format": "format",
    "title": "title",
    "description": "description",
    "nullable": "nullable",
    "enum": "enum",
    "default": "default",
    "example": "example",
    "pattern": "pattern",
    "minimum": "minimum",
    "maximum": "maximum",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
    "minProperties": "min_properties",
    "maxProperties": "max_properties",
    "required": "required",
    "propertyOrdering": "property_ordering",
}
_NOT_THE_ANSWER = {"sdk_http_response", "automatic_function_calling_history"}


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema reduced to what ``types.Schema`` accepts (``["x", "null"]`` types become nullable)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            kinds = [v for v in value if v != "null"]
            out["type"] = kinds[0] if kinds else "null"
            if "null" in value:
                out["nullable"] = True
        elif key in _SCHEMA_KEYS:
            out[_SCHEMA_KEYS[key]] = value
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {k: gemini_schema(v) for k, v in value.items() if isinstance(v, Mapping)}
        elif key == "items" and isinstance(value, Mapping):
            out["items"] = gemini_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out["any_of"] = [gemini_schema(v) for v in value if isinstance(v, Mapping)]
    if "properties" in out and "property_ordering" not in out:
        out["property_ordering"] = list(out["properties"])  # Gemini otherwise sorts them alphabetically
    return out


class GeminiLLM:
    """Background generations on the Gemini API (``base_url`` points the SDK elsewhere, e.g. a fake)."""

    provider_name = "gemini"

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        policy: retries.RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        options = types.HttpOptions(base_url=base_url, timeout=round(timeout_s * 1000))
        self._client = genai.Client(api_key=api_key, http_options=options).aio
        self._policy = policy or retries.RetryPolicy()
        self._sleep = sleep

    @staticmethod
    def build(request: LLMRequest) -> tuple[str, list[types.Content], types.GenerateContentConfig]:
        """``(model, contents, config)`` for ``generate_content``; pure."""
        contents = [
            types.Content(role="model" if role == "assistant" else "user", parts=[types.Part(text=text)])
            for role, text in request.messages
        ]
        if request.media:
            last_user = max(i for i, (role, _) in enumerate(request.messages) if role == "user")
            media = [types.Part.from_bytes(data=m.data, mime_type=m.mime_type) for m in request.media]
            contents[last_user].parts = [*media, *(contents[last_user].parts or [])]
        config = types.GenerateContentConfig(
            system_instruction=request.system or None,
            temperature=request.temperature,
            max_output_tokens=request.max_output_tokens,
        )
        if request.json_schema is not None:
            config.response_mime_type = "application/json"
            config.response_schema = types.Schema.model_validate(gemini_schema(request.json_schema))
        return gemini_model_id(request.model), contents, config

    async def generate(self, request: LLMRequest) -> LLMResult:
        model, contents, config = self.build(request)

        async def attempt() -> calls.Answer:
            try:
                response = await self._client.models.generate_content(
                    model=model, contents=contents, config=config
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                domain = gemini_chat.translate_error(exc)
                if domain is None:
                    raise
                raise domain from exc
            usage = gemini_chat.map_usage(response.usage_metadata) or {}
            reason = response.candidates[0].finish_reason if response.candidates else None
            return calls.Answer(
                text=responses.extract_text(
                    response.model_dump(mode="json", exclude_none=True, exclude=_NOT_THE_ANSWER)
                ),
                usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
                finish_reason=gemini_chat.map_finish_reason(reason),
            )

        return await calls.generate(self.provider_name, request, attempt, self._policy, sleep=self._sleep)

    async def aclose(self) -> None:
        await self._client.aclose()
