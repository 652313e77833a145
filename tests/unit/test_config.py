"""Valves carry the seeds' names and defaults; rules are enforced with messages naming field and numbers."""

from __future__ import annotations

import pytest

from echo.config import snapshot, thresholds, valves
from echo.config.settings import Settings
from echo.errors import ConfigError


def test_context_valves_have_seed_000_defaults() -> None:
    context = valves.ContextValves()
    assert context.MAX_DIRECT_TEXT_SIZE == 256 * 1024
    assert context.ECHO_MR_SUMMARY_MAX_WORDS == 300


def test_memory_valves_have_seed_000_defaults() -> None:
    memory = valves.MemoryValves()
    assert (memory.WINDOW_SIZE, memory.WINDOW_OVERLAP) == (5, 2)
    assert (memory.SIMILARITY_THRESHOLD, memory.EXACT_MATCH_THRESHOLD) == (0.85, 0.95)


def test_compression_valves_have_the_whole_seed_002_table() -> None:
    defaults = valves.CompressionValves().model_dump()
    expected = {
        "priority": 10,
        "compression_threshold_tokens": 64000,
        "max_context_tokens": 128000,
        "keep_first": 1,
        "keep_last": 6,
        "summary_model": None,
        "summary_model_max_context": 0,
        "max_summary_tokens": 16384,
        "summary_temperature": 0.1,
        "summary_fail_mode": "silent",
        "compression_style": "balanced",
        "enable_tool_output_trimming": True,
        "tool_trim_threshold_chars": 600,
        "debug_mode": False,
        "show_debug_log": False,
        "show_token_usage_status": True,
        "token_usage_status_threshold": 80,
        # ECHO's own addition: the longest wait for a referenced chat's summary (issue 8 item 3).
        "reference_summary_wait_seconds": 10.0,
    }
    assert {key: defaults[key] for key in expected} == expected
    table = defaults["model_thresholds"]
    assert table["gemini-2.5-flash"] == {
        "compression_threshold_tokens": 734000,
        "max_context_tokens": 1048576,
    }
    assert table["gpt-4"] == {"compression_threshold_tokens": 8000, "max_context_tokens": 32000}
    for family in (
        "gpt-4",
        "claude-3-5-sonnet",
        "gemini-1.5-pro",
        "gemini-2.0-flash",
        "qwen2.5",
        "qwen3",
        "deepseek-v3",
    ):
        assert family in table


@pytest.mark.parametrize(
    ("overrides", "window", "source"),
    [
        (
            {"summary_model_max_context": 20000, "max_summary_tokens": 16000},
            20000,
            "summary_model_max_context",
        ),
        ({"summary_model": "gpt-4", "max_summary_tokens": 25600}, 32000, "model_thresholds['gpt-4']"),
        ({"max_context_tokens": 20000, "compression_threshold_tokens": 10000}, 20000, "max_context_tokens"),
    ],
)
def test_summary_budget_rule_states_rule_and_numbers(overrides: dict, window: int, source: str) -> None:
    with pytest.raises(ConfigError) as caught:
        snapshot.validate_valves("echo_compression", overrides)
    message = str(caught.value)
    assert "max_summary_tokens must be strictly below 80%" in message
    assert f"window={window}" in message
    assert source in message
    assert f"80% = {0.8 * window:g}" in message


def test_summary_budget_just_below_80_percent_is_accepted() -> None:
    accepted = snapshot.validate_valves(
        "echo_compression", {"summary_model_max_context": 20000, "max_summary_tokens": 15999}
    )
    assert accepted.max_summary_tokens == 15999


def test_custom_model_inherits_its_base_model_thresholds() -> None:
    table = valves.CompressionValves().model_thresholds
    inherited = thresholds.lookup_threshold(table, "my-preset-assistant", base_model_id="gemini-2.5-flash")
    assert inherited is not None
    assert inherited.max_context_tokens == 1048576
    assert thresholds.lookup_threshold(table, "echo.gemini-2.5-pro") == table["gemini-2.5-pro"]
    assert thresholds.lookup_threshold(table, "unknown-model") is None


