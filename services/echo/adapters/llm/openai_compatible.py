"""``OpenAICompatibleLLM``: the ``LLM`` port over httpx on any OpenAI-compatible endpoint.

It sends ``POST {base_url}/chat/completions`` (DeepSeek, a local vLLM, a gateway…) and reads the
answer with ``responses.extract_text``, which accepts the shapes such endpoints really return and
ignores reasoning. A JSON request sets ``response_format``: ``json_object`` (the widely supported
mode; the schema then travels in the system text) or ``json_schema`` for servers that enforce one.
408, 429 and 5xx answers, timeouts and transport failures are retryable ``LLMError``s carrying the
``Retry-After`` header; other 4xx answers are not.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import httpx

from echo.adapters.llm import calls, responses, retries
from echo.adapters.llm.errors import LLMError
from echo.ports.llm import LLMRequest, LLMResult, Usage

__all__ = ["JsonMode", "OpenAICompatibleLLM", "chat_body"]

JsonMode = Literal["json_object", "json_schema"]
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


def chat_body(request: LLMRequest, json_mode: JsonMode = "json_object") -> dict[str, Any]:
    """The chat-completions body for ``request``; pure."""
    system = request.system
    body: dict[str, Any] = {"model": request.model, "stream": False}
    if request.json_schema is not None:
        schema = dict(request.json_schema)
        if json_mode == "json_schema":
            name = _SCHEMA_NAME.sub("_", request.purpose)[:64] or "answer"
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        else:
            body["response_format"] = {"type": "json_object"}
            instruction = "Answer with one JSON object that matches this JSON Schema:\n" + json.dumps(schema)
            system = f"{system}\n\n{instruction}" if system else instruction
    messages = [{"role": "system", "content": system}] if system else []
    messages += [{"role": role, "content": text} for role, text in request.messages]
    body.update(messages=messages, temperature=request.temperature, max_tokens=request.max_output_tokens)
    return body


def _error_message(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    return json.dumps(responses.trim_structure(payload))[:300]


def _status_error(response: httpx.Response) -> LLMError:
    status = response.status_code
    retryable = status in (408, 429) or status >= 500
    retry_after = retries.parse_retry_after(response.headers.get("retry-after"))
    return LLMError(_error_message(response), status, retryable, retry_after_s=retry_after)


class OpenAICompatibleLLM:
    """Background generations on an OpenAI-compatible server; ``base_url`` ends before ``/chat``."""

    provider_name = "openai"

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 120.0,
        json_mode: JsonMode = "json_object",
        policy: retries.RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout_s, transport=transport
        )
        self._json_mode = json_mode
        self._policy = policy or retries.RetryPolicy()
        self._sleep = sleep

    async def generate(self, request: LLMRequest) -> LLMResult:
        if request.media:
            raise LLMError("the OpenAI-compatible provider is given no images, audio or video", None, False)
        body = chat_body(request, self._json_mode)

        async def attempt() -> calls.Answer:
            try:
                response = await self._http.post("chat/completions", json=body)
            except httpx.TimeoutException as exc:
                raise LLMError(f"LLM call timed out: {exc!r}", None, True) from exc
            except httpx.TransportError as exc:
                raise LLMError(f"LLM transport error: {exc!r}", None, True) from exc
            if response.status_code >= 400:
                raise _status_error(response)
            try:
                payload = response.json()
            except ValueError as exc:  # a gateway's HTML page: transient more often than not
                message = f"LLM answered non-JSON: {response.text[:200]!r}"
                raise LLMError(message, response.status_code, True) from exc
            prompt, completion = responses.usage_tokens(payload)
            return calls.Answer(
                text=responses.extract_text(payload),
                usage=Usage(prompt, completion),
                finish_reason=responses.finish_reason(payload),
            )

        return await calls.generate(self.provider_name, request, attempt, self._policy, sleep=self._sleep)

    async def aclose(self) -> None:
        await self._http.aclose()
