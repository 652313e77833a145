"""The work of `echoctl replay FILE`: read, replay with a progress bar, print the tables, plot.

`echo.entrypoints.cli` parses the options and the environment and calls `run`; errors the user can fix come
back
as `EchoError`s (`TranscriptError`, `ConfigError`, `PlotUnavailable`, a store error) with a message
that names the file, the valve or what to install.

Per chat, the progress bar (stderr) runs while it replays; then come its title, the table, a legend
of the units and the totals (stdout). Unless `--verbose`, what is logged while a chat replays (the
offline provider's warning, a failing job) is held and printed after those lines, one line per kind
of entry (stderr), so that no log line lands inside a table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import structlog

from echo.adapters.store import bootstrap
from echo.capabilities.compression import filter as compression_filter
from echo.config import live
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import replay_reports as reports
from echo.domain import transcripts
from echo.entrypoints.replay import driver, plot

__all__ = ["Options", "held_logs", "provider_of", "read_transcripts", "run", "select"]


@dataclass(frozen=True)
class Options:
    """What the command line asks of a replay (None: the configured valve)."""

    threshold: int | None = None
    max_context: int | None = None
    keep_last: int | None = None
    style: str | None = None
    max_summary_tokens: int | None = None
    every: int = 1
    plot: Path | None = None
    chats: tuple[str, ...] = ()
    hold_logs: bool = True  # print what is logged during a chat's replay after its table (not --verbose)


def read_transcripts(path: Path) -> tuple[transcripts.Transcript, ...]:
    """The conversations in ``path``; ``TranscriptError`` naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise transcripts.TranscriptError(f"{path}: not a readable JSON file ({error})") from error
    try:
        return transcripts.parse(data, name=path.stem)
    except transcripts.TranscriptError as error:
        raise transcripts.TranscriptError(f"{path}: {error}") from error


def select(found: Sequence[transcripts.Transcript], wanted: Sequence[str]) -> list[transcripts.Transcript]:
    """The chats whose id is, or whose title contains, one of ``wanted`` (all when it is empty)."""
    if not wanted:
        return list(found)
    chosen = [
        chat
        for chat in found
        if any(want == chat.id or want.casefold() in chat.title.casefold() for want in wanted)
    ]
    if not chosen:
        listed = ", ".join(f"{chat.id} ({chat.title!r})" for chat in found[:10])
        more = f" and {len(found) - 10} more" if len(found) > 10 else ""
        raise transcripts.TranscriptError(
            f"no chat matches --chat {' '.join(wanted)}; the file has {listed}{more}"
        )
    return chosen


def provider_of(settings: Settings) -> str:
    """Who writes the summaries, as `echo.adapters.llm.factory` decides it."""
    if settings.llm_provider == "openai" and settings.openai_base_url:
        return f"OpenAI-compatible endpoint {settings.openai_base_url}"
    if settings.llm_provider in ("auto", "gemini") and settings.gemini_api_key is not None:
        return "Gemini"
    return "the offline provider (extractive; set ECHO_GEMINI_API_KEY for a model)"


def _valves(settings: Settings, options: Options) -> dict[str, valves_module.Valves]:
    config = live.LiveConfig(settings)
    config.load()
    configured = config.valves(compression_filter.CompressionFilter.id)
    assert isinstance(configured, valves_module.CompressionValves)
    found: dict[str, valves_module.Valves] = {
        filter_id: config.valves(filter_id) for filter_id in valves_module.FILTER_VALVES
    }
    found[compression_filter.CompressionFilter.id] = driver.compression_valves(
        configured,
        threshold=options.threshold,
        max_context=options.max_context,
        keep_last=options.keep_last,
        style=options.style,
        max_summary_tokens=options.max_summary_tokens,
    )
    context = found.get("echo_context")
    if isinstance(context, valves_module.ContextValves):
        # The AEC block carries the date and time of the run: without it a replay's token counts are
        # reproducible, and they measure compression alone.
        found["echo_context"] = context.model_copy(update={"ENABLE_AEC": False})
    return found


