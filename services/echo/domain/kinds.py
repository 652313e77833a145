"""The job kinds of ECHO and the policy each runs under by default.

Every slow step of a chat turn is one of these (DESIGN §5). A kind is a metric label and part of
the idempotency key's scope: `(kind, idempotency_key)` is unique in a tenant.
"""

from __future__ import annotations

from types import MappingProxyType

from echo.domain import jobs as domain

__all__ = ["DISTILL", "MAP_REDUCE", "MERGE", "POLICIES", "SUMMARY", "default_policy"]

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
