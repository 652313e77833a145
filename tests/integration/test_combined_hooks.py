"""The combined hooks `POST /hooks/inlet` and `POST /hooks/outlet` (what the Open WebUI Function calls):
every filter in priority order in one request, each with its own valves, deadline, fail-open fallback
and status events, exactly as the per-filter Pipelines route runs it.

Most tests serve test doubles (under the ids and valves of the real filters) through the real protocol
router; auth, limits and the equivalence with the per-filter route use the real app.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.shared_data import API_KEY, load_fixture
from fastapi import FastAPI
from fastapi.testclient import TestClient

from echo.capabilities import base, registry
from echo.capabilities.events import StatusEvent
from echo.config import live as live_config
from echo.config.settings import Settings
from echo.entrypoints.http import create_app, protocol, runner, wire

USER = {"id": "user-c", "email": "c@example.com", "name": "C", "role": "user"}
EVENTS = {wire.EVENTS_HEADER: wire.EVENTS_VERSION}
NAMES = {"echo_context": "ECHO context", "echo_compression": "ECHO compression", "echo_memory": "ECHO memory"}
PRIORITIES = {"echo_context": 0, "echo_compression": 10, "echo_memory": 20}


class Double:
    """A filter that leaves its id in `hops`, says so in a status event and records what it was given;
    `mode` makes it misbehave instead."""

    description = "test double"

    def __init__(self, filter_id: str, seen: list[dict[str, Any]], mode: str = "ok") -> None:
        self.id, self.name, self.priority = filter_id, NAMES[filter_id], PRIORITIES[filter_id]
        self.seen, self.mode = seen, mode

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return await self._run(body, ctx)

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return await self._run(body, ctx)

    async def _run(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        self.seen.append(
            {
                "id": self.id,
                "phase": ctx.phase,
                "filter_id": ctx.filter_id,
                "hops": list(body.get("hops", [])),
                "valves": type(ctx.valves).__name__,
                "window": getattr(ctx.valves, "WINDOW_SIZE", None),
                "user_id": ctx.ids.user_id,
                "has_deadline": ctx.deadline is not None,
            }
        )
        ctx.events.append(StatusEvent(f"{self.id} at work"))
        if self.mode == "raise":
            body["hops"] = "half-done"  # partial edits never leak into the body handed on
            raise RuntimeError("on fire")
        if self.mode == "hang":
            await asyncio.sleep(5)
        hops = [*body.get("hops", []), self.id]
        if self.mode == "nan":
            return {**body, "hops": hops, "score": float("nan")}
        if self.mode == "set":
            return {**body, "hops": hops, "messages": [*body["messages"], {"tags": {"a"}}]}
        if self.mode == "not_a_body":
            return [body]  # type: ignore[return-value]
        return {**body, "hops": hops}


class MaskingDouble(Double):
    """A double that fails closed on the outlet, as echo_context does (`base.FailsClosed`)."""

    def fail_closed(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return {**body, "withheld": True}


def _app(
    tmp_path: Path, modes: dict[str, str] | None = None, *, masking: bool = False
) -> tuple[TestClient, list[dict[str, Any]]]:
    settings = Settings(data_dir=tmp_path / "echo", api_key=API_KEY)
    config = live_config.LiveConfig(settings)
    config.load()
    seen: list[dict[str, Any]] = []
    doubles = [
        (MaskingDouble if masking and filter_id == "echo_context" else Double)(
            filter_id, seen, (modes or {}).get(filter_id, "ok")
        )
        for filter_id in PRIORITIES
    ]
    app = FastAPI()
    router = protocol.build_protocol_router(
        filter_set=registry.FilterSet(filters={d.id: d for d in doubles}, pipes={}),
        config=config,
        max_body_bytes=settings.max_body_bytes,
        pipes_enabled=False,
    )
    for prefix in ("", "/v1"):
        app.include_router(router, prefix=prefix)
    return TestClient(app), seen


def inlet_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "messages": [{"role": "user", "content": "hello"}],
        "metadata": {"chat_id": "chat-c", "message_id": "a1", "user_id": USER["id"]},
        **extra,
    }


ORDER = ["echo_context", "echo_compression", "echo_memory"]


@pytest.mark.parametrize("prefix", ["", "/v1"])
@pytest.mark.parametrize("phase", ["inlet", "outlet"])
def test_every_filter_runs_in_priority_order_each_on_the_previous_answer(
    tmp_path: Path, prefix: str, phase: str
) -> None:
    client, seen = _app(tmp_path)
    answer = client.post(f"{prefix}/hooks/{phase}", json={"body": inlet_body(), "user": USER})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"  # a bare body when not asked for events
    assert answer.json() == {**inlet_body(), "hops": ORDER}
    assert [s["id"] for s in seen] == ORDER
    assert [s["hops"] for s in seen] == [[], ORDER[:1], ORDER[:2]]
    assert {s["phase"] for s in seen} == {phase}
    assert all(s["filter_id"] == s["id"] and s["has_deadline"] for s in seen)


def test_the_priority_valve_reorders_and_each_filter_gets_its_own_valves(tmp_path: Path) -> None:
    client, seen = _app(tmp_path)
    assert client.post("/echo_compression/valves/update", json={"priority": 30}).status_code == 200
    assert client.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 8}).status_code == 200
    answer = client.post("/hooks/inlet", json={"body": inlet_body(), "user": USER})
    order = ["echo_context", "echo_memory", "echo_compression"]
    assert answer.json()["hops"] == order
    assert [(s["id"], s["valves"], s["window"]) for s in seen] == [
        ("echo_context", "ContextValves", None),
        ("echo_memory", "MemoryValves", 8),
        ("echo_compression", "CompressionValves", None),
    ]


def test_events_of_every_filter_come_in_order_beside_the_body(tmp_path: Path) -> None:
    client, _ = _app(tmp_path)
    answer = client.post("/hooks/outlet", json={"body": inlet_body(), "user": USER}, headers=EVENTS)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == wire.HOOK_ANSWER_MEDIA_TYPE
    assert answer.headers["vary"] == wire.EVENTS_HEADER
    assert answer.json() == {
        "body": {**inlet_body(), "hops": ORDER},
        "events": [{"description": f"{fid} at work", "level": "info", "done": True} for fid in ORDER],
    }


@pytest.mark.parametrize("mode", ["raise", "nan", "set", "not_a_body"])
def test_a_failing_filter_hands_on_its_input_and_the_others_work_is_kept(tmp_path: Path, mode: str) -> None:
    client, seen = _app(tmp_path, {"echo_compression": mode})
    answer = client.post("/hooks/inlet", json={"body": inlet_body(), "user": USER}, headers=EVENTS)
    assert answer.status_code == 200
    assert answer.json() == {
        "body": {**inlet_body(), "hops": ["echo_context", "echo_memory"]},
        "events": [
            {"description": "echo_context at work", "level": "info", "done": True},
            {"description": "ECHO compression skipped: failed", "level": "warning", "done": True},
            {"description": "echo_memory at work", "level": "info", "done": True},
        ],
    }
    assert seen[2]["hops"] == ["echo_context"]  # memory got what compression was given


def test_a_filter_past_its_deadline_is_skipped_and_the_others_run(tmp_path: Path) -> None:
    client, _ = _app(tmp_path, {"echo_memory": "hang"})
    assert client.post("/echo_memory/valves/update", json={"INLET_DEADLINE_MS": 150}).status_code == 200
    answer = client.post("/hooks/inlet", json={"body": inlet_body(), "user": USER}, headers=EVENTS)
    assert answer.status_code == 200
    assert answer.elapsed.total_seconds() < 2
    shown = answer.json()
    assert shown["body"] == {**inlet_body(), "hops": ["echo_context", "echo_compression"]}
    last = shown["events"][-1]
    assert last["level"] == "warning"
    assert re.fullmatch(r"ECHO memory skipped: timed out after \d+ ms", last["description"])
    assert len(shown["events"]) == 3


def test_the_user_is_the_user_object_never_the_body(tmp_path: Path) -> None:
    client, seen = _app(tmp_path)
    body = inlet_body(user={"id": "someone-else"})
    body["metadata"]["user_id"] = "someone-else"
    client.post("/hooks/inlet", json={"body": body, "user": USER})
    assert {s["user_id"] for s in seen} == {USER["id"]}
    seen.clear()
    client.post("/hooks/inlet", json={"body": body})  # no user object: no user, whatever the body says
    assert {s["user_id"] for s in seen} == {None}


@pytest.mark.parametrize(
    "payload",
    [
        {"body": [1]},
        {"body": "x"},
        {"user": USER},
        [1],
        {"body": {"messages": "not a list"}},
    ],
)
def test_malformed_requests_are_a_422_and_run_nothing(tmp_path: Path, payload: Any) -> None:
    client, seen = _app(tmp_path)
    answer = client.post("/hooks/inlet", json=payload)
    assert answer.status_code == 422, answer.text
    assert seen == []


def test_not_json_and_a_wrong_media_type_are_refused(tmp_path: Path) -> None:
    client, seen = _app(tmp_path)
    bad = client.post("/hooks/outlet", content=b"{not json", headers={"content-type": "application/json"})
    assert 400 <= bad.status_code < 500
    plain = client.post("/hooks/outlet", content=b"{}", headers={"content-type": "text/plain"})
    assert 400 <= plain.status_code < 500
    assert seen == []
    assert client.post("/hooks/middle", json={"body": {}}).status_code in (404, 405)


def test_a_failing_masking_outlet_hands_on_its_safe_body(tmp_path: Path) -> None:
    client, _ = _app(tmp_path, {"echo_context": "raise"}, masking=True)
    answer = client.post("/hooks/outlet", json={"body": inlet_body(), "user": USER}, headers=EVENTS)
    assert answer.json()["body"] == {
        **inlet_body(),
        "withheld": True,
        "hops": ["echo_compression", "echo_memory"],
    }
    assert answer.json()["events"][0] == {
        "description": "ECHO context: the secret check failed; text that may hold a secret was withheld",
        "level": "warning",
        "done": True,
    }


@pytest.mark.parametrize("masking", [False, True])
def test_when_the_final_body_cannot_be_written_an_earlier_stage_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, masking: bool
) -> None:
    """The check let a NaN through (as if it had erred): the steps from the one that wrote it on are
    skipped as failed, and a masking outlet among them still withholds."""
    monkeypatch.setattr(runner, "_carriable", lambda new, old: True)
    nan_at = "echo_context" if masking else "echo_compression"
    client, _ = _app(tmp_path, {nan_at: "nan"}, masking=masking)
    answer = client.post("/hooks/outlet", json={"body": inlet_body(), "user": USER}, headers=EVENTS)
    assert answer.status_code == 200
    shown = answer.json()
    descriptions = [event["description"] for event in shown["events"]]
    if masking:
        assert shown["body"] == {**inlet_body(), "withheld": True}
        assert descriptions == [
            "ECHO context: the secret check failed; text that may hold a secret was withheld",
            "ECHO compression skipped: failed",
            "ECHO memory skipped: failed",
        ]
    else:
        assert shown["body"] == {**inlet_body(), "hops": ["echo_context"]}
        assert descriptions == [
            "echo_context at work",
            "ECHO compression skipped: failed",
            "ECHO memory skipped: failed",
        ]


def test_the_body_is_rendered_once_not_once_per_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = _app(tmp_path)
    rendered: list[Any] = []
    plain, real = wire.render_plain, wire.render_json

    def counting_plain(value: Any) -> bytes:
        rendered.append(value)
        return plain(value)

    def counting(value: Any) -> bytes:
        rendered.append(value)
        return real(value)

    # a plain body is rendered by msgspec (render_plain), anything else by render_json
    monkeypatch.setattr(wire, "render_plain", counting_plain)
    monkeypatch.setattr(wire, "render_json", counting)
    client.post("/hooks/inlet", json={"body": inlet_body(), "user": USER})
    assert len([value for value in rendered if isinstance(value, dict)]) == 1


def test_a_large_body_takes_the_same_path_off_the_loop(tmp_path: Path) -> None:
    client, _ = _app(tmp_path, {"echo_compression": "nan"})
    big = inlet_body()
    big["messages"] = [{"role": "user", "content": "y" * 4096} for _ in range(64)]  # over THREAD_BYTES
    assert len(json.dumps(big)) >= wire.THREAD_BYTES
    answer = client.post("/hooks/inlet", json={"body": big, "user": USER})
    assert answer.status_code == 200
    assert answer.json() == {**big, "hops": ["echo_context", "echo_memory"]}


# -- the cheap check ------------------------------------------------------------------------------------


def test_the_check_walks_only_what_changed_and_doubts_what_json_may_not_carry() -> None:
    given = {"messages": [{"role": "user", "content": "a"}, {"n": 1.5}], "model": "m"}
    assert runner._carriable(given, given)
    assert runner._carriable({**given, "messages": [*given["messages"], {"x": [1, True, None]}]}, given)
    for bad in (float("nan"), float("inf"), {"a"}, (1, 2), b"x", 10**5000, {1: "x"}, object()):
        assert not runner._carriable({**given, "extra": [{"v": bad}]}, given), bad


# -- against the real app -------------------------------------------------------------------------------


@pytest.fixture
def real(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path / "echo", api_key=API_KEY, max_body_bytes=64 * 1024)
    with TestClient(create_app(settings)) as client:
        yield client


AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.mark.parametrize("prefix", ["", "/v1"])
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-key"}, {"Authorization": API_KEY}])
def test_the_hooks_key_is_required(real: TestClient, prefix: str, headers: dict[str, str]) -> None:
    for phase in ("inlet", "outlet"):
        answer = real.post(f"{prefix}/hooks/{phase}", json={"body": inlet_body()}, headers=headers)
        assert answer.status_code == 401


def test_an_oversized_body_is_a_413(real: TestClient) -> None:
    big = inlet_body(messages=[{"role": "user", "content": "y" * 70_000}])
    assert real.post("/hooks/inlet", json={"body": big}, headers=AUTH).status_code == 413


def test_the_combined_inlet_answers_what_the_filters_one_by_one_answer(real: TestClient) -> None:
    captured = load_fixture("017_inlet_filter_all.json")["body"]
    body, user = captured["body"], captured["user"]
    # Deadlines out of the way: a loaded machine may make any one call fall back, which is not the point.
    for filter_id, name in zip(
        ORDER, ("INLET_DEADLINE_MS", "inlet_deadline_ms", "INLET_DEADLINE_MS"), strict=True
    ):
        update = real.post(f"/{filter_id}/valves/update", json={name: 60000}, headers=AUTH)
        assert update.status_code == 200, update.text
    one_by_one = copy.deepcopy(body)
    for filter_id in ORDER:
        hop = real.post(f"/{filter_id}/filter/inlet", json={"body": one_by_one, "user": user}, headers=AUTH)
        one_by_one = hop.json()
    combined = real.post("/hooks/inlet", json={"body": body, "user": user}, headers=AUTH)
    assert combined.status_code == 200
    assert _without_dates(combined.json()) == _without_dates(one_by_one)


def test_the_combined_outlet_masks_a_key(real: TestClient) -> None:
    key = "AIza" + "SyC" + "q8" * 16
    body = {
        "model": "gemini-2.5-flash",
        "messages": [
            {"id": "u1", "role": "user", "content": "key?"},
            {"id": "a1", "role": "assistant", "content": key},
        ],
        "chat_id": "chat-c",
        "id": "a1",
    }
    answer = real.post("/hooks/outlet", json={"body": body, "user": USER}, headers={**AUTH, **EVENTS})
    assert answer.status_code == 200
    assert key not in answer.text
    assert answer.json()["events"] == []


def _without_dates(body: Any) -> Any:
    """The context block carries the minute of the call; two calls may straddle one."""
    return json.loads(re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "<date>", json.dumps(body)))


def test_the_routes_are_in_the_openapi_document(real: TestClient) -> None:
    paths = real.get("/openapi.json").json()["paths"]
    for prefix in ("", "/v1"):
        for phase in ("inlet", "outlet"):
            operation = paths[f"{prefix}/hooks/{phase}"]["post"]
            assert "priority order" in operation["description"]
            assert wire.HOOK_ANSWER_MEDIA_TYPE in operation["responses"]["200"]["content"]
