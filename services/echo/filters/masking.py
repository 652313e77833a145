"""Outlet secret masking shared by `echo_context` and the pipe models' own outlet (seed 000)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from echo import bodies, masking

__all__ = ["OnMasked", "mask_and_report", "mask_outlet_body"]

OnMasked = Callable[[Mapping[str, int]], None]


def mask_outlet_body(body: Mapping[str, Any]) -> tuple[dict[str, Any], Counter[str]]:
    """Mask secrets in every assistant message's `content` and `output` texts."""
    counts: Counter[str] = Counter()

    def rewrite(text: str) -> str:
        result = masking.mask_secrets(text)
        if not result.counts:
            return text
        counts.update(result.counts)
        return result.text

    return bodies.map_assistant_text(body, rewrite), counts


def mask_and_report(body: Mapping[str, Any], on_masked: OnMasked) -> dict[str, Any]:
    """The masked body; what was masked goes to `on_masked` (metrics and a log line)."""
    masked, counts = mask_outlet_body(body)
    if counts:
        on_masked(counts)
    return masked
