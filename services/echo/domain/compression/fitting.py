"""Fitting a planned summary into the summary model's input window; pure, no I/O.

The window (``budgets.summary_window``) is for the prompt; ``max_summary_tokens`` is the answer's
own budget. The 80% rule keeps the previous summary (at most ``max_summary_tokens`` when the model
obeyed) under 80% of the window, leaving at least 20% for the instructions and new messages; a
previous summary that overflows anyway keeps its beginning and end, cut to leave that 20%.

The new messages go in oldest first, a whole group at a time (a tool call with its results), while
they fit. What does not fit is left for the next summary: the summary then covers fewer turns, and
its key is the cumulative hash of the last turn it holds. When not even the first group fits, its
messages go one by one, and when not even the first message fits, it is cut to the window
(``truncated``): the summary always makes progress.

With ``max_share``, the answer's budget is the summary's target (``lengths.summary_target``): a share
of the tokens of the turns it will cover (the taken messages, plus ``covered_before_tokens``, what the
turns the previous summary stood for cost), under ``max_summary_tokens``; the prompt asks for it and
``max_output_tokens`` is set to it (0: the covered turns are too small to summarise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.config import valves
from echo.domain import tokens
from echo.domain.compression import budgets, lengths, locales, planning, prompts
from echo.domain.compression import groups as grp
from echo.domain.compression import messages as msgs

__all__ = ["SummaryInput", "fit_summary_input"]

_CUT = "\n[… cut to fit the summary window …]\n"
_SAFETY = 0.9  # cut a little more than the estimate says, so the result fits


@dataclass(frozen=True)
class SummaryInput:
    """A summary request that fits: the prompt, and what the summary will cover once made."""

    prompt: str
    taken: int
    covered_count: int
    covered_hash: str
    head_count: int
    prompt_tokens: int
    max_output_tokens: int
    truncated: bool


def _cut(text: str, chars: int) -> str:
    """``text`` cut to about ``chars`` characters: two thirds from its start, one third from its end."""
    if len(text) <= chars:
        return text
    head = max(0, chars * 2 // 3)
    tail = max(0, chars - head)
    return text[:head] + _CUT + (text[-tail:] if tail else "")


def _take(groups: Sequence[grp.Group], costs: Sequence[int], budget: int) -> int:
    """How many entries fit in ``budget``: whole groups, else the first group's entries one by one."""
    taken = used = 0
    for group in groups:
        cost = sum(costs[group.start : group.stop])
        if used + cost > budget:
            if taken == 0:
                while taken < group.stop and used + costs[taken] <= budget:
                    used += costs[taken]
                    taken += 1
            break
        used += cost
        taken = group.stop
    return taken


def fit_summary_input(
    plan: planning.SummaryPlan,
    planned: Sequence[Mapping[str, Any]],
    *,
    window: budgets.SummaryWindow,
    style: prompts.Style = "balanced",
    locale: str = locales.DEFAULT_LOCALE,
    counter: msgs.TokenCounter = tokens.estimate_tokens,
    max_share: float | None = None,
    covered_before_tokens: int = 0,
) -> SummaryInput:
    """The prompt for ``plan``, whose turns are ``planned`` (in order), within ``window``."""
    if len(planned) != len(plan.hashes):
        raise ValueError(f"planned holds {len(planned)} messages, the plan {len(plan.hashes)} turns")
    previous = plan.previous.text if plan.previous is not None else None
    truncated = False

    output_tokens = window.output_tokens

    def prompt_for(transcript: str, earlier: str | None) -> str:
        return prompts.build_summary_prompt(
            transcript, earlier, style=style, max_summary_tokens=output_tokens, locale=locale
        )

    base_tokens = counter(prompt_for("", previous))
    room_for_previous = int(valves.SUMMARY_OUTPUT_SHARE * window.input_tokens)
    if previous and base_tokens > room_for_previous:
        excess = base_tokens - room_for_previous
        share = max(0.0, 1 - excess / max(1, counter(previous)))
        previous = _cut(previous, int(len(previous) * share * _SAFETY))
        truncated = True
        base_tokens = counter(prompt_for("", previous))
    budget = window.input_tokens - base_tokens
    entries = [prompts.format_entry(message, plan.start + index + 1) for index, message in enumerate(planned)]
    costs = [counter(entry) + 1 for entry in entries]  # + the blank line between entries
    groups = grp.turn_groups(planned, range(len(planned)))
    taken = _take(groups, costs, budget)
    if taken == 0:  # not even the first message: cut it to the window
        entries[0] = _cut(entries[0], int(len(entries[0]) * max(0, budget) / costs[0] * _SAFETY))
        taken, truncated = 1, True
    prompt = prompt_for("\n\n".join(entries[:taken]), previous)
    prompt_tokens = counter(prompt)
    while prompt_tokens > window.input_tokens:  # the parts' estimates do not add up exactly
        if taken > 1:
            taken = max((group.start for group in groups if 0 < group.start < taken), default=taken - 1)
        else:
            shorter = _cut(entries[0], int(len(entries[0]) * _SAFETY))
            if len(shorter) >= len(entries[0]):
                break  # the instructions alone overflow: nothing left to cut
            entries[0], truncated = shorter, True
        prompt = prompt_for("\n\n".join(entries[:taken]), previous)
        prompt_tokens = counter(prompt)
    if max_share is not None:  # a smaller number in the prompt: it only gets shorter
        covered = covered_before_tokens + sum(msgs.message_tokens(m, counter) for m in planned[:taken])
        output_tokens = lengths.summary_target(
            covered, max_share=max_share, max_summary_tokens=window.output_tokens, style=style
        )
        prompt = prompt_for("\n\n".join(entries[:taken]), previous)
        prompt_tokens = counter(prompt)
    covered_count, covered_hash = plan.covered_after(taken)
    return SummaryInput(
        prompt=prompt,
        taken=taken,
        covered_count=covered_count,
        covered_hash=covered_hash,
        head_count=plan.head_count,
        prompt_tokens=prompt_tokens,
        max_output_tokens=output_tokens,
        truncated=truncated,
    )
