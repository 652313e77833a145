"""The Pipelines protocol over HTTP against the real app: shapes, auth, limits, failure policy."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.aec_blocks import without_aec
from fakes.live_server import LiveServer

from echo.capabilities.memory import filter as memory_filter
from echo.config.settings import Settings
from echo.entrypoints.http import create_app
from echo.ports import backends as backends_port

FILTERS = {"echo_context": 0, "echo_compression": 10, "echo_memory": 20}
GOOGLE_KEY = "AIza" + "SyD" + "x7" * 16


def chat_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "messages": [
            {"id": "u1", "role": "user", "content": "hello"},
            {"id": "a1", "role": "assistant", "content": f"the key is {GOOGLE_KEY}."},
        ],
        "chat_id": "chat-1",
        "id": "a1",
        **extra,
    }


@pytest.mark.parametrize("prefix", ["", "/v1"])
def test_models_lists_the_three_filters(client: httpx.Client, prefix: str) -> None:
    answer = client.get(f"{prefix}/models")
    assert answer.status_code == 200
    listing = answer.json()
    assert listing["object"] == "list"
    assert listing["pipelines"] is True
    by_id = {model["id"]: model for model in listing["data"]}
    assert set(by_id) == set(FILTERS)  # no Gemini key: no pipe models
    for filter_id, priority in FILTERS.items():
        assert by_id[filter_id]["pipeline"] == {
            "type": "filter",
            "pipelines": ["*"],
            "priority": priority,
            "valves": True,
        }
    assert "summar" in by_id["echo_compression"]["description"]
    assert "distillation" in by_id["echo_memory"]["description"]
    assert "masks" in by_id["echo_context"]["description"]


@pytest.mark.parametrize("filter_id", list(FILTERS))
@pytest.mark.parametrize("prefix", ["", "/v1"])
def test_inlet_returns_the_body(client: httpx.Client, filter_id: str, prefix: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"chat_id": "c1"}}
    answer = client.post(f"{prefix}/{filter_id}/filter/inlet", json={"body": body, "user": {"id": "u"}})
    assert answer.status_code == 200
    returned = answer.json()
    if filter_id == "echo_compression":  # nothing compressed, so no room freed for the filters after it
        assert returned["metadata"].pop("echo_room_tokens") == 0
    assert (without_aec(returned) if filter_id == "echo_context" else returned) == body


def test_context_outlet_masks_content_and_output(client: httpx.Client) -> None:
    body = chat_body()
    body["messages"][1]["output"] = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"the key is {GOOGLE_KEY}."}],
        },
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"user pasted {GOOGLE_KEY}"}]},
    ]
    answer = client.post("/echo_context/filter/outlet", json={"body": body, "user": {"id": "u"}})
    assert answer.status_code == 200
    masked = answer.json()
    text = json.dumps(masked)
    assert GOOGLE_KEY not in text
    assert masked["messages"][1]["content"] == "the key is [CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]."
    assert masked["messages"][1]["output"][0]["content"][0]["text"].endswith("SÉCURITÉ].")
    assert "MASQUÉE" in masked["messages"][1]["output"][1]["summary"][0]["text"]
    assert masked["messages"][0] == body["messages"][0]
    assert (masked["chat_id"], masked["id"]) == ("chat-1", "a1")
    metrics = client.get("/metrics").text
    assert 'echo_secrets_masked_total{kind="google_api_key",where="outlet"}' in metrics


def test_user_messages_are_never_rewritten(client: httpx.Client) -> None:
    body = {"messages": [{"id": "u1", "role": "user", "content": f"my key {GOOGLE_KEY}"}], "chat_id": "c"}
    assert client.post("/echo_context/filter/outlet", json={"body": body}).json() == body


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"user": {}}, "body.body"),
        ({"body": []}, "body.body"),
        ({"body": {"messages": "hi"}}, "body.body.messages"),
        ({"body": {"messages": [{"content": "no role"}]}}, "body.body.messages.0.role"),
        ({"body": {"messages": [{"role": 3}]}}, "body.body.messages.0.role"),
        ({"body": {"messages": []}, "user": "someone"}, "body.user"),
    ],
)
def test_wrong_types_get_422_naming_the_field(client: httpx.Client, payload: dict, field: str) -> None:
    answer = client.post("/echo_memory/filter/inlet", json=payload)
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert field in detail["message"]


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"body": {"messages": [}'])
def test_malformed_json_gets_422(client: httpx.Client, raw: bytes) -> None:
    answer = client.post(
        "/echo_context/filter/inlet", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["detail"]["errors"][0]["loc"] == ["body"]


def test_unknown_filter_and_phase_get_404(client: httpx.Client) -> None:
    assert client.post("/echo_nope/filter/inlet", json={"body": {}}).status_code == 404
    assert "echo_context" in client.post("/echo_nope/filter/inlet", json={"body": {}}).json()["detail"]
    assert client.post("/echo_context/filter/sideways", json={"body": {}}).status_code == 404
    assert client.get("/echo_nope/valves").status_code == 404


def test_missing_or_wrong_key_gets_401(hooks_server: LiveServer) -> None:
    with httpx.Client(base_url=hooks_server.url) as anonymous:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
            answer = anonymous.post("/echo_context/filter/inlet", json={"body": {}}, headers=headers)
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"] == "Bearer"
        assert anonymous.get("/models").status_code == 401
        for open_path in ("/healthz", "/readyz", "/metrics"):
            assert anonymous.get(open_path).status_code == 200


def test_oversized_body_gets_413(tmp_path: Path, auth: dict[str, str]) -> None:
    settings = Settings(data_dir=tmp_path, api_key=auth["Authorization"].split()[1], max_body_bytes=2048)
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth) as http:
        big = {"body": {"messages": [{"role": "user", "content": "x" * 4096}]}}
        assert http.post("/echo_context/filter/inlet", json=big).status_code == 413

        def chunked():  # no content-length: the limit holds while streaming
            yield b'{"body": {"messages": [{"role": "user", "content": "'
            for _ in range(10):
                yield b"y" * 512
            yield b'"}]}}'

        json_type = {"content-type": "application/json"}
        assert (
            http.post("/echo_context/filter/inlet", content=chunked(), headers=json_type).status_code == 413
        )
        small = {"body": {"messages": [{"role": "user", "content": "ok"}]}}
        assert http.post("/echo_context/filter/inlet", json=small).status_code == 200


class _Exploding(memory_filter.MemoryFilter):
    async def inlet(self, body: dict[str, Any], ctx: Any) -> dict[str, Any]:
        body["messages"] = "half-done"  # a failing filter must not leak partial edits
        raise RuntimeError("vector store on fire")

    async def outlet(self, body: dict[str, Any], ctx: Any) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {"never": "seen"}


def test_failing_or_slow_filter_answers_200_with_the_body(
    settings: Settings, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_filter, "MemoryFilter", _Exploding)
    settings_dir = settings.data_dir
    settings_dir.mkdir(parents=True)
    (settings_dir / "valves.json").write_text(json.dumps({"echo_memory": {"OUTLET_DEADLINE_MS": 100}}))
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth) as http:
        body = chat_body()
        inlet = http.post("/echo_memory/filter/inlet", json={"body": body})
        assert (inlet.status_code, inlet.json()) == (200, body)
        outlet = http.post("/echo_memory/filter/outlet", json={"body": body})
        assert (outlet.status_code, outlet.json()) == (200, body)
        metrics = http.get("/metrics").text
    assert 'echo_hook_failures_total{filter="echo_memory",phase="inlet",reason="error"}' in metrics
    assert 'echo_hook_failures_total{filter="echo_memory",phase="outlet",reason="deadline"}' in metrics


def test_valves_get_spec_and_update(client: httpx.Client, settings: Settings) -> None:
    assert client.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 5
    spec = client.get("/v1/echo_compression/valves/spec").json()
    assert "keep_last" in spec["properties"]
    answer = client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 8})
    assert answer.status_code == 200
    assert answer.json()["WINDOW_SIZE"] == 8
    assert answer.json()["WINDOW_OVERLAP"] == 2  # missing fields fall back to defaults
    assert client.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 8
    saved = json.loads((settings.data_dir / "valves.json").read_text())
    assert saved["echo_memory"] == {"WINDOW_SIZE": 8}


def test_bad_valves_update_gets_422_and_changes_nothing(client: httpx.Client) -> None:
    answer = client.post("/echo_compression/valves/update", json={"summary_model_max_context": 10000})
    assert answer.status_code == 422
    assert "max_summary_tokens must be strictly below 80%" in answer.json()["detail"]["message"]
    assert client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": "x"}).status_code == 422
    assert client.post("/echo_memory/valves/update", json=[1]).status_code == 422
    assert client.get("/echo_compression/valves").json()["summary_model_max_context"] == 0


def test_valves_update_is_409_when_a_file_manages_them(tmp_path: Path, auth: dict[str, str]) -> None:
    valves_file = tmp_path / "valves.yaml"
    valves_file.write_text("echo_memory:\n  WINDOW_SIZE: 9\n")
    settings = Settings(
        data_dir=tmp_path / "d", api_key=auth["Authorization"].split()[1], valves_file=valves_file
    )
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth) as http:
        assert http.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 9
        answer = http.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 3})
        assert answer.status_code == 409
        assert str(valves_file) in answer.json()["detail"]


def test_compression_priority_valve_is_reported_in_models(client: httpx.Client) -> None:
    client.post("/echo_compression/valves/update", json={"priority": 15})
    listing = {m["id"]: m for m in client.get("/models").json()["data"]}
    assert listing["echo_compression"]["pipeline"]["priority"] == 15


class _Backends:
    def __init__(self) -> None:
        self.store_ok = True

    def backends(self) -> backends_port.Backends:
        return backends_port.NONE

    async def readiness(self) -> dict[str, dict[str, Any]]:
        return {
            "store": {"ok": self.store_ok} if self.store_ok else {"ok": False, "error": "connection refused"}
        }


def test_readyz_is_503_while_a_backend_cannot_answer(settings: Settings) -> None:
    backends = _Backends()

    @contextlib.asynccontextmanager
    async def open_backends(_: Settings) -> AsyncIterator[_Backends]:
        yield backends

    with LiveServer(create_app(settings, backends=open_backends)) as server:
        assert httpx.get(f"{server.url}/readyz").json()["status"] == "ready"
        backends.store_ok = False
        answer = httpx.get(f"{server.url}/readyz")
        assert answer.status_code == 503
        assert answer.json()["checks"]["store"]["error"] == "connection refused"
        assert httpx.get(f"{server.url}/healthz").status_code == 200  # alive, just not ready


@pytest.mark.parametrize("prefix", ["", "/v1"])
def test_pipelines_lists_the_filters_for_the_admin_page(client: httpx.Client, prefix: str) -> None:
    listing = client.get(f"{prefix}/pipelines").json()["data"]
    assert [(p["id"], p["type"], p["valves"]) for p in listing] == [
        ("echo_context", "filter", True),
        ("echo_compression", "filter", True),
        ("echo_memory", "filter", True),
    ]
    refused = client.post(f"{prefix}/pipelines/upload", files={"file": ("x.py", b"print(1)")})
    assert refused.status_code == 405
    assert "built in" in refused.json()["detail"]


def test_mapping_valves_round_trip_as_json_text_for_the_editor(client: httpx.Client) -> None:
    """Open WebUI's valves editor shows each valve in a text field and posts back what it shows."""
    shown = client.get("/echo_compression/valves").json()
    table = json.loads(shown["model_thresholds"])
    assert table["gemini-2.5-flash"]["max_context_tokens"] == 1048576
    table["house-model"] = {"compression_threshold_tokens": 1000, "max_context_tokens": 50000}
    saved = client.post(
        "/echo_compression/valves/update", json={**shown, "model_thresholds": json.dumps(table)}
    )
    assert saved.status_code == 200
    assert "house-model" in json.loads(saved.json()["model_thresholds"])
    as_mapping = client.post("/echo_compression/valves/update", json={"model_thresholds": table})
    assert as_mapping.status_code == 200  # files and API clients send a mapping
    broken = client.post("/echo_compression/valves/update", json={"model_thresholds": "[object Object]"})
    assert broken.status_code == 422
    assert "model_thresholds: not valid JSON text" in broken.json()["detail"]["message"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("phase", ["inlet", "outlet"])
def test_non_finite_numbers_get_422_naming_the_field(client: httpx.Client, literal: str, phase: str) -> None:
    """Python's JSON parser accepts NaN and Infinity, JSON does not (nor could we answer with them)."""
    raw = '{"body": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "score": %s}]}}'
    answer = client.post(
        f"/echo_context/filter/{phase}",
        content=(raw % literal).encode(),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert detail["errors"][0]["loc"] == ["body", "body", "messages", 1, "score"]
    assert f"body.body.messages.1.score: {literal} is not a finite number" in detail["message"]


def test_integers_python_cannot_read_get_422_naming_the_field(client: httpx.Client) -> None:
    raw = b'{"body": {"messages": [], "metadata": {"seed": ' + b"7" * 5000 + b"}}}"
    answer = client.post(
        "/echo_context/filter/inlet", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["detail"]["errors"][0]["loc"] == ["body", "body", "metadata", "seed"]
    assert "5000 digits" in answer.json()["detail"]["message"]


@pytest.mark.parametrize("depth", [990, 5000])
@pytest.mark.parametrize("phase", ["inlet", "outlet"])
def test_json_nested_too_deeply_gets_422(client: httpx.Client, depth: int, phase: str) -> None:
    raw = b'{"body": {"messages": [], "x": ' + b"[" * depth + b"]" * depth + b"}}"
    answer = client.post(
        f"/echo_context/filter/{phase}", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422
    assert "nested too deeply" in answer.json()["detail"]["message"]


def test_non_finite_valves_get_422(client: httpx.Client) -> None:
    answer = client.post(
        "/echo_memory/valves/update",
        content=b'{"SIMILARITY_THRESHOLD": NaN}',
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 422
    assert "body.SIMILARITY_THRESHOLD" in answer.json()["detail"]["message"]


@pytest.mark.parametrize("phase", ["inlet", "outlet"])
def test_lone_surrogates_come_back_as_sent(client: httpx.Client, phase: str) -> None:
    """`"\\ud800"` is valid JSON text for a lone surrogate, which UTF-8 cannot encode as such."""
    raw = b'{"body": {"messages": [{"role": "assistant", "content": "half a pair: \\ud83d!"}]}}'
    answer = client.post(
        f"/echo_context/filter/{phase}", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200
    assert answer.json()["messages"][0]["content"] == "half a pair: \ud83d!"


class _Unserialisable(memory_filter.MemoryFilter):
    async def inlet(self, body: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {**body, "score": float("nan")}

    async def outlet(self, body: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {**body, "tags": {"a set"}}


def test_an_answer_that_cannot_be_serialised_falls_back_to_the_body(
    settings: Settings, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_filter, "MemoryFilter", _Unserialisable)
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth) as http:
        body = chat_body()
        for phase in ("inlet", "outlet"):
            before = _hook_failures(http, phase)
            answer = http.post(f"/echo_memory/filter/{phase}", json={"body": body})
            assert (answer.status_code, answer.json()) == (200, body)
            assert _hook_failures(http, phase) == before + 1


def _hook_failures(http: httpx.Client, phase: str) -> float:
    series = f'echo_hook_failures_total{{filter="echo_memory",phase="{phase}",reason="error"}} '
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(series):
            return float(line.removeprefix(series))
    return 0.0


# -- status events (DESIGN §9) ---------------------------------------------------------------------------


def test_status_events_are_sent_only_to_a_caller_that_asks(client: httpx.Client) -> None:
    body = chat_body()
    plain = client.post("/echo_context/filter/outlet", json={"body": body})
    assert plain.headers["content-type"] == "application/json"
    assert plain.headers["vary"] == "X-Echo-Events"
    asked = client.post("/v1/echo_context/filter/outlet", json={"body": body}, headers={"X-Echo-Events": "1"})
    assert asked.status_code == 200
    assert asked.headers["content-type"] == "application/vnd.echo.hook-answer+json"
    assert asked.json() == {"body": plain.json(), "events": []}  # masked, and nothing went wrong


def test_a_failing_filter_raises_a_status_event_counted_in_metrics(
    settings: Settings, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_filter, "MemoryFilter", _Exploding)
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth) as http:
        body = chat_body()
        asked = http.post("/echo_memory/filter/inlet", json={"body": body}, headers={"X-Echo-Events": "1"})
        assert asked.json() == {
            "body": body,
            "events": [{"description": "ECHO memory skipped: failed", "level": "warning", "done": True}],
        }
        assert http.post("/echo_memory/filter/inlet", json={"body": body}).json() == body  # Pipelines
        metrics = http.get("/metrics").text
    assert 'echo_status_events_total{filter="echo_memory",level="warning",phase="inlet"}' in metrics
