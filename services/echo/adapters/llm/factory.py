"""The LLM of background work, chosen from settings at the entrypoint (DESIGN §1).

Rule: ``llm_provider=openai`` (with ``openai_base_url``) gives the OpenAI-compatible provider;
``gemini``, or ``auto`` with a Gemini key, gives Gemini; anything else gives the offline provider,
which logs ``llm_offline`` with the reason. Settings refuse ``openai`` without a base URL and
``gemini`` without a key at load time, so no misconfiguration silently falls back to offline.
"""

from __future__ import annotations

from echo.adapters.llm import gemini, offline, openai_compatible, retries
from echo.config.settings import Settings
from echo.ports.llm import LLM

__all__ = ["llm_from_settings", "retry_policy"]


def retry_policy(settings: Settings) -> retries.RetryPolicy:
    return retries.RetryPolicy(
        max_retries=settings.llm_max_retries, max_total_wait_s=settings.llm_retry_max_wait_seconds
    )


def llm_from_settings(settings: Settings) -> LLM:
    """A provider ready to use; the caller closes it with ``aclose()``."""
    policy = retry_policy(settings)
    if settings.llm_provider == "openai" and settings.openai_base_url:
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return openai_compatible.OpenAICompatibleLLM(
            settings.openai_base_url,
            key,
            timeout_s=settings.llm_timeout_seconds,
            json_mode=settings.openai_json_mode,
            max_output_tokens=settings.openai_max_output_tokens,
            policy=policy,
        )
    if settings.llm_provider in ("auto", "gemini") and settings.gemini_api_key is not None:
        return gemini.GeminiLLM(
            settings.gemini_api_key.get_secret_value(),
            base_url=settings.gemini_base_url,
            timeout_s=settings.llm_timeout_seconds,
            policy=policy,
        )
    if settings.llm_provider == "offline":
        reason = "ECHO_LLM_PROVIDER=offline"
    else:
        reason = (
            "no Gemini API key (ECHO_GEMINI_API_KEY / GEMINI_API_KEY) and ECHO_LLM_PROVIDER is not openai"
        )
    return offline.OfflineLLM(reason)
