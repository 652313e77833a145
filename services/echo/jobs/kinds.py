"""The job kinds of ECHO and the policy each runs under by default.

Every slow step of a chat turn is one of these (DESIGN §5). A kind is a metric label and part of
the idempotency key's scope: `(kind, idempotency_key)` is unique in a tenant.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from echo.jobs import domain

if TYPE_CHECKING:
    from echo.config.settings import Settings
    from echo.jobs.distill import MemoryBackends
    from echo.jobs.registry import Registry
    from echo.openwebui.client import OpenWebUI
    from echo.store.pool import Store

__all__ = ["DISTILL", "MAP_REDUCE", "MERGE", "POLICIES", "SUMMARY", "builtin_registry", "default_policy"]

SUMMARY = "summary"  # compress a conversation prefix into a summary (seed 002)
DISTILL = "distill"  # distill memories from a window of turns (seed 000, memory filter)
MAP_REDUCE = "map_reduce"  # summarise a big attachment chunk by chunk (seed 000, context filter)
MERGE = "merge"  # merge near-duplicate memories

# LLM-bound kinds: 5 attempts ride out a provider incident of several minutes with the default backoff
# (5, 10, 20, 40 s); map-reduce jobs are long and memory-hungry, so fewer at once and fewer retries.
# Timeouts: one LLM call may take up to ECHO_LLM_TIMEOUT_SECONDS (120 s) plus 60 s of retry waits, so
# 300 s covers a summary, a distillation or a merge with room; a map-reduce makes one call per chunk
# (several at once), so 900 s. Past its timeout an attempt is cancelled and counted as failed.
# Concurrency: the LLM-bound kinds mostly wait on the provider, so a worker started with a larger
# --concurrency lets each take a share of it (summary and distill half each, merge a quarter: no kind
# starves the others); map-reduce holds whole files in memory and keeps its 2.
POLICIES = MappingProxyType(
    {
        SUMMARY: domain.KindPolicy(max_attempts=5, concurrency=4, timeout_seconds=300, concurrency_share=0.5),
        DISTILL: domain.KindPolicy(max_attempts=5, concurrency=4, timeout_seconds=300, concurrency_share=0.5),
        MAP_REDUCE: domain.KindPolicy(max_attempts=3, concurrency=2, timeout_seconds=900),
        MERGE: domain.KindPolicy(max_attempts=5, concurrency=2, timeout_seconds=300, concurrency_share=0.25),
    }
)


def default_policy(kind: str) -> domain.KindPolicy:
    """The policy of a known kind, else the generic one."""
    return POLICIES.get(kind, domain.KindPolicy())


def builtin_registry(
    settings: Settings, store: Store, *, memory_backends: MemoryBackends | None = None
) -> Registry:
    """The handlers `echoctl worker` and the embedded worker run, built with `settings` and `store`.

    `summary` (context compression): the conversation store and the LLM of background work
    (`echo.llm.factory`, built on the first job; a handler that holds one has `aclose()`).
    `distill` (memory): the stores, the LLM, and `memory_backends` (the embedder and vector store;
    default: the worker's own, opened from `settings` on the first job).
    `map_reduce` (attachments): the file registry, the same embedder and vector store, the LLM, and
    Open WebUI's files API when it is configured.
    """
    from echo.jobs import distill, map_reduce, summary
    from echo.jobs import memory_backends as backends_module
    from echo.jobs.registry import Registry
    from echo.llm import factory
    from echo.store import conversations

    registry = Registry()
    policy = default_policy(SUMMARY)
    registry.register(
        SUMMARY,
        summary.SummaryHandler(
            conversations.Conversations(store),
            lambda: factory.llm_from_settings(settings),
            max_attempts=policy.max_attempts,
            default_model=settings.llm_model,
        ),
        policy=policy,
    )
    backends = memory_backends or backends_module.SettingsBackends(settings)
    registry.register(
        DISTILL,
        distill.DistillHandler(store, lambda: factory.llm_from_settings(settings), backends),
        policy=default_policy(DISTILL),
    )
    registry.register(
        MAP_REDUCE,
        map_reduce.MapReduceHandler(
            store,
            lambda: factory.llm_from_settings(settings),
            backends,
            _files_api(settings),
            max_attempts=default_policy(MAP_REDUCE).max_attempts,
        ),
        policy=default_policy(MAP_REDUCE),
    )
    return registry


def _files_api(settings: Settings) -> OpenWebUI | None:
    """Open WebUI's files API when ECHO_OPENWEBUI_URL and ECHO_OPENWEBUI_API_KEY are set."""
    from echo.openwebui import client

    if not settings.openwebui_url or settings.openwebui_api_key is None:
        return None
    return client.OpenWebUI(
        settings.openwebui_url, settings.openwebui_api_key.get_secret_value(), timeout_s=60.0
    )
