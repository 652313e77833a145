"""Status events as data (DESIGN §9), end to end: filters and the hook runner raise them, a Pipelines
call gets the bare body (the events go to logs and `echo_status_events_total`), and the Open WebUI
Function, which asks with `X-Echo-Events: 1`, gets them beside the body and emits each.

The filters here are test doubles served through the real protocol router (not `create_app`, whose
filter set is fixed), under the ids and valves of the real filters.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import structlog
from fakes.aec_blocks import without_aec
from fakes.live_server import LiveServer
from fakes.shared_data import API_KEY
from fastapi import FastAPI
from prometheus_client import REGISTRY

from echo.capabilities import base, registry
from echo.capabilities.context import filter as context
from echo.capabilities.events import StatusEvent
from echo.capabilities.masking import filter as masking_filter
from echo.config import live as live_config
from echo.config.settings import Settings
from echo.config.valves import ContextValves
from echo.domain import bodies
from echo.entrypoints.http import protocol, runner, wire

FUNCTION_PATH = Path(__file__).resolve().parents[2] / "integrations" / "openwebui" / "echo_filter_function.py"
GOOGLE_KEY = "AIza" + "SyE" + "k3" * 16
USER = {"id": "user-ev", "email": "ev@example.com", "name": "Ev", "role": "user"}
DEADLINE_MS = 200


class _Remembering:
    """Adds events on success: one on the inlet, a running one and its end on the outlet."""

    id = "echo_memory"
    name = "ECHO memory"
    priority = 20
    description = "test"

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        ctx.events.append(StatusEvent("ECHO memory: 2 memories recalled"))
        return {**body, "recalled": 2}

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        ctx.events.append(StatusEvent("ECHO memory: saving", done=False))
        ctx.events.append(StatusEvent("ECHO memory: 1 memory saved"))
        return body


class _Stuck:
    """Says it is compressing, then runs past its inlet deadline; its outlet raises."""

    id = "echo_compression"
    name = "ECHO compression"
    priority = 10
    description = "test"

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        ctx.events.append(StatusEvent("ECHO compression: compressed 40000 to 9000 tokens"))
        await asyncio.sleep(5)
        return body

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        ctx.events.append(StatusEvent("ECHO compression: summary queued"))
        raise RuntimeError("summary store on fire")


class _SlowMasker(context.ContextFilter):
    """The real `echo_context` whose outlet cannot finish in time: it must fail closed."""

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        await asyncio.sleep(5)
        return body


@pytest.fixture(scope="module")
def function_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("echo_filter_function_events", FUNCTION_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def events_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("events")
    valves_file = data_dir / "valves.json"
    valves_file.write_text(
        json.dumps(
            {
                "echo_context": {"OUTLET_DEADLINE_MS": DEADLINE_MS},
                "echo_compression": {"inlet_deadline_ms": DEADLINE_MS, "outlet_deadline_ms": DEADLINE_MS},
            }
        )
    )
    settings = Settings(data_dir=data_dir / "echo", api_key=API_KEY, valves_file=valves_file)
    config = live_config.LiveConfig(settings)
    config.load()
    flts: list[base.Filter] = [_SlowMasker(lambda counts: None), _Stuck(), _Remembering()]
    app = FastAPI()
    app.include_router(
        protocol.build_protocol_router(
            filter_set=registry.FilterSet(filters={f.id: f for f in flts}, pipes={}),
            config=config,
            max_body_bytes=settings.max_body_bytes,
            pipes_enabled=False,
        )
    )
    with LiveServer(app, name="echo-events") as server:
        yield server


class Emitted:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.seen.append(event)


def inlet_body() -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "messages": [{"role": "user", "content": "hello"}],
        "metadata": {"chat_id": "chat-ev", "message_id": "a1", "user_id": USER["id"]},
    }


def outlet_body() -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "messages": [
            {"id": "u1", "role": "user", "content": "my key?"},
            {"id": "a1", "role": "assistant", "content": f"the key is {GOOGLE_KEY}."},
        ],
        "chat_id": "chat-ev",
        "id": "a1",
    }


def events_count(filter_id: str, phase: str, level: str) -> float:
    labels = {"filter": filter_id, "phase": phase, "level": level}
    return REGISTRY.get_sample_value("echo_status_events_total", labels) or 0.0


SKIPPED_INLET = StatusEvent(f"ECHO compression skipped: timed out after {DEADLINE_MS} ms", "warning")
SKIPPED_OUTLET = StatusEvent("ECHO compression skipped: failed", "warning")
WITHHELD = StatusEvent(
    f"ECHO context: the secret check timed out after {DEADLINE_MS} ms; "
    "text that may hold a secret was withheld",
    "warning",
)


# -- through the Function shim -------------------------------------------------------------------------


async def test_the_function_emits_each_event_and_returns_only_the_body(
    function_module: ModuleType, events_server: LiveServer
) -> None:
    echo_filter = function_module.Filter()
    echo_filter.valves = function_module.Filter.Valves(
        ECHO_URL=events_server.url, ECHO_API_KEY=API_KEY, TIMEOUT_SECONDS=5
    )
    emitted = Emitted()
    answer = await echo_filter.inlet(inlet_body(), __user__=USER, __event_emitter__=emitted)
    # no "body" or "events" key reaches Open WebUI; echo_context added the turn's AEC block
    assert without_aec(answer) == {**inlet_body(), "recalled": 2}
    assert emitted.seen == [
        SKIPPED_INLET.to_openwebui(),  # the filter's own "compressed" line went with its edits
        StatusEvent("ECHO memory: 2 memories recalled").to_openwebui(),
    ]
    assert emitted.seen[0] == {
        "type": "status",
        "data": {"description": f"ECHO compression skipped: timed out after {DEADLINE_MS} ms", "done": True},
    }


async def test_a_failed_masking_outlet_says_it_withheld_text(
    function_module: ModuleType, events_server: LiveServer
) -> None:
    echo_filter = function_module.Filter()
    echo_filter.valves = function_module.Filter.Valves(ECHO_URL=events_server.url, ECHO_API_KEY=API_KEY)
    emitted = Emitted()
    answer = await echo_filter.outlet(outlet_body(), __user__=USER, __event_emitter__=emitted)
    assert answer["messages"][1]["content"] == masking_filter.WITHHELD
    assert GOOGLE_KEY not in json.dumps(answer)
    assert emitted.seen == [
        WITHHELD.to_openwebui(),
        SKIPPED_OUTLET.to_openwebui(),
        StatusEvent("ECHO memory: saving", done=False).to_openwebui(),
        StatusEvent("ECHO memory: 1 memory saved").to_openwebui(),
    ]


# -- over HTTP: what each kind of caller gets ------------------------------------------------------------


@pytest.mark.parametrize("ask", [None, "0", "2", "yes"])
def test_a_pipelines_call_gets_the_bare_body_and_the_events_are_counted(
    events_server: LiveServer, ask: str | None
) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    if ask is not None:
        headers[wire.EVENTS_HEADER] = ask  # not a version this service speaks: as if not asked
    before = events_count("echo_memory", "inlet", "info")
    answer = httpx.post(
        f"{events_server.url}/echo_memory/filter/inlet",
        json={"body": inlet_body(), "user": USER},
        headers=headers,
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["vary"] == wire.EVENTS_HEADER
    assert answer.json() == {**inlet_body(), "recalled": 2}
    assert events_count("echo_memory", "inlet", "info") == before + 1


@pytest.mark.parametrize(
    ("filter_id", "phase", "body", "event", "level"),
    [
        ("echo_memory", "inlet", inlet_body(), StatusEvent("ECHO memory: 2 memories recalled"), "info"),
        ("echo_compression", "inlet", inlet_body(), SKIPPED_INLET, "warning"),
        ("echo_compression", "outlet", outlet_body(), SKIPPED_OUTLET, "warning"),
        ("echo_context", "outlet", outlet_body(), WITHHELD, "warning"),
    ],
)
def test_asked_for_events_the_answer_carries_them_beside_the_body(
    events_server: LiveServer,
    filter_id: str,
    phase: str,
    body: dict[str, Any],
    event: StatusEvent,
    level: str,
) -> None:
    url = f"{events_server.url}/{filter_id}/filter/{phase}"
    auth = {"Authorization": f"Bearer {API_KEY}"}
    plain = httpx.post(url, json={"body": body, "user": USER}, headers=auth)
    before = events_count(filter_id, phase, level)
    asked = httpx.post(
        url, json={"body": body, "user": USER}, headers={**auth, wire.EVENTS_HEADER: wire.EVENTS_VERSION}
    )
    assert asked.status_code == 200
    assert asked.headers["content-type"] == wire.HOOK_ANSWER_MEDIA_TYPE
    envelope = asked.json()
    assert set(envelope) == {"body", "events"}
    assert envelope["body"] == plain.json()  # the same body either way
    assert envelope["events"] == [event.to_wire()]
    assert envelope["events"][0]["level"] == level
    assert events_count(filter_id, phase, level) == before + 1  # counted when handed back too


# -- the runner on its own ---------------------------------------------------------------------------------


def hook_context(filter_id: str, phase: base.Phase) -> base.HookContext:
    return base.HookContext(
        filter_id=filter_id,
        phase=phase,
        user={},
        ids=bodies.turn_ids(outlet_body()),
        valves=ContextValves(INLET_DEADLINE_MS=DEADLINE_MS, OUTLET_DEADLINE_MS=DEADLINE_MS),
    )


async def test_the_runner_logs_each_event_at_its_level() -> None:
    ctx = hook_context("echo_memory", "outlet")
    with structlog.testing.capture_logs() as logs:
        await runner.run_hook(_Remembering(), outlet_body(), ctx)
    assert ctx.events == [
        StatusEvent("ECHO memory: saving", done=False),
        StatusEvent("ECHO memory: 1 memory saved"),
    ]
    lines = [line for line in logs if line["event"] == "status_event"]
    assert [(line["log_level"], line["description"], line["done"]) for line in lines] == [
        ("info", "ECHO memory: saving", False),
        ("info", "ECHO memory: 1 memory saved", True),
    ]

    ctx = hook_context("echo_compression", "inlet")
    with structlog.testing.capture_logs() as logs:
        await runner.run_hook(_Stuck(), inlet_body(), ctx)
    assert ctx.events == [SKIPPED_INLET]
    discarded = next(line for line in logs if line["event"] == "status_events_discarded")
    assert discarded["descriptions"] == ["ECHO compression: compressed 40000 to 9000 tokens"]
    assert ("warning", SKIPPED_INLET.description) in [
        (line["log_level"], line.get("description")) for line in logs if line["event"] == "status_event"
    ]


class _BrokenFailClosed(_SlowMasker):
    def fail_closed(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        raise RuntimeError("withholding broke too")


async def test_a_masking_outlet_that_cannot_fail_closed_says_the_answer_is_unchecked() -> None:
    ctx = hook_context("echo_context", "outlet")
    answer = json.loads(await runner.run_hook(_BrokenFailClosed(lambda counts: None), outlet_body(), ctx))
    assert answer == outlet_body()
    assert ctx.events == [
        StatusEvent(
            f"ECHO context: the secret check timed out after {DEADLINE_MS} ms; "
            "this answer was NOT checked for secrets",
            "error",
        )
    ]


async def test_a_masking_outlet_with_nothing_to_withhold_says_so() -> None:
    ctx = hook_context("echo_context", "outlet")
    body = {**outlet_body(), "messages": [{"id": "a1", "role": "assistant", "content": "Rien de secret."}]}
    answer = json.loads(await runner.run_hook(_SlowMasker(lambda counts: None), body, ctx))
    assert answer == body
    assert [(e.level, e.description.rsplit("; ", 1)[1]) for e in ctx.events] == [
        ("warning", "nothing needed withholding")
    ]


class _Chatty(_Remembering):
    def __init__(self, events: list[Any]) -> None:
        self.to_raise = events

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        ctx.events.extend(self.to_raise)
        return body


async def test_malformed_events_are_dropped_and_a_flood_is_cut_without_costing_the_body() -> None:
    junk: list[Any] = ["not an event", StatusEvent(""), StatusEvent("bad level", "loud"), StatusEvent("ok")]  # type: ignore[arg-type]
    ctx = hook_context("echo_memory", "inlet")
    assert json.loads(await runner.run_hook(_Chatty(junk), inlet_body(), ctx)) == inlet_body()
    assert ctx.events == [StatusEvent("ok")]

    flood = [StatusEvent(f"line {n}") for n in range(runner.MAX_EVENTS + 5)]
    ctx = hook_context("echo_memory", "inlet")
    with structlog.testing.capture_logs() as logs:
        await runner.run_hook(_Chatty(flood), inlet_body(), ctx)
    assert ctx.events == flood[: runner.MAX_EVENTS]
    assert any(line["event"] == "status_events_dropped" for line in logs)
