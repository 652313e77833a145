"""What a replay measured, and the table that shows it; pure, no I/O.

Tokens are ``echo.compression.messages.message_tokens`` summed over a request's messages (the
estimate the filters budget with): "without ECHO" is what Open WebUI would send for the turn (the
whole branch so far), "with ECHO" what the filters sent on.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.replay import transcripts

__all__ = ["Replayed", "Turn", "summary_lines", "turn_table"]


@dataclass(frozen=True)
class Turn:
    """One replayed exchange."""

    number: int  # 1-based
    messages: int  # messages Open WebUI sends for this turn
    sent: int  # messages the filters sent on
    tokens_before: int  # without ECHO
    tokens_after: int  # with ECHO
    summary_covers: int  # messages the injected summary stands for; 0 without one
    inlet_ms: float  # the filters' inlets, in process
    outlet_ms: float  # the filters' outlets (0 for an exchange without a reply)
    warnings: tuple[str, ...] = ()  # status events of level warning or error

    @property
    def saved(self) -> float:
        """The share of tokens the filters took out (0..1)."""
        return 1 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0


@dataclass(frozen=True)
class Replayed:
    """A whole replay: the turns, the messages the last inlet sent on, and the jobs it waited for."""

    transcript: transcripts.Transcript
    turns: tuple[Turn, ...]
    final: tuple[Mapping[str, Any], ...]
    stalled_turns: int = 0  # turns after which the summary jobs were still running at the wait's end
    threshold: int | None = None  # compression_threshold_tokens in force for the chat's model
    max_context: int | None = None  # max_context_tokens in force for the chat's model

    @property
    def first_summary(self) -> int | None:
        """The first turn whose inlet carried a summary."""
        return next((turn.number for turn in self.turns if turn.summary_covers), None)


def turn_table(turns: Sequence[Turn], every: int = 1) -> list[str]:
    """The per-turn table: every ``every``-th turn, the first and the last always."""
    header = (
        f"{'turn':>5} {'msgs':>5} {'sent':>5} {'without ECHO':>12} {'with ECHO':>10} {'saved':>6} "
        f"{'summary':>9} {'inlet ms':>8} {'outlet ms':>9}"
    )
    lines = [header, "-" * len(header)]
    last = len(turns)
    for position, turn in enumerate(turns, start=1):
        if position not in (1, last) and position % every:
            continue
        covers = f"{turn.summary_covers} msgs" if turn.summary_covers else "-"
        lines.append(
            f"{turn.number:>5} {turn.messages:>5} {turn.sent:>5} {turn.tokens_before:>12,} "
            f"{turn.tokens_after:>10,} {turn.saved:>6.0%} {covers:>9} {turn.inlet_ms:>8.1f} "
            f"{turn.outlet_ms:>9.1f}" + ("  ! " + turn.warnings[0] if turn.warnings else "")
        )
    return lines


def summary_lines(replayed: Replayed) -> list[str]:
    """A few lines under the table: totals and what to look at."""
    turns = replayed.turns
    if not turns:
        return ["nothing replayed: the chat has no messages"]
    last = turns[-1]
    before = statistics.fmean(turn.tokens_before for turn in turns)
    after = statistics.fmean(turn.tokens_after for turn in turns)
    first = replayed.first_summary
    lines = [
        f"{len(turns)} turns; last turn {last.tokens_before:,} → {last.tokens_after:,} tokens "
        f"({last.saved:.0%} less); mean per turn {before:,.0f} → {after:,.0f} tokens "
        f"({1 - after / before if before else 0:.0%} less)",
        f"summary injected from turn {first}"
        if first
        else "no summary injected (the threshold was never reached)",
        f"inlet p50 {statistics.median(t.inlet_ms for t in turns):.1f} ms, "
        f"outlet p50 {statistics.median(t.outlet_ms for t in turns):.1f} ms (in process)",
    ]
    warned = sum(1 for turn in turns if turn.warnings)
    if warned:
        lines.append(f"{warned} turns raised warnings (marked ! above)")
    if replayed.stalled_turns:
        lines.append(f"{replayed.stalled_turns} turns went on before their summary jobs finished")
    return lines
