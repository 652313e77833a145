"""Chat completions on Google Gemini through the google-genai SDK, in OpenAI terms.

``GeminiChat`` takes an OpenAI chat-completions body (see ``openai_to_gemini``) and answers with
``ChatDelta`` values: thought parts go to ``reasoning``, other text to ``content``, Gemini finish
reasons become OpenAI ones and usage is given in OpenAI keys. A stream yields the text deltas as
they arrive, then one last delta carrying ``finish_reason`` and ``usage``. Each delta also carries
the raw ``parts`` of its chunk as plain data (``echo.domain.shadow.parts.PartDict``: thought signatures as
bytes, function calls with their arguments as Gemini wrote them), which the pipe keeps in the rich
shadow; ``stream_contents`` takes contents and a config already in Gemini's shapes (the pipe's
suture builds them).

Gemini's JSON may carry lone surrogate escapes (``\\ud800``): valid JSON, but no UTF-8 can encode such
a text, so the answer could be neither sent on (a 500, or a stream cut short) nor stored. Each text,
function-call name and argument has its lone surrogates replaced by U+FFFD as it is read
(``echo.domain.text.encodable``), and the answer goes on; NUL, which UTF-8 and JSON carry, is left to the
stores.

Every failure of the call (API errors, transport errors, timeouts) surfaces as one ``LLMError``
saying whether a retry may succeed (429, 408, 5xx, timeouts and connection failures);
``LLMError`` lives in ``echo.adapters.llm.errors`` and is re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from google import genai
from google.genai import errors, types

from echo.adapters.llm.errors import LLMError
from echo.adapters.llm.retries import parse_retry_after
from echo.domain import openai_to_gemini
from echo.domain import text as text_module
from echo.domain.shadow.parts import ContentDict, PartDict

__all__ = [
    "ChatDelta",
    "GeminiChat",
    "LLMError",
    "map_finish_reason",
    "map_usage",
    "part_dict",
    "sdk_request",
    "translate_error",
]


def _optional(module: str, name: str) -> tuple[type[Exception], ...]:
    """The exception class ``module.name`` if that transport is installed, else nothing."""
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return ()
    return (cls,) if isinstance(cls, type) and issubclass(cls, Exception) else ()


# The SDK sends through aiohttp when it is installed, else httpx2 (its default) or httpx.
_TIMEOUT_ERRORS: tuple[type[Exception], ...] = (
    TimeoutError,
    *_optional("httpx2", "TimeoutException"),
    *_optional("httpx", "TimeoutException"),
)
_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    *_optional("httpx2", "TransportError"),
    *_optional("httpx", "TransportError"),
    *_optional("aiohttp", "ClientError"),
)
_HTTP_ERRORS: tuple[type[Exception], ...] = (
    *_optional("httpx2", "HTTPError"),
    *_optional("httpx", "HTTPError"),
)
_T = TypeVar("_T")
_CONTENT_FILTER = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)


@dataclass(frozen=True)
class ChatDelta:
    """A piece of an answer; usage uses the OpenAI keys prompt_tokens, completion_tokens, total_tokens.
    ``parts``: the chunk's raw parts (not compared: two deltas are equal when they say the same)."""

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    parts: tuple[PartDict, ...] = field(default=(), compare=False)


def map_finish_reason(reason: types.FinishReason | str | None) -> str:
    """Gemini finish reason -> OpenAI's: stop, length or content_filter."""
    name = getattr(reason, "value", reason) or "STOP"
    if name == "MAX_TOKENS":
        return "length"
    return "content_filter" if name in _CONTENT_FILTER else "stop"


def map_usage(usage: types.GenerateContentResponseUsageMetadata | None) -> dict[str, int] | None:
    """Gemini usage metadata -> OpenAI usage; thinking tokens count as completion tokens."""
    if usage is None:
        return None
    prompt = usage.prompt_token_count or 0
    completion = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    total = usage.total_token_count or prompt + completion
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def part_dict(part: types.Part) -> PartDict | None:
    """One SDK part as plain data; None for kinds the pipe does not keep (code execution, files)."""
    out: PartDict = {}
    if part.function_call is not None:
        out["function_call"] = {
            "name": text_module.encodable(part.function_call.name or ""),
            "args": text_module.encodable_value(dict(part.function_call.args or {})),
        }
    elif part.inline_data is not None and part.inline_data.data is not None:
        out["inline_data"] = {"mime_type": part.inline_data.mime_type or "", "data": part.inline_data.data}
    elif part.text is not None:
        out["text"] = text_module.encodable(part.text)
    elif part.thought_signature:
        out["text"] = ""  # a signature on a part of its own
    else:
        return None
    if part.thought:
        out["thought"] = True
    if part.thought_signature:
        out["thought_signature"] = part.thought_signature
    return out


def _split(response: types.GenerateContentResponse) -> tuple[str, str, str | None, tuple[PartDict, ...]]:
    """``(content, reasoning, gemini finish reason, parts)`` of one response or stream chunk."""
    if not response.candidates:
        blocked = response.prompt_feedback and response.prompt_feedback.block_reason
        return "", "", "SAFETY" if blocked else None, ()
    candidate = response.candidates[0]
    content: list[str] = []
    reasoning: list[str] = []
    parts: list[PartDict] = []
    for part in (candidate.content.parts if candidate.content else None) or []:
        if part.text and part.function_call is None:
            (reasoning if part.thought else content).append(text_module.encodable(part.text))
        kept = part_dict(part)
        if kept is not None:
            parts.append(kept)
    reason = candidate.finish_reason
    return "".join(content), "".join(reasoning), getattr(reason, "value", reason), tuple(parts)


