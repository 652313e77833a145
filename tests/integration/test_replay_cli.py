"""`echoctl replay FILE` end to end: the command, the filters, a real PostgreSQL and the in-process worker
(offline provider), on Open WebUI exports and LoCoMo conversations."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner, Result
from fakes.shared_data import FIXTURES

from echo.adapters.store import testing
from echo.config import tenancy
from echo.entrypoints import cli

TOPICS = ["the garden", "a bicycle trip", "the tax form", "a birthday cake", "the new laptop"]
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@pytest.fixture
def tenant() -> Iterator[str]:
    dsn = testing.test_dsn()
    reason = asyncio.run(testing.unreachable(dsn))
    if reason:
        pytest.skip(f"PostgreSQL is not reachable at {dsn}: {reason}")
    name = testing.unique_tenant("replay")
    yield name
    asyncio.run(testing.drop_schema(dsn, tenancy.schema_for(name)))


@pytest.fixture
def replay(tenant: str, tmp_path: Path) -> Callable[..., Result]:
    """`echoctl replay ARGS` on the test PostgreSQL, in its own tenant and data directory."""
    env = {"ECHO_DATABASE_URL": testing.test_dsn(), "ECHO_LLM_PROVIDER": "offline"}

    def run(*args: str) -> Result:
        command = ["replay", *args, "--tenant", tenant, "--data-dir", str(tmp_path / "echo")]
        return CliRunner().invoke(cli.main, command, env=env)

    return run


def offline(*args: str, data_dir: Path) -> Result:
    """`echoctl replay ARGS` where it must fail before it opens a store."""
    return CliRunner().invoke(cli.main, ["replay", *args, "--data-dir", str(data_dir)])


def export(turns: int, *, title: str = "Planning", chat_id: str = "chat-1") -> dict[str, Any]:
    """A chat row as Open WebUI exports it: a linear history, one tool call on the third answer."""
    messages: dict[str, Any] = {}
    parent = None
    for i in range(turns):
        topic = TOPICS[i % len(TOPICS)]
        user, answer = f"{chat_id}-u{i}", f"{chat_id}-a{i}"
        messages[user] = {
            "id": user,
            "parentId": parent,
            "role": "user",
            "content": f"Question {i}: tell me more about {topic}, the details of step {i}, the options.",
        }
        text = f"Answer {i} about {topic}: plan step {i} with care; option two costs {i * 10} euros. " * 3
        messages[answer] = {"id": answer, "parentId": user, "role": "assistant", "content": text}
        if i == 2:
            messages[answer]["output"] = [
                {"type": "function_call", "call_id": "call-1", "name": "lookup", "arguments": '{"q":"x"}'},
                {
                    "type": "function_call_output",
                    "call_id": "call-1",
                    "output": [{"type": "input_text", "text": "42"}],
                },
                {"type": "message", "content": [{"type": "output_text", "text": text}]},
            ]
        parent = answer
    return {
        "id": chat_id,
        "title": title,
        "chat": {
            "models": ["gpt-4o"],
            "history": {"currentId": parent, "messages": messages},
            "messages": [],
        },
    }


def rows(output: str) -> list[list[str]]:
    """The table rows of the output (lines that start with the turn and message numbers)."""
    split = [line.split() for line in output.splitlines()]
    return [row for row in split if len(row) >= 9 and row[0].isdigit() and row[1].isdigit()]


def test_an_export_is_replayed_with_summaries_and_the_user_forgotten(
    replay: Callable[..., Result], tenant: str, tmp_path: Path
) -> None:
    path = tmp_path / "chat-export.json"
    path.write_text(json.dumps([export(30)]))
    result = replay(
        str(path), "--threshold", "800", "--max-context", "3000", "--keep-last", "4", "--every", "5"
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "compression_threshold_tokens 800, max_context_tokens 3,000, keep_first 1, keep_last 4" in out
    assert "max_summary_tokens 750" in out  # a quarter of the 3000-token window
    assert "the offline provider" in out
    assert "Planning (openwebui, 30 turns, 60 messages)" in out
    table = rows(out)
    assert [int(row[0]) for row in table] == [1, 5, 10, 15, 20, 25, 30]
    first, last = table[0], table[-1]
    assert first[3] == first[4]  # nothing to compress on the first turn
    before, after = (int(value.replace(",", "")) for value in last[3:5])
    assert after < before
    assert after <= 3000
    assert last[7] == "msgs"  # a summary stands for the oldest turns
    assert "summary injected from turn" in out
    assert "!" not in out  # no hook failed or fell back
    # The table is the table: its header names the units, and no log line lands inside it; what
    # was logged meanwhile comes after the chat's lines (the offline provider says so).
    lines = out.splitlines()
    columns = next(i for i, line in enumerate(lines) if line.split()[:3] == ["turn", "in", "out"])
    assert lines[columns - 1].split() == ["messages", "tokens", "summary", "time", "(ms)"]
    body = lines[columns + 2 : columns + 2 + len(table)]
    assert [line.split() for line in body] == table
    legend = next(i for i, line in enumerate(lines) if line.startswith("messages: in = what Open WebUI"))
    assert legend == columns + 2 + len(table)
    logged = next(i for i, line in enumerate(lines) if line.startswith("logged during the replay"))
    assert logged > legend
    assert lines[logged + 1].startswith("  warning llm_offline: reason=ECHO_LLM_PROVIDER=offline")
    assert out.count("llm_offline") == 1
    assert lines[columns - 2] == "Planning (openwebui, 30 turns, 60 messages)"  # the chat's title

    async def left() -> tuple[int, int, list[str]]:
        connection = await asyncpg.connect(testing.test_dsn())
        try:
            schema = tenancy.quote_identifier(tenancy.schema_for(tenant))
            messages = await connection.fetchval(f"SELECT count(*) FROM {schema}.messages")
            summaries = await connection.fetchval(f"SELECT count(*) FROM {schema}.summaries")
            states = await connection.fetch(f"SELECT DISTINCT state FROM {schema}.jobs")
            return messages, summaries, [row["state"] for row in states]
        finally:
            await connection.close()

    assert asyncio.run(left()) == (0, 0, ["done"])  # the summaries ran; the replay's user is forgotten


def locomo() -> dict[str, Any]:
    sessions: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for number in range(1, 9):
        sessions[f"session_{number}_date_time"] = f"10:00 am on {number} May, 2023"
        sessions[f"session_{number}"] = [
            {
                "speaker": "Ann" if turn % 2 == 0 else "Bob",
                "dia_id": f"D{number}:{turn + 1}",
                "text": f"Session {number}, line {turn}: we discussed {TOPICS[turn % 5]} at length.",
            }
            for turn in range(10)
        ]
    sessions["qa"] = [{"question": "What?", "answer": "the garden", "evidence": ["D1:1"], "category": 1}]
    return sessions


def test_a_locomo_conversation_is_replayed_turn_by_turn(
    replay: Callable[..., Result], tmp_path: Path
) -> None:
    path = tmp_path / "conv-7.json"
    path.write_text(json.dumps(locomo()))
    result = replay(str(path), "--threshold", "600", "--max-context", "1500", "--style", "aggressive")
    assert result.exit_code == 0, result.output
    assert "LoCoMo conv-7: Ann and Bob (locomo, 40 turns, 80 messages)" in result.output
    assert "compression_style aggressive" in result.output
    table = rows(result.output)
    assert len(table) == 40
    assert any(row[7] == "msgs" for row in table)


def test_a_real_export_with_tool_calls_replays_cleanly(replay: Callable[..., Result]) -> None:
    result = replay(str(FIXTURES / "tool_flow" / "stored_chat.json"))
    assert result.exit_code == 0, result.output
    assert "New Chat (openwebui, 2 turns, 4 messages)" in result.output
    assert "no summary injected" in result.output
    assert "!" not in result.output


def test_only_the_chats_asked_for(replay: Callable[..., Result], tmp_path: Path) -> None:
    path = tmp_path / "all-chats.json"
    path.write_text(
        json.dumps([export(2, title="Alpha", chat_id="c-a"), export(3, title="Beta", chat_id="c-b")])
    )
    result = replay(str(path), "--chat", "beta")
    assert result.exit_code == 0, result.output
    assert "Beta (openwebui, 3 turns" in result.output
    assert "Alpha" not in result.output
    missing = replay(str(path), "--chat", "gamma")
    assert missing.exit_code == 1
    assert "no chat matches --chat gamma; the file has c-a ('Alpha'), c-b ('Beta')" in missing.output


@pytest.mark.skipif(HAS_MATPLOTLIB, reason="matplotlib is installed: the plot is drawn (next test)")
def test_a_plot_without_matplotlib_says_what_to_install_before_any_work(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([export(2)]))
    result = offline(str(path), "--plot", str(tmp_path / "out.png"), data_dir=tmp_path)
    assert result.exit_code == 1
    assert "--plot needs matplotlib" in result.output
    assert "pip install 'echo-k8s[plot]'" in result.output
    assert "turns" not in result.output  # refused before replaying (no store was opened)


@pytest.mark.skipif(
    not HAS_MATPLOTLIB, reason="matplotlib is not installed (the `plot` extra, which `dev` brings)"
)
def test_the_plot_is_written(replay: Callable[..., Result], tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([export(12)]))
    target = tmp_path / "plots" / "context.png"
    result = replay(str(path), "--threshold", "500", "--max-context", "2000", "--plot", str(target))
    assert result.exit_code == 0, result.output
    assert f"wrote {target} (1 chat)" in result.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not a readable JSON file"),
        ("[]", "empty list: no chat to replay"),
        ('{"title": "no messages"}', "neither an Open WebUI chat"),
    ],
)
def test_a_file_that_is_not_a_chat_is_refused_with_its_name(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(content)
    result = offline(str(path), data_dir=tmp_path)
    assert result.exit_code == 1
    assert str(path) in result.output
    assert words in result.output


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([export(2)]))
    for args in (["--style", "poetic"], ["--every", "0"], ["--threshold", "-1"]):
        result = offline(str(path), *args, data_dir=tmp_path)
        assert result.exit_code == 2, (args, result.output)
    contradictory = offline(str(path), "--threshold", "9000", "--max-context", "100", data_dir=tmp_path)
    assert contradictory.exit_code == 1
    assert (
        "compression_threshold_tokens (9000) must not exceed max_context_tokens (100)" in contradictory.output
    )
    assert offline(str(tmp_path / "absent.json"), data_dir=tmp_path).exit_code == 2
