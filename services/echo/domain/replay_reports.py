"""What a replay measured, and the table that shows it; pure, no I/O.

Tokens are ``echo.domain.compression.messages.message_tokens`` summed over a request's messages (the
estimate the filters budget with): "without ECHO" is what Open WebUI would send for the turn (the
whole branch so far), "with ECHO" what the filters sent on.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo.domain import transcripts

__all__ = ["Replayed", "Turn", "legend_lines", "log_digest", "summary_lines", "turn_table"]


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


# The table's columns: (group, name, width). A group names the unit of the columns under it.
_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("", "turn", 5),
    ("messages", "in", 5),
    ("messages", "out", 5),
    ("tokens", "without ECHO", 12),
    ("tokens", "with ECHO", 10),
    ("tokens", "saved", 6),
    ("summary", "covers", 9),
    ("time (ms)", "inlet", 7),
    ("time (ms)", "outlet", 7),
)


def _headers() -> tuple[str, str]:
    """The group line (each group centred over its columns) and the column line."""
    groups: list[str] = []
    columns = " ".join(f"{name:>{width}}" for _, name, width in _COLUMNS)
    at = 0
    while at < len(_COLUMNS):
        group = _COLUMNS[at][0]
        end = at
        while end < len(_COLUMNS) and _COLUMNS[end][0] == group:
            end += 1
        width = sum(w for _, _, w in _COLUMNS[at:end]) + (end - at - 1)
        groups.append(f"{group:^{width}}" if end - at > 1 else f"{group:>{width}}")
        at = end
    return " ".join(groups).rstrip(), columns


def turn_table(turns: Sequence[Turn], every: int = 1) -> list[str]:
    """The per-turn table: every ``every``-th turn, the first and the last always; two header lines
    (what each group counts, then the columns) and a rule, then a row per turn shown."""
    groups, columns = _headers()
    lines = [groups, columns, "-" * len(columns)]
    last = len(turns)
    for position, turn in enumerate(turns, start=1):
        if position not in (1, last) and position % every:
            continue
        covers = f"{turn.summary_covers} msgs" if turn.summary_covers else "-"
        lines.append(
            f"{turn.number:>5} {turn.messages:>5} {turn.sent:>5} {turn.tokens_before:>12,} "
            f"{turn.tokens_after:>10,} {turn.saved:>6.0%} {covers:>9} {turn.inlet_ms:>7.1f} "
            f"{turn.outlet_ms:>7.1f}" + ("  ! " + turn.warnings[0] if turn.warnings else "")
        )
    return lines


def legend_lines() -> list[str]:
    """What the table's columns count, printed under it."""
    return [
        "messages: in = what Open WebUI sends for the turn, out = what ECHO sends on",
        "tokens: ECHO's estimate of those messages, without and with ECHO; saved: the share taken out",
        "summary covers: the messages the injected summary stands for",
        "time: the filters' inlets and outlets, in milliseconds, in process",
    ]


_DIGEST_CHARS = 200  # one line of the log digest, at most
_UNSHOWN = frozenset({"event", "log_level", "level", "timestamp"})


def log_digest(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The log entries held during a replay, one line per level and event (with its count and the
    fields of its first entry), to print after the table instead of inside it; none: no lines."""
    if not entries:
        return []
    counts: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], Mapping[str, Any]] = {}
    for entry in entries:
        key = (str(entry.get("log_level", entry.get("level", "?"))), str(entry.get("event", "?")))
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, entry)
    lines = ["logged during the replay (--verbose prints each entry as it happens):"]
    for (level, event), count in counts.items():
        fields = " ".join(f"{k}={v}" for k, v in first[(level, event)].items() if k not in _UNSHOWN)
        line = f"  {level} {event}" + (f" ×{count}" if count > 1 else "") + (f": {fields}" if fields else "")
        lines.append(line if len(line) <= _DIGEST_CHARS else line[: _DIGEST_CHARS - 1] + "…")
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
