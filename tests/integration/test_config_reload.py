"""Mounted valves and thresholds files hot-reload; a bad file keeps the last good config and says so."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.eventually import eventually_blocking
from fakes.live_server import LiveServer

from echo.config.live import LiveConfig
from echo.config.settings import Settings
from echo.entrypoints.http import create_app
from echo.errors import ConfigError


def swap_text(path: Path, text: str) -> None:
    """Replace a watched file at once, as a ConfigMap update swaps its symlink: a watcher never reads
    it half written (an empty valves file is valid, so a torn write would load the defaults)."""
    staged = path.with_name(f".{path.name}.staged")
    staged.write_text(text)
    os.replace(staged, path)


def test_a_bad_file_at_start_is_refused_with_the_field(tmp_path: Path) -> None:
    valves_file = tmp_path / "valves.yaml"
    swap_text(valves_file, "echo_memory:\n  WINDOW_SIZE: -3\n")
    config = LiveConfig(Settings(data_dir=tmp_path, valves_file=valves_file))
    with pytest.raises(ConfigError, match=r"valves\.yaml: echo_memory\.WINDOW_SIZE"):
        config.load()


@pytest.mark.parametrize(
    ("text", "message"),
    [("echo_memory: [1, 2", "not valid YAML/JSON"), ("- a\n- b\n", "top level must be a mapping")],
)
def test_unparsable_files_are_named(tmp_path: Path, text: str, message: str) -> None:
    valves_file = tmp_path / "valves.json"
    swap_text(valves_file, text)
    with pytest.raises(ConfigError, match=message):
        LiveConfig(Settings(data_dir=tmp_path, valves_file=valves_file)).load()


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        LiveConfig(Settings(data_dir=tmp_path, model_thresholds_file=tmp_path / "absent.yaml")).load()


def test_hot_reload_good_then_bad_then_good(tmp_path: Path) -> None:
    valves_file = tmp_path / "valves.yaml"
    thresholds_file = tmp_path / "thresholds.json"
    swap_text(valves_file, "echo_memory:\n  WINDOW_SIZE: 7\n")
    swap_text(
        thresholds_file, '{"house": {"compression_threshold_tokens": 1000, "max_context_tokens": 50000}}'
    )
    settings = Settings(
        data_dir=tmp_path / "d",
        api_key="k",
        valves_file=valves_file,
        model_thresholds_file=thresholds_file,
        config_reload_seconds=0.05,
    )
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": "Bearer k"}) as http,
    ):
        assert http.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 7
        compression = http.get("/echo_compression/valves").json()
        assert json.loads(compression["model_thresholds"])["house"]["max_context_tokens"] == 50000

        swap_text(valves_file, "echo_memory:\n  WINDOW_SIZE: 11\n")
        eventually_blocking(lambda: http.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 11, within=5)

        swap_text(valves_file, "echo_memory:\n  WINDOW_SIZE: eleven\n")
        eventually_blocking(lambda: http.get("/readyz").json()["status"] == "degraded", within=5)
        ready = http.get("/readyz")
        assert ready.status_code == 200  # still serving with the last good config
        assert "echo_memory.WINDOW_SIZE" in ready.json()["checks"]["config"]["error"]
        assert http.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 11
        metrics = http.get("/metrics").text
        assert "echo_config_last_reload_ok 0.0" in metrics
        assert 'echo_config_reloads_total{result="error"}' in metrics

        swap_text(
            thresholds_file, '{"house": {"compression_threshold_tokens": 1000, "max_context_tokens": 60000}}'
        )
        swap_text(valves_file, "echo_memory:\n  WINDOW_SIZE: 4\n")
        eventually_blocking(lambda: http.get("/readyz").json()["status"] == "ready", within=5)
        assert http.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 4
        compression = http.get("/echo_compression/valves").json()
        assert json.loads(compression["model_thresholds"])["house"]["max_context_tokens"] == 60000
        assert "echo_config_last_reload_ok 1.0" in http.get("/metrics").text


def test_configmap_style_symlink_swap_is_seen(tmp_path: Path) -> None:
    """Kubernetes updates a mounted ConfigMap by swapping a `..data` symlink, not by writing the file."""
    mount = tmp_path / "mount"
    first, second = tmp_path / "v1", tmp_path / "v2"
    for folder, size in ((first, 3), (second, 9)):
        folder.mkdir()
        (folder / "valves.yaml").write_text(f"echo_memory:\n  WINDOW_SIZE: {size}\n")
    mount.mkdir()
    (mount / "..data").symlink_to(first)
    (mount / "valves.yaml").symlink_to(mount / "..data" / "valves.yaml")
    config = LiveConfig(Settings(data_dir=tmp_path / "d", valves_file=mount / "valves.yaml"))
    config.load()
    assert config.valves("echo_memory").WINDOW_SIZE == 3  # type: ignore[attr-defined]
    (mount / "..data_tmp").symlink_to(second)
    (mount / "..data_tmp").replace(mount / "..data")
    assert config.reload_if_changed()
    assert config.valves("echo_memory").WINDOW_SIZE == 9  # type: ignore[attr-defined]


HOUSE = {"house": {"compression_threshold_tokens": 1000, "max_context_tokens": 50000}}


@pytest.fixture
def thresholds_settings(tmp_path: Path) -> Settings:
    thresholds_file = tmp_path / "thresholds.json"
    swap_text(thresholds_file, json.dumps(HOUSE))
    return Settings(
        data_dir=tmp_path / "d",
        api_key="k",
        model_thresholds_file=thresholds_file,
        config_reload_seconds=0.05,
    )


def test_valves_update_with_thresholds_as_json_text_beside_a_thresholds_file(
    thresholds_settings: Settings,
) -> None:
    """Open WebUI's editor posts `model_thresholds` as JSON text; the file's entries merge over it."""
    with (
        LiveServer(create_app(thresholds_settings)) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": "Bearer k"}) as http,
    ):
        shown = http.get("/echo_compression/valves").json()
        table = json.loads(shown["model_thresholds"])
        table["mine"] = {"compression_threshold_tokens": 2000, "max_context_tokens": 9000}
        saved = http.post(
            "/echo_compression/valves/update", json={**shown, "model_thresholds": json.dumps(table)}
        )
        assert saved.status_code == 200, saved.text
        merged = json.loads(saved.json()["model_thresholds"])
        assert merged["mine"]["max_context_tokens"] == 9000
        assert merged["house"]["max_context_tokens"] == 50000
        for text in ("[object Object]", "[1, 2]", '"a string"'):
            refused = http.post("/echo_compression/valves/update", json={"model_thresholds": text})
            assert refused.status_code == 422, (text, refused.text)
            assert "echo_compression.model_thresholds" in refused.json()["detail"]["message"]
        assert json.loads(http.get("/echo_compression/valves").json()["model_thresholds"])["mine"]


def test_saved_thresholds_text_loads_at_start_beside_a_thresholds_file(thresholds_settings: Settings) -> None:
    """valves.json written by an earlier release kept the editor's JSON text as is."""
    saved = thresholds_settings.data_dir / "valves.json"
    saved.parent.mkdir(parents=True)
    mine = {"mine": {"compression_threshold_tokens": 2000, "max_context_tokens": 9000}}
    swap_text(saved, json.dumps({"echo_compression": {"model_thresholds": json.dumps(mine)}}))
    config = LiveConfig(thresholds_settings)
    table = config.load().of("echo_compression").model_thresholds  # type: ignore[attr-defined]
    assert (table["mine"].max_context_tokens, table["house"].max_context_tokens) == (9000, 50000)

    swap_text(saved, json.dumps({"echo_compression": {"model_thresholds": "{not json"}}))
    with pytest.raises(ConfigError, match=r"echo_compression\.model_thresholds: not valid JSON text"):
        LiveConfig(thresholds_settings).load()


