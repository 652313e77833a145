"""``OpenAICompatibleLLM``: the ``LLM`` port over httpx on any OpenAI-compatible endpoint.

It sends ``POST {base_url}/chat/completions`` (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp, a
gateway…) and reads the answer with ``responses.extract_text``, which accepts the shapes such
endpoints really return and ignores reasoning.

Every call carries ``max_tokens``: the request's own bound (a summary's target, at most
``max_summary_tokens``), under the cap of its kind (``ANSWER_TOKENS``: a distillation is at most
``MAX_FACTS`` fact-sized memories, a merge one fact) and under ``max_output_tokens`` when set, so a
weak model that never closes its JSON is stopped at a known length instead of running to the timeout.

A JSON request sets ``response_format`` in the strongest form of ``JSON_MODES`` the server takes,
starting from ``json_mode``: ``json_schema`` (OpenAI's structured outputs; vLLM, Ollama and
llama.cpp's ``llama-server`` turn it into a grammar), ``json_object_schema`` (``json_object`` with a
``schema`` key: llama-cpp-python's server and llama-server constrain the answer to it), or
``json_object`` (every such server, DeepSeek included; the schema then travels in the system text).
A server that refuses a form (a 400 or 422, or an error naming ``response_format``: llama-cpp-python's
server answers ``json_schema`` with a 500 saying so) is asked again at once in the next one, and the
first form that works is kept for the provider's later calls.
408, 429 and 5xx answers, timeouts and transport failures are retryable ``LLMError``s carrying the
``Retry-After`` header; other 4xx answers are not.
"""

from __future__ import annotations

import asyncio
import json
import re
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import httpx
import structlog

from echo.adapters.llm import calls, responses, retries
from echo.adapters.llm.errors import LLMError
from echo.domain.memory import distillation
from echo.ports.llm import LLMRequest, LLMResult, Usage

__all__ = ["ANSWER_TOKENS", "JSON_MODES", "JsonMode", "OpenAICompatibleLLM", "chat_body", "max_tokens"]

log = structlog.get_logger("echo.llm")

JsonMode = Literal["json_schema", "json_object_schema", "json_object"]
JSON_MODES: tuple[JsonMode, ...] = ("json_schema", "json_object_schema", "json_object")
"""The forms of ``response_format``, strongest first: a refused one gives way to the next."""

_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")
# A memory as a model writes it, pretty-printed: its fact (at most MAX_MEMORY_TOKENS o200k tokens), the
# keys, memory_id, importance, 3-5 tags and the indentation (about 60 more); then a quarter more for
# the smaller vocabularies of local models (SmolLM2's 49k), which spend more tokens on the same text.
_MEMORY_TOKENS = (distillation.MAX_MEMORY_TOKENS + 64) * 5 // 4
ANSWER_TOKENS: Mapping[str, int] = types.MappingProxyType(
    {
        "distill": 16 + distillation.MAX_FACTS * _MEMORY_TOKENS,  # at most MAX_FACTS memories
        "merge": 2 * (distillation.MAX_MEMORY_TOKENS + 16) * 5 // 4,  # {"summary": one fact}, twice over
    }
)
"""The longest answer each JSON call kind (``LLMRequest.purpose``) needs, in tokens, with slack."""


def max_tokens(request: LLMRequest, ceiling: int | None = None) -> int:
    """The ``max_tokens`` sent for ``request``: its own bound, its kind's cap, ``ceiling``; pure."""
    cap = min(request.max_output_tokens, ANSWER_TOKENS.get(request.purpose, request.max_output_tokens))
    return min(cap, ceiling) if ceiling is not None else cap


def chat_body(
    request: LLMRequest, json_mode: JsonMode = "json_schema", ceiling: int | None = None
) -> dict[str, Any]:
    """The chat-completions body for ``request``; pure."""
    system = request.system
    body: dict[str, Any] = {"model": request.model, "stream": False}
    if request.json_schema is not None:
        schema = dict(request.json_schema)
        if json_mode == "json_schema":
            name = _SCHEMA_NAME.sub("_", request.purpose)[:64] or "answer"
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        elif json_mode == "json_object_schema":
            body["response_format"] = {"type": "json_object", "schema": schema}
        else:
            body["response_format"] = {"type": "json_object"}
            instruction = "Answer with one JSON object that matches this JSON Schema:\n" + json.dumps(schema)
            system = f"{system}\n\n{instruction}" if system else instruction
    messages = [{"role": "system", "content": system}] if system else []
    messages += [{"role": role, "content": text} for role, text in request.messages]
    body.update(messages=messages, temperature=request.temperature, max_tokens=max_tokens(request, ceiling))
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


def _refuses_form(response: httpx.Response) -> bool:
    """A refusal of the request's ``response_format``: a 400 or 422, or any error naming the field
    (llama-cpp-python's server answers an unknown form with a 500 carrying its validation error)."""
    status = response.status_code
    return status in (400, 422) or (status >= 400 and "response_format" in _error_message(response))


def _status_error(response: httpx.Response) -> LLMError:
    status = response.status_code
    retryable = status in (408, 429) or status >= 500
    retry_after = retries.parse_retry_after(response.headers.get("retry-after"))
    return LLMError(_error_message(response), status, retryable, retry_after_s=retry_after)


class OpenAICompatibleLLM:
    """Background generations on an OpenAI-compatible server; ``base_url`` ends before ``/chat``.

    ``json_mode`` is the first form of ``response_format`` tried (``JSON_MODES``); ``max_output_tokens``
    is a ceiling on every call's ``max_tokens`` (None: each call's own bound and its kind's cap).
    """

    provider_name = "openai"

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 120.0,
        json_mode: JsonMode = "json_schema",
        max_output_tokens: int | None = None,
        policy: retries.RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError("max_output_tokens: expected a positive number of tokens or None")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout_s, transport=transport
        )
        self._json_mode: JsonMode = json_mode
        self._ceiling = max_output_tokens
        self._policy = policy or retries.RetryPolicy()
        self._sleep = sleep

    @property
    def json_mode(self) -> JsonMode:
        """The form of ``response_format`` the next JSON request is sent in first."""
        return self._json_mode

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return await self._http.post("chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise LLMError(f"LLM call timed out: {exc!r}", None, True) from exc
        except httpx.TransportError as exc:
            raise LLMError(f"LLM transport error: {exc!r}", None, True) from exc

    async def _answered(self, request: LLMRequest) -> httpx.Response:
        """The first answer that is not a refusal of the JSON form (``_refuses_form``); that form is kept."""
        first = self._json_mode
        modes = JSON_MODES[JSON_MODES.index(first) :] if request.json_schema is not None else (first,)
        for n, mode in enumerate(modes, start=1):
            response = await self._post(chat_body(request, mode, self._ceiling))
            if n == len(modes) or not _refuses_form(response):
                if response.status_code < 400 and mode != first:
                    log.warning("llm_json_mode", provider=self.provider_name, kept=mode, refused=first)
                    self._json_mode = mode
                return response
            log.info(
                "llm_json_mode_refused",
                provider=self.provider_name,
                mode=mode,
                status=response.status_code,
                error=_error_message(response)[:300],
            )
        raise AssertionError("unreachable: the last form's answer is returned")

    async def generate(self, request: LLMRequest) -> LLMResult:
        if request.media:
            raise LLMError("the OpenAI-compatible provider is given no images, audio or video", None, False)

        async def attempt() -> calls.Answer:
            response = await self._answered(request)
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
