"""Compression, the domain (seed 002 v1.7.2, branch-aware): pure, no I/O.

Decisions and transformations over plain data; the filter reads the store and the job handler
calls the model, this package does neither. Standard library plus the project's pure modules
(``echo.domain.chain``, ``echo.domain.tokens``, ``echo.config.valves`` and ``thresholds``, ``echo.errors``)
only.

Inlet:
- ``messages``: what each message is (system, protected block, injected summary, turn), what it
  costs, and the turns' chain (system messages are not on it);
- ``selection``: the newest stored summary valid for the current branch;
- ``assembly``: system messages in place + head + fenced summary + tail, within
  ``max_context_tokens``, never splitting a tool-call group (``groups``), trimming tool outputs
  and folding over-long messages (``trimming``);
- ``fence``: the summary as history, not instructions, in the conversation's language
  (``locales``);
- ``allowance``: the tokens the assembly freed, left to the filters after it (``echo_memory``), so
  a request with ECHO never costs more than without it plus the AEC block.

Outlet and the summary job:
- ``budgets``: per-model thresholds, the threshold test, the summary window and its 80% rule;
- ``planning``: which turns the next summary folds in, and its job key;
- ``prompts`` and ``fitting``: the XML working-memory prompt, fitted to the summary window;
- ``lengths``: the summary's target (a share of the turns it covers, under ``max_summary_tokens``)
  and the trimming of an answer that comes back longer.
"""

from echo.domain.compression.assembly import Assembly, AssemblyPolicy, assemble
from echo.domain.compression.budgets import (
    SummaryWindow,
    Thresholds,
    needs_summary,
    summary_window,
    thresholds_for,
)
from echo.domain.compression.fence import (
    fenced_summary,
    is_injected_summary,
    strip_reply_guidance,
    summary_message,
)
from echo.domain.compression.fitting import SummaryInput, fit_summary_input
from echo.domain.compression.groups import Group, turn_groups
from echo.domain.compression.locales import LOCALES, detect_locale, resolve_locale
from echo.domain.compression.messages import Kind, Turns, conversation_turns, kind_of, message_tokens
from echo.domain.compression.planning import SummaryPlan, plan_summary, summary_job_key
from echo.domain.compression.prompts import STYLES, build_summary_prompt, format_entry
from echo.domain.compression.selection import StoredSummary, is_valid_for, select_summary
from echo.domain.compression.trimming import fold_message, fold_text, tool_output_trims

__all__ = [
    "LOCALES",
    "STYLES",
    "Assembly",
    "AssemblyPolicy",
    "Group",
    "Kind",
    "StoredSummary",
    "SummaryInput",
    "SummaryPlan",
    "SummaryWindow",
    "Thresholds",
    "Turns",
    "assemble",
    "build_summary_prompt",
    "conversation_turns",
    "detect_locale",
    "fenced_summary",
    "fit_summary_input",
    "fold_message",
    "fold_text",
    "format_entry",
    "is_injected_summary",
    "is_valid_for",
    "kind_of",
    "message_tokens",
    "needs_summary",
    "plan_summary",
    "resolve_locale",
    "select_summary",
    "strip_reply_guidance",
    "summary_job_key",
    "summary_message",
    "summary_window",
    "thresholds_for",
    "tool_output_trims",
    "turn_groups",
]