def _describe(valves: valves_module.CompressionValves) -> str:
    return (
        f"compression_threshold_tokens {valves.compression_threshold_tokens:,}, max_context_tokens "
        f"{valves.max_context_tokens:,}, keep_first {valves.keep_first}, keep_last {valves.keep_last}, "
        f"compression_style {valves.compression_style}, max_summary_tokens {valves.max_summary_tokens:,}"
    )


class _HeldRecords(logging.Handler):
    """A stdlib handler that keeps each record as a log entry (the wheel's and libraries' logs)."""

    def __init__(self, entries: list[Mapping[str, Any]]) -> None:
        super().__init__()
        self.entries = entries

    def emit(self, record: logging.LogRecord) -> None:
        self.entries.append(
            {"event": record.getMessage(), "level": record.levelname.lower(), "logger": record.name}
        )


@contextlib.contextmanager
def held_logs(hold: bool = True) -> Iterator[list[Mapping[str, Any]]]:
    """The log entries emitted inside the block, kept instead of written (``hold``); structlog's
    level filter still applies. Without ``hold``, logs are written as they come and none are kept."""
    entries: list[Mapping[str, Any]] = []
    if not hold:
        yield entries
        return

    def keep(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        entries.append(dict(event))
        raise structlog.DropEvent

    saved = structlog.get_config()
    root = logging.getLogger()
    handlers = root.handlers[:]
    structlog.configure(processors=[structlog.processors.add_log_level, keep])
    root.handlers = [_HeldRecords(entries)]
    try:
        yield entries
    finally:
        root.handlers = handlers
        structlog.configure(**saved)


async def _replay_all(
    settings: Settings,
    chats: Sequence[transcripts.Transcript],
    valves: dict[str, valves_module.Valves],
    options: Options,
) -> list[reports.Replayed]:
    done: list[reports.Replayed] = []
    async with (
        bootstrap.open_store(settings, application_name="echoctl-replay") as store,
        driver.session(store, settings, valves.get) as replayer,
    ):
        for chat in chats:
            label = f"replaying {chat.title if len(chat.title) <= 40 else chat.title[:39] + '…'}"
            with (
                held_logs(options.hold_logs) as logged,
                click.progressbar(length=len(chat.exchanges), label=label, file=sys.stderr) as bar,
            ):
                done.append(await replayer.replay(chat, on_turn=lambda _turn: bar.update(1)))
            click.echo(
                f"\n{chat.title} ({chat.kind}, {len(chat.exchanges)} turns, {len(chat.messages)} messages)"
            )
            _print(done[-1], every=options.every)
            for line in reports.log_digest(logged):
                click.echo(line, err=True)
    return done


def _print(replayed: reports.Replayed, *, every: int) -> None:
    for line in reports.turn_table(replayed.turns, every):
        click.echo(line)
    if replayed.turns:
        for line in reports.legend_lines():
            click.echo(line)
    for line in reports.summary_lines(replayed):
        click.echo(line)


def run(settings: Settings, path: Path, options: Options) -> list[reports.Replayed]:
    """Replay the chats of ``path`` as the module docstring says; what was replayed."""
    if options.plot is not None:
        plot.require()
    chats = select(read_transcripts(path), options.chats)
    valves = _valves(settings, options)
    compression = valves[compression_filter.CompressionFilter.id]
    assert isinstance(compression, valves_module.CompressionValves)
    click.echo(f"valves: {_describe(compression)}")
    store = "ECHO_DATABASE_URL" if settings.database_url else f"embedded PostgreSQL under {settings.data_dir}"
    click.echo(f"summaries by: {provider_of(settings)}; store: {store}, tenant {settings.tenant}")
    replays = asyncio.run(_replay_all(settings, chats, valves, options))
    if options.plot is not None and any(replayed.turns for replayed in replays):
        panels = plot.write_png(replays, options.plot)
        click.echo(f"\nwrote {options.plot} ({panels} chat{'s' if panels > 1 else ''})")
    return replays
