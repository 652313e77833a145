"""The job handlers of every capability, as `echoctl worker` and the embedded worker run them.

The handlers receive the tenant's store as the store port's repositories
(`echo.ports.backends.Repositories`: PostgreSQL's from `echo.capabilities.backends.on_store`, or the
in-memory store's in a test), never an adapter of the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from echo.domain import kinds

if TYPE_CHECKING:
    from echo.adapters.openwebui.client import OpenWebUI
    from echo.config.settings import Settings
    from echo.ports.backends import Index, Repositories
    from echo.queue.registry import Registry

__all__ = ["builtin_registry"]


def builtin_registry(
    settings: Settings, repositories: Repositories, *, index: Index | None = None
) -> Registry:
    """The handlers `echoctl worker` and the embedded worker run, built with `settings` and the
    tenant's `repositories`, each with its kind's payload model (the worker validates a job's payload
    into it first).

    `summary` (context compression): the conversation store and the LLM of background work
    (`echo.adapters.llm.factory`, built on the first job; a handler that holds one has `aclose()`).
    `distill` (memory): the conversation and memory stores and their transactions, the LLM, and
    `index` (the backends' embedder and vector store, `echo.ports.backends.Index`; default: the
    worker's own, opened from `settings` on the first job).
    `map_reduce` (attachments): the file registry, the same embedder and vector store, the LLM, and
    Open WebUI's files API when it is configured.
    """
    from echo.adapters.llm import factory
    from echo.capabilities.compression import payloads as compression_payloads
    from echo.capabilities.compression import summary
    from echo.capabilities.context import map_reduce
    from echo.capabilities.context import payloads as context_payloads
    from echo.capabilities.memory import backends as backends_module
    from echo.capabilities.memory import distill
    from echo.capabilities.memory import payloads as memory_payloads
    from echo.queue.registry import Registry

    registry = Registry()
    policy = kinds.default_policy(kinds.SUMMARY)
    registry.register(
        kinds.SUMMARY,
        summary.SummaryHandler(
            repositories.conversations,
            lambda: factory.llm_from_settings(settings),
            max_attempts=policy.max_attempts,
            default_model=settings.llm_model,
        ),
        payload=compression_payloads.SummaryPayload,
        policy=policy,
    )
    backends = index or backends_module.SettingsBackends(settings)
    registry.register(
        kinds.DISTILL,
        distill.DistillHandler(
            repositories.conversations,
            repositories.memories,
            repositories.transactions,
            lambda: factory.llm_from_settings(settings),
            backends,
        ),
        payload=memory_payloads.DistillPayload,
        policy=kinds.default_policy(kinds.DISTILL),
    )
    registry.register(
        kinds.MAP_REDUCE,
        map_reduce.MapReduceHandler(
            repositories.attachments,
            lambda: factory.llm_from_settings(settings),
            backends,
            _files_api(settings),
            max_attempts=kinds.default_policy(kinds.MAP_REDUCE).max_attempts,
        ),
        payload=context_payloads.MapReducePayload,
        policy=kinds.default_policy(kinds.MAP_REDUCE),
    )
    return registry


def _files_api(settings: Settings) -> OpenWebUI | None:
    """Open WebUI's files API when ECHO_OPENWEBUI_URL and ECHO_OPENWEBUI_API_KEY are set."""
    from echo.adapters.openwebui import client

    if not settings.openwebui_url or settings.openwebui_api_key is None:
        return None
    return client.OpenWebUI(
        settings.openwebui_url, settings.openwebui_api_key.get_secret_value(), timeout_s=60.0
    )
