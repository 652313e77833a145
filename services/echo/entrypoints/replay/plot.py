"""The PNG of a replay: context size per turn, without ECHO and with it (matplotlib, Agg backend).

matplotlib is optional (the `plot` extra): ``require()`` says how to get it before any work is done,
and ``write_png`` imports it only when called.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echo.domain import replay_reports as reports
from echo.errors import EchoError

__all__ = ["MAX_PANELS", "PlotUnavailable", "require", "write_png"]

MAX_PANELS = 12  # chats drawn in one PNG (an export of every chat may hold hundreds)
INSTALL_HINT = (
    "--plot needs matplotlib, which is not installed here: install ECHO's `plot` extra in its "
    "environment (`pip install 'echo-k8s[plot]'`; in a checkout, `pip install -e '.[plot]'`)"
)


class PlotUnavailable(EchoError):
    """matplotlib cannot be imported. Permanent until it is installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display, no GUI toolkit
        import matplotlib.pyplot as pyplot
    except ImportError as error:
        raise PlotUnavailable(f"{INSTALL_HINT} ({error})") from error
    return pyplot


def require() -> None:
    """Raise ``PlotUnavailable`` now when a plot could not be drawn later."""
    _pyplot()


def write_png(
    replays: Sequence[reports.Replayed],
    path: Path,
) -> int:
    """Draw one panel per replay (the first ``MAX_PANELS``) into ``path``; the number of panels."""
    pyplot = _pyplot()
    shown = [replayed for replayed in replays if replayed.turns][:MAX_PANELS]
    if not shown:
        raise ValueError("nothing to plot: no replayed chat has a turn")
    figure, axes = pyplot.subplots(
        len(shown), 1, figsize=(10, 3.6 * len(shown)), squeeze=False, constrained_layout=True
    )
    for axis, replayed in zip(axes[:, 0], shown, strict=True):
        numbers = [turn.number for turn in replayed.turns]
        axis.plot(numbers, [t.tokens_before for t in replayed.turns], label="without ECHO", color="#999999")
        axis.plot(numbers, [t.tokens_after for t in replayed.turns], label="with ECHO", color="#1f77b4")
        first = replayed.first_summary
        if first is not None:
            axis.axvline(
                first, color="#2ca02c", linestyle=":", linewidth=1, label=f"first summary (turn {first})"
            )
        if replayed.threshold is not None:
            axis.axhline(
                replayed.threshold,
                color="#ff7f0e",
                linestyle="--",
                linewidth=1,
                label="compression threshold",
            )
        if replayed.max_context is not None:
            axis.axhline(
                replayed.max_context, color="#d62728", linestyle="--", linewidth=1, label="max context"
            )
        axis.set_title(replayed.transcript.title, fontsize=10)
        axis.set_xlabel("turn")
        axis.set_ylabel("context tokens")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8, loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return len(shown)
