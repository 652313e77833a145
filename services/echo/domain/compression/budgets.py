"""Token budgets from the valves: per-model thresholds and the summary window; pure, no I/O.

``thresholds_for`` picks ``compression_threshold_tokens`` and ``max_context_tokens`` for the chat's
model: its ``model_thresholds`` entry, else its base model's (a custom Open WebUI model inherits),
else the global valves. ``summary_window`` is the summary model's input window in seed 002's order
(``summary_model_max_context``, else the thresholds of the summary model, or of the chat's model
when ``summary_model`` is empty, else ``max_context_tokens``) with the 80% rule checked against it:
``max_summary_tokens`` must stay strictly below 80% of that window, so that the next compression
can fit the old summary plus new messages. The valves check the rule at load time for the
configured summary model; here it is checked again for the window actually used, and a violation
is a ``ConfigError`` whose message gives the rule (never a silent shrink).
"""

from __future__ import annotations

from dataclasses import dataclass

from echo.config import thresholds, valves
from echo.errors import ConfigError

__all__ = ["SummaryWindow", "Thresholds", "needs_summary", "summary_window", "thresholds_for"]


@dataclass(frozen=True)
class Thresholds:
    """The token thresholds that apply to one chat model, and where they come from."""

    compression_threshold_tokens: int
    max_context_tokens: int
    source: str


@dataclass(frozen=True)
class SummaryWindow:
    """The summary request's budgets: ``input_tokens`` for the prompt, ``output_tokens`` for the answer."""

    input_tokens: int
    output_tokens: int
    source: str


def thresholds_for(
    settings: valves.CompressionValves, model_id: str | None, base_model_id: str | None = None
) -> Thresholds:
    """The thresholds of ``model_id`` (or of its base model), else the global valves."""
    for candidate in (model_id, base_model_id):
        entry = thresholds.lookup_threshold(settings.model_thresholds, candidate)
        if entry is not None:
            source = f"model_thresholds[{candidate!r}]"
            return Thresholds(entry.compression_threshold_tokens, entry.max_context_tokens, source)
    return Thresholds(settings.compression_threshold_tokens, settings.max_context_tokens, "valves")


def needs_summary(context_tokens: int, limits: Thresholds) -> bool:
    """Whether a branch whose context costs ``context_tokens`` reached the compression threshold."""
    return context_tokens >= limits.compression_threshold_tokens


def summary_window(
    settings: valves.CompressionValves, chat_model_id: str | None = None, base_model_id: str | None = None
) -> SummaryWindow:
    """The summary model's input window and output budget; ``ConfigError`` when the 80% rule fails."""
    if settings.summary_model_max_context > 0:
        window, source = settings.summary_model_max_context, "summary_model_max_context"
    else:
        model = settings.summary_model or chat_model_id
        base = None if settings.summary_model else base_model_id
        entry = thresholds.lookup_threshold(settings.model_thresholds, model, base)
        if entry is not None:
            window, source = entry.max_context_tokens, f"model_thresholds[{model!r}].max_context_tokens"
        else:
            window, source = settings.max_context_tokens, "max_context_tokens"
    limit = valves.SUMMARY_OUTPUT_SHARE * window
    if not settings.max_summary_tokens < limit:
        raise ConfigError(
            "must be strictly below 80% of the effective summary input window (rule: max_summary_tokens "
            f"< 0.8 × window): max_summary_tokens={settings.max_summary_tokens}, window={window} from "
            f"{source}, 80% = {limit:g}. Lower max_summary_tokens or raise the window; the remaining 20% "
            "lets the next compression fit the old summary plus new messages.",
            field="max_summary_tokens",
        )
    return SummaryWindow(window, settings.max_summary_tokens, source)