@pytest.mark.parametrize(
    ("valves_text", "message"),
    [
        ("echo_compression:\n  model_thresholds: '{not json'\n", "not valid JSON text"),
        ("echo_compression:\n  model_thresholds: '[1, 2]'\n", "must be a mapping"),
        ("echo_compression:\n  model_thresholds: [1, 2]\n", "must be a mapping"),
    ],
)
def test_a_bad_thresholds_valve_at_start_names_the_field(
    thresholds_settings: Settings, tmp_path: Path, valves_text: str, message: str
) -> None:
    valves_file = tmp_path / "valves.yaml"
    swap_text(valves_file, valves_text)
    settings = thresholds_settings.model_copy(update={"valves_file": valves_file})
    with pytest.raises(ConfigError, match=r"echo_compression\.model_thresholds: " + message):
        LiveConfig(settings).load()


def test_a_bad_thresholds_valve_on_reload_keeps_the_last_good_config(
    thresholds_settings: Settings, tmp_path: Path
) -> None:
    valves_file = tmp_path / "valves.yaml"
    mine = {"mine": {"compression_threshold_tokens": 2000, "max_context_tokens": 9000}}
    swap_text(valves_file, f"echo_compression:\n  model_thresholds: '{json.dumps(mine)}'\n")
    settings = thresholds_settings.model_copy(update={"valves_file": valves_file})

    def thresholds(http: httpx.Client) -> dict[str, Any]:
        table: dict[str, Any] = json.loads(http.get("/echo_compression/valves").json()["model_thresholds"])
        return table

    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": "Bearer k"}) as http,
    ):
        assert {"mine", "house"} <= set(thresholds(http))
        swap_text(valves_file, "echo_compression:\n  model_thresholds: '{not json'\n")
        eventually_blocking(lambda: http.get("/readyz").json()["status"] == "degraded", within=5)
        error = http.get("/readyz").json()["checks"]["config"]["error"]
        assert "echo_compression.model_thresholds: not valid JSON text" in error
        assert {"mine", "house"} <= set(thresholds(http))  # the last good config

        swap_text(valves_file, "echo_compression:\n  model_thresholds: '{}'\n")  # the watcher lives on
        eventually_blocking(lambda: http.get("/readyz").json()["status"] == "ready", within=5)
        assert "mine" not in thresholds(http)
        assert "house" in thresholds(http)
