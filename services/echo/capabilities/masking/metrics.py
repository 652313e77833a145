"""Secret masking's metric.

All prefixed `echo_` (DESIGN §8).
"""

from __future__ import annotations

from prometheus_client import Counter

__all__ = [
    "SECRETS_MASKED",
]

SECRETS_MASKED = Counter(
    "echo_secrets_masked_total",
    "Secrets masked in model output, by kind and where (outlet|pipe).",
    ["kind", "where"],
)