def _retry_after(exc: errors.APIError) -> float | None:
    headers = getattr(exc.response, "headers", None)
    return parse_retry_after(headers.get("retry-after") if headers is not None else None)


def translate_error(exc: BaseException) -> LLMError | None:
    """The domain error for an SDK or transport failure; None for anything else."""
    if isinstance(exc, errors.APIError):
        code = exc.code if isinstance(exc.code, int) else None
        retryable = code is not None and (code in (408, 429) or code >= 500)
        return LLMError(exc.message or str(exc), code, retryable, retry_after_s=_retry_after(exc))
    if isinstance(exc, _TIMEOUT_ERRORS):
        return LLMError(f"Gemini call timed out: {exc!r}", None, True)
    if isinstance(exc, _TRANSPORT_ERRORS):
        return LLMError(f"Gemini transport error: {exc!r}", None, True)
    if isinstance(exc, _HTTP_ERRORS):
        return LLMError(f"Gemini HTTP error: {exc!r}", None, False)
    return None


def sdk_request(body: Mapping[str, Any]) -> tuple[str, list[types.Content], types.GenerateContentConfig]:
    """``(model, contents, config)`` in the SDK's types for an OpenAI body; ``ValueError`` names the field."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ValueError("model: expected a non-empty string")
    contents, config = openai_to_gemini.to_gemini_request(body)
    return (
        openai_to_gemini.gemini_model_id(model),
        [types.Content.model_validate(content) for content in contents],
        types.GenerateContentConfig.model_validate(config),
    )


class GeminiChat:
    """OpenAI-shaped chat completions on the Gemini API (``base_url`` points it elsewhere, e.g. a fake)."""

    def __init__(self, api_key: str, *, base_url: str | None = None, timeout_s: float = 120.0) -> None:
        options = types.HttpOptions(base_url=base_url, timeout=round(timeout_s * 1000))
        self._client = genai.Client(api_key=api_key, http_options=options).aio

    @staticmethod
    def _request(body: Mapping[str, Any]) -> tuple[str, list[types.Content], types.GenerateContentConfig]:
        model, contents, config = sdk_request(body)
        config.thinking_config = types.ThinkingConfig(include_thoughts=True)
        return model, contents, config

    @staticmethod
    async def _call(call: Callable[[], Awaitable[_T]]) -> _T:
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            domain = translate_error(exc)
            if domain is None:
                raise
            raise domain from exc

    async def complete(self, body: Mapping[str, Any]) -> ChatDelta:
        """One non-streamed call; the whole answer in one delta."""
        model, contents, config = self._request(body)
        response = await self._call(
            lambda: self._client.models.generate_content(model=model, contents=contents, config=config)
        )
        content, reasoning, reason, parts = _split(response)
        return ChatDelta(
            content, reasoning, map_finish_reason(reason), map_usage(response.usage_metadata), parts
        )

    async def stream(self, body: Mapping[str, Any]) -> AsyncIterator[ChatDelta]:
        """Text deltas as Gemini streams them, then a final delta with ``finish_reason`` and ``usage``."""
        model, contents, config = self._request(body)
        async for delta in self._stream(model, contents, config):
            yield delta

    def stream_contents(
        self, model: str, contents: Sequence[ContentDict], config: Mapping[str, Any]
    ) -> AsyncIterator[ChatDelta]:
        """``stream`` for contents and a ``GenerateContentConfig`` in plain data (snake_case fields:
        ``system_instruction``, sampling fields, ``tools``, ``tool_config``); thoughts are included
        and automatic function calling is off (the caller runs the tools)."""
        sdk_contents = [types.Content.model_validate(content) for content in contents]
        sdk_config = types.GenerateContentConfig.model_validate(dict(config))
        sdk_config.thinking_config = types.ThinkingConfig(include_thoughts=True)
        sdk_config.automatic_function_calling = types.AutomaticFunctionCallingConfig(disable=True)
        return self._stream(openai_to_gemini.gemini_model_id(model), sdk_contents, sdk_config)

    async def _stream(
        self, model: str, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> AsyncIterator[ChatDelta]:
        chunks = await self._call(
            lambda: self._client.models.generate_content_stream(model=model, contents=contents, config=config)
        )
        iterator = aiter(chunks)
        reason: str | None = None
        usage: dict[str, int] | None = None
        try:
            while True:
                try:
                    chunk = await self._call(lambda: anext(iterator))
                except StopAsyncIteration:
                    break
                content, reasoning, chunk_reason, parts = _split(chunk)
                reason = chunk_reason or reason
                usage = map_usage(chunk.usage_metadata) or usage
                if content or reasoning or parts:
                    yield ChatDelta(content=content, reasoning=reasoning, parts=parts)
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                # Releases the HTTP response when the consumer stops early. The SDK's aiohttp stream
                # may still be finishing its own step then; it is released with the session instead.
                with contextlib.suppress(RuntimeError):
                    await close()
        yield ChatDelta(finish_reason=map_finish_reason(reason), usage=usage)

    async def aclose(self) -> None:
        """Releases the SDK's connection pools."""
        await self._client.aclose()