@pytest.mark.parametrize(
    ("filter_id", "data", "field"),
    [
        ("echo_memory", {"WINDOW_SIZE": 0}, "echo_memory.WINDOW_SIZE"),
        ("echo_memory", {"SIMILARITY_THRESHOLD": 1.5}, "echo_memory.SIMILARITY_THRESHOLD"),
        ("echo_memory", {"SIMILARITY_THRESHOLD": 0.9, "EXACT_MATCH_THRESHOLD": 0.8}, "EXACT_MATCH_THRESHOLD"),
        ("echo_compression", {"keep_last": "many"}, "echo_compression.keep_last"),
        ("echo_compression", {"compression_style": "wild"}, "echo_compression.compression_style"),
        ("echo_compression", {"keeplast": 3}, "echo_compression.keeplast"),
        ("echo_context", {"MAX_DIRECT_TEXT_SIZE": -1}, "echo_context.MAX_DIRECT_TEXT_SIZE"),
    ],
)
def test_bad_valves_name_the_field(filter_id: str, data: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        snapshot.validate_valves(filter_id, data)


def test_unknown_filter_in_a_valves_file_is_named() -> None:
    with pytest.raises(ConfigError, match="echo_memroy: unknown filter id"):
        snapshot.build_snapshot(file_valves={"echo_memroy": {}}, source="valves.yaml")


def test_thresholds_file_merges_over_the_valve_table() -> None:
    built = snapshot.build_snapshot(
        file_valves={"echo_compression": {"summary_model": "house-model"}},
        model_thresholds={
            "house-model": {"compression_threshold_tokens": 30000, "max_context_tokens": 40000}
        },
    )
    compression = built.of("echo_compression")
    assert compression.model_thresholds["house-model"].max_context_tokens == 40000
    assert "gemini-2.5-flash" in compression.model_thresholds
    assert valves.effective_summary_window(compression) == (
        40000,
        "model_thresholds['house-model'].max_context_tokens",
    )


def test_thresholds_file_can_break_the_budget_rule() -> None:
    with pytest.raises(ConfigError, match="window=16000"):
        snapshot.build_snapshot(
            file_valves={"echo_compression": {"summary_model": "small"}},
            model_thresholds={"small": {"compression_threshold_tokens": 8000, "max_context_tokens": 16000}},
        )


def test_settings_read_echo_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHO_PIPE_MODELS", "gemini-2.5-flash, gemini-2.0-flash")
    monkeypatch.setenv("GEMINI_API_KEY", "fallback-key")
    monkeypatch.setenv("ECHO_DATA_DIR", "/tmp/echo-state")
    settings = Settings()
    assert settings.pipe_models == ["gemini-2.5-flash", "gemini-2.0-flash"]
    assert settings.gemini_api_key is not None
    assert settings.gemini_api_key.get_secret_value() == "fallback-key"
    assert str(settings.data_dir) == "/tmp/echo-state"
    monkeypatch.setenv("ECHO_GEMINI_API_KEY", "own-key")
    assert Settings().gemini_api_key.get_secret_value() == "own-key"  # type: ignore[union-attr]


def test_settings_refuse_a_non_postgres_dsn() -> None:
    with pytest.raises(ValueError, match="postgresql://"):
        Settings(database_url="mysql://x")


def test_configuration_reference_is_current() -> None:
    from pathlib import Path

    from echo.config import reference

    written = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert written.read_text(encoding="utf-8") == reference.render_reference(), "run `make docs`"


def test_thresholds_valve_as_json_text_merges_with_the_thresholds_file() -> None:
    """Open WebUI's valves editor sends `model_thresholds` back as JSON text."""
    mine = '{"mine": {"compression_threshold_tokens": 2000, "max_context_tokens": 9000}}'
    built = snapshot.build_snapshot(
        saved_valves={"echo_compression": {"model_thresholds": mine}},
        model_thresholds={"house": {"compression_threshold_tokens": 1000, "max_context_tokens": 50000}},
    )
    table = built.of("echo_compression").model_thresholds  # type: ignore[attr-defined]
    assert (table["mine"].max_context_tokens, table["house"].max_context_tokens) == (9000, 50000)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "not valid JSON text"),
        ("[1, 2]", "must be a mapping"),
        ([1, 2], "must be a mapping"),
        (7, "must be a mapping"),
    ],
)
def test_a_bad_thresholds_valve_beside_a_thresholds_file_names_the_field(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^valves\.json: echo_compression\.model_thresholds: " + message):
        snapshot.build_snapshot(
            saved_valves={"echo_compression": {"model_thresholds": value}},
            model_thresholds={"house": {"compression_threshold_tokens": 1000, "max_context_tokens": 50000}},
            source="valves.json",
        )


# --- Keys and running without auth (issue 18 items 3 and 4) ---

_KEY = "hooks-key-0123456789"
_ADMIN = "admin-key-9876543210"


@pytest.mark.parametrize("variable", ["ECHO_API_KEY", "ECHO_ADMIN_KEY"])
@pytest.mark.parametrize("value", ["", "   ", "\n", "\t \r\n"])
def test_an_empty_key_is_a_configuration_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """An empty key once turned auth off ("every caller is trusted"); now it stops the load."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"{variable}: must not be empty"):
        Settings()


def test_keys_lose_the_whitespace_around_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Secret made from a file keeps its trailing newline; an HTTP header never carries one."""
    monkeypatch.setenv("ECHO_API_KEY", f"  {_KEY}\n")
    monkeypatch.setenv("ECHO_ADMIN_KEY", f"{_ADMIN}\r\n")
    settings = Settings()
    assert settings.api_key is not None
    assert settings.admin_key is not None
    assert (settings.api_key.get_secret_value(), settings.admin_key.get_secret_value()) == (_KEY, _ADMIN)
    assert settings.allow_unauthenticated is False


def test_the_admin_key_must_differ_from_the_hooks_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same value would give the key Open WebUI holds the power to list and forget users."""
    monkeypatch.setenv("ECHO_API_KEY", _KEY)
    monkeypatch.setenv("ECHO_ADMIN_KEY", f" {_KEY} ")
    with pytest.raises(ValueError, match="ECHO_ADMIN_KEY: must differ from ECHO_API_KEY") as caught:
        Settings()
    assert _KEY not in str(caught.value)


def test_allow_unauthenticated_with_a_hooks_key_is_contradictory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHO_API_KEY", _KEY)
    monkeypatch.setenv("ECHO_ALLOW_UNAUTHENTICATED", "true")
    with pytest.raises(
        ValueError, match=r"ECHO_ALLOW_UNAUTHENTICATED: true while ECHO_API_KEY is set"
    ) as caught:
        Settings()
    assert _KEY not in str(caught.value)


def test_running_without_auth_is_a_setting_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHO_ALLOW_UNAUTHENTICATED", "true")
    monkeypatch.setenv("ECHO_ADMIN_KEY", _ADMIN)  # the admin API keeps its key even then
    settings = Settings()
    assert settings.allow_unauthenticated is True
    assert settings.api_key is None
    assert settings.admin_key is not None
    assert Settings(allow_unauthenticated=False).allow_unauthenticated is False


def test_the_bind_address_is_loopback_unless_given() -> None:
    assert Settings().host == "127.0.0.1"
    assert Settings(host="0.0.0.0").host == "0.0.0.0"
