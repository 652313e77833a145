"""The Open WebUI Function (integrations/openwebui/echo_filter_function.py) against real HTTP servers.

The file is loaded by path, as Open WebUI loads a pasted Function, and driven the way Open WebUI calls
a Filter: `await filter.inlet(body, __user__=..., __event_emitter__=...)`. Success cases run against
the real hook app; failure cases against closed ports and tiny Starlette servers that misbehave. The
Function makes one call per phase (`POST /hooks/inlet`, `POST /hooks/outlet`): two per turn.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import importlib.util
import json
import logging
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakes.aec_blocks import without_aec
from fakes.live_server import LiveServer
from fakes.shared_data import API_KEY, load_fixture
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

FUNCTION_PATH = Path(__file__).resolve().parents[2] / "integrations" / "openwebui" / "echo_filter_function.py"
FILTER_IDS = ["echo_context", "echo_compression", "echo_memory"]
GOOGLE_KEY = "AIza" + "SyB" + "x_-9" * 8  # 35 characters after "AIza", built at runtime
MASKED_GOOGLE_KEY = "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]"
USER = {"id": "user-1", "email": "ada@example.com", "name": "Ada", "role": "user", "valves": {"x": 1}}
HOOK_ANSWER = "application/vnd.echo.hook-answer+json"  # echo.entrypoints.http.wire.HOOK_ANSWER_MEDIA_TYPE


@pytest.fixture(scope="module")
def function_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("echo_filter_function_under_test", FUNCTION_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not put in sys.modules: Open WebUI execs pasted code on its own
    return module


class Events:
    """An `__event_emitter__` that records what it is given."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.seen.append(event)

    def only_status(self) -> str:
        assert len(self.seen) == 1, self.seen
        event = self.seen[0]
        assert event["type"] == "status"
        assert event["data"]["done"] is True
        description = event["data"]["description"]
        assert description.startswith("ECHO unavailable: ")
        assert description.endswith("; continuing without it")
        return description


def make_filter(module: ModuleType, url: str, **valves: Any) -> Any:
    echo_filter = module.Filter()
    echo_filter.valves = module.Filter.Valves(ECHO_URL=url, **valves)
    return echo_filter


def inlet_body() -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "stream": True,
        "messages": [{"role": "user", "content": "hello"}],
        "metadata": {"chat_id": "chat-fn", "message_id": "a1", "user_id": USER["id"]},
    }


def outlet_body(content: str = f"the key is {GOOGLE_KEY}.") -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "messages": [
            {"id": "u1", "role": "user", "content": "what is my key?"},
            {"id": "a1", "role": "assistant", "content": content},
        ],
        "chat_id": "chat-fn",
        "session_id": "s1",
        "id": "a1",
    }


def closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class StubEcho:
    """A stand-in for echo-hooks' combined hook: records each call; `mode` says how to answer. A
    well-behaved answer runs "every filter": each leaves its id in `hops`."""

    def __init__(self, mode: str = "chain") -> None:
        self.mode = mode
        self.calls: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/hooks/{phase}", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        payload = json.loads(await request.body())
        self.calls.append(
            {
                "path": request.url.path,
                "authorization": request.headers.get("authorization"),
                "x-echo-events": request.headers.get("x-echo-events"),
                **payload,
            }
        )
        mode = self.mode
        body = payload["body"]
        chained = {**body, "hops": [*body.get("hops", []), *FILTER_IDS]}
        if mode == "chain":  # a well-behaved answer, the bare body (no events asked or none to give)
            return JSONResponse(chained)
        if mode == "events":  # the body-and-events envelope, one event per filter
            events = [
                {"description": f"{fid} did its part", "level": "info", "done": True} for fid in FILTER_IDS
            ]
            return JSONResponse({"body": chained, "events": events}, media_type=HOOK_ANSWER)
        if mode == "odd_events":  # well-formed envelope, some events malformed, too many of them
            odd: list[Any] = [
                "text",
                {"level": "info"},
                {"description": "", "done": True},
                {"description": "not done?", "done": "yes"},
                {"description": "echo_memory kept"},  # done defaults to true
                {"description": "echo_memory running", "level": "warning", "done": False, "extra": 1},
            ]
            odd += [{"description": f"echo_memory flood {n}"} for n in range(30)]
            return JSONResponse({"body": chained, "events": odd}, media_type=HOOK_ANSWER)
        if mode == "bad_envelope":
            return JSONResponse({"body": [chained], "events": []}, media_type=HOOK_ANSWER)
        if mode == "envelope_without_events":
            return JSONResponse({"body": chained}, media_type=HOOK_ANSWER)
        if mode == "looks_like_envelope":  # a bare body (application/json) that has such keys
            return JSONResponse({"body": {"x": 1}, "events": [{"description": "not an event"}]})
        if mode == "hang":  # until the client gives up (then the server can stop at once)
            for _ in range(400):
                if await request.is_disconnected():
                    break
                await asyncio.sleep(0.025)
            return Response(status_code=204)
        if mode == "not_json":
            return PlainTextResponse("<html>proxy says hello</html>")
        if mode == "json_list":
            return JSONResponse([payload["body"]])
        if mode == "empty":
            return Response(status_code=200, media_type="application/json")
        if mode == "error_500":
            return PlainTextResponse("Internal Server Error", status_code=500)
        raise AssertionError(f"unknown mode {mode}")


@pytest.fixture
def stub_server(request: pytest.FixtureRequest) -> Iterator[tuple[StubEcho, LiveServer]]:
    stub = StubEcho(*getattr(request, "param", ("chain",)))
    with LiveServer(stub.app, name="stub-echo") as server:
        yield stub, server


# -- the file itself ----------------------------------------------------------------------------------


def test_file_has_frontmatter_and_imports_only_what_open_webui_ships() -> None:
    source = FUNCTION_PATH.read_text()
    lines = source.splitlines()
    assert lines[0] == '"""'  # Open WebUI reads the frontmatter only when the file opens with it
    end = lines.index('"""', 1)
    frontmatter = dict(line.split(":", 1) for line in lines[1:end])
    frontmatter = {key.strip(): value.strip() for key, value in frontmatter.items()}
    for key in ("title", "author", "version", "license", "description"):
        assert frontmatter[key], key
    assert frontmatter.get("requirements", "") == ""  # anything there would be pip-installed

    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            imported.add((node.module or "").split(".")[0])
    outside = imported - set(sys.stdlib_module_names) - {"__future__", "aiohttp", "pydantic"}
    assert not outside, outside


def test_valves_defaults(function_module: ModuleType) -> None:
    valves = function_module.Filter().valves
    assert valves.ECHO_URL == "http://echo-hooks:9099"
    assert valves.ECHO_API_KEY == ""
    assert valves.TIMEOUT_SECONDS == 3.0
    assert valves.OUTLET_TIMEOUT_SECONDS == 10.0
    assert not hasattr(valves, "FILTER_IDS")  # ECHO runs every filter of its own in one call
    assert valves.priority == 0


# -- against the real app -----------------------------------------------------------------------------


async def test_fixture_inlet_passes_through_all_three_filters(
    function_module: ModuleType, hooks_server: LiveServer
) -> None:
    captured = load_fixture("017_inlet_filter_all.json")["body"]  # {"user": ..., "body": ...}
    body, user = captured["body"], captured["user"]
    original = copy.deepcopy(body)
    echo_filter = make_filter(function_module, hooks_server.url, ECHO_API_KEY=API_KEY, TIMEOUT_SECONDS=10)
    events = Events()
    answer = await echo_filter.inlet(body, __user__=user, __event_emitter__=events)
    assert answer["metadata"].pop("echo_room_tokens") == 0  # a short chat: nothing freed for memories
    assert without_aec(answer) == original  # echo_context's AEC block is the turn's only addition
    assert body == original  # the caller's body is not mutated either
    (said,) = events.seen  # the attached file is left to Open WebUI, and the user is told why
    assert said["type"] == "status"
    assert "note.txt: left to Open WebUI (ECHO_OPENWEBUI_URL" in said["data"]["description"]


async def test_outlet_masks_a_google_key_through_the_real_app(
    function_module: ModuleType, hooks_server: LiveServer
) -> None:
    echo_filter = make_filter(function_module, hooks_server.url + "/", ECHO_API_KEY=API_KEY)
    events = Events()
    answer = await echo_filter.outlet(outlet_body(), __user__=USER, __event_emitter__=events)
    assert answer["messages"][1]["content"] == f"the key is {MASKED_GOOGLE_KEY}."
    assert GOOGLE_KEY not in json.dumps(answer)
    assert answer["messages"][0] == outlet_body()["messages"][0]
    assert events.seen == []


async def test_wrong_key_keeps_the_body_and_emits_a_status(
    function_module: ModuleType, hooks_server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    wrong_key = "wrong-key-" + "z" * 12
    echo_filter = make_filter(function_module, hooks_server.url, ECHO_API_KEY=wrong_key)
    events = Events()
    with caplog.at_level(logging.WARNING):
        answer = await echo_filter.outlet(outlet_body(), __user__=USER, __event_emitter__=events)
    assert answer == outlet_body()  # not masked, but the chat goes on
    assert "outlet answered HTTP 401" in events.only_status()
    assert "chat-fn" in caplog.text
    assert "outlet" in caplog.text
    assert wrong_key not in caplog.text
    assert wrong_key not in json.dumps(events.seen)


# -- failing open ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["inlet", "outlet"])
async def test_server_down_keeps_the_body_and_emits_a_status(
    function_module: ModuleType, phase: str, caplog: pytest.LogCaptureFixture
) -> None:
    echo_filter = make_filter(function_module, closed_port_url(), ECHO_API_KEY=API_KEY)
    body = inlet_body() if phase == "inlet" else outlet_body()
    events = Events()
    with caplog.at_level(logging.WARNING):
        answer = await getattr(echo_filter, phase)(body, __user__=USER, __event_emitter__=events)
    assert answer == body
    assert "connection error" in events.only_status()
    assert "chat-fn" in caplog.text
    assert API_KEY not in caplog.text


async def test_server_down_without_an_emitter_or_a_user(function_module: ModuleType) -> None:
    echo_filter = make_filter(function_module, closed_port_url())
    assert await echo_filter.inlet(inlet_body()) == inlet_body()


@pytest.mark.parametrize("stub_server", [("hang",)], indirect=True)
@pytest.mark.parametrize("phase", ["inlet", "outlet"])
async def test_a_hanging_server_costs_about_the_timeout_once(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer], phase: str
) -> None:
    stub, server = stub_server
    timeouts = {"TIMEOUT_SECONDS": 0.5, "OUTLET_TIMEOUT_SECONDS": 30.0}
    if phase == "outlet":
        timeouts = {"TIMEOUT_SECONDS": 30.0, "OUTLET_TIMEOUT_SECONDS": 0.5}
    echo_filter = make_filter(function_module, server.url, **timeouts)
    body = inlet_body() if phase == "inlet" else outlet_body()
    events = Events()
    started = time.monotonic()
    answer = await getattr(echo_filter, phase)(body, __user__=USER, __event_emitter__=events)
    elapsed = time.monotonic() - started
    assert answer == body
    assert 0.4 < elapsed < 1.5, elapsed  # one deadline for the call
    assert f"{phase} timed out" in events.only_status()
    assert [call["path"] for call in stub.calls] == [f"/hooks/{phase}"]


@pytest.mark.parametrize(
    ("stub_server", "reason"),
    [
        (("not_json",), "not JSON"),
        (("json_list",), "a JSON list"),
        (("empty",), "an empty answer"),
        (("error_500",), "HTTP 500"),
    ],
    indirect=["stub_server"],
)
async def test_a_bad_answer_keeps_the_body(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer], reason: str
) -> None:
    stub, server = stub_server
    echo_filter = make_filter(function_module, server.url)
    events = Events()
    answer = await echo_filter.outlet(outlet_body(), __user__=USER, __event_emitter__=events)
    assert answer == outlet_body()
    description = events.only_status()  # one status for the call
    assert reason in description
    assert description.startswith("ECHO unavailable: outlet ")
    assert len(stub.calls) == 1


# -- what goes on the wire ------------------------------------------------------------------------------


async def test_one_call_per_phase_with_the_key_and_the_user(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer]
) -> None:
    stub, server = stub_server
    echo_filter = make_filter(function_module, server.url + "/", ECHO_API_KEY=API_KEY)
    answer = await echo_filter.inlet(inlet_body(), __user__=USER, __event_emitter__=Events())
    assert answer == {**inlet_body(), "hops": FILTER_IDS}
    answer = await echo_filter.outlet(outlet_body(), __user__=USER, __event_emitter__=Events())
    assert answer == {**outlet_body(), "hops": FILTER_IDS}
    assert [call["path"] for call in stub.calls] == ["/hooks/inlet", "/hooks/outlet"]  # two per turn
    assert [call["body"] for call in stub.calls] == [inlet_body(), outlet_body()]
    for call in stub.calls:
        assert call["authorization"] == f"Bearer {API_KEY}"
        assert call["user"] == {key: USER[key] for key in ("id", "email", "name", "role")}


async def test_no_key_no_authorization_header(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer]
) -> None:
    stub, server = stub_server
    echo_filter = make_filter(function_module, server.url)
    answer = await echo_filter.outlet(outlet_body())
    assert answer["hops"] == FILTER_IDS
    assert [call["authorization"] for call in stub.calls] == [None]
    assert stub.calls[0]["user"] == {}


async def test_an_empty_url_calls_nothing(function_module: ModuleType) -> None:
    assert await make_filter(function_module, "  ").inlet(inlet_body()) == inlet_body()


async def test_a_broken_emitter_does_not_fail_the_chat(function_module: ModuleType) -> None:
    async def broken(event: dict[str, Any]) -> None:
        raise RuntimeError("websocket gone")

    echo_filter = make_filter(function_module, closed_port_url())
    assert await echo_filter.outlet(outlet_body(), __user__=USER, __event_emitter__=broken) == outlet_body()


# -- status events from ECHO (X-Echo-Events) -----------------------------------------------------------


def test_the_function_speaks_the_wire_constants_of_the_service(function_module: ModuleType) -> None:
    from echo.entrypoints.http import wire

    assert function_module.EVENTS_HEADER == wire.EVENTS_HEADER
    assert function_module.EVENTS_VERSION == wire.EVENTS_VERSION
    assert function_module.HOOK_ANSWER_MEDIA_TYPE == wire.HOOK_ANSWER_MEDIA_TYPE == HOOK_ANSWER


async def test_asks_for_events_and_takes_a_bare_body_too(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer]
) -> None:
    stub, server = stub_server  # "chain": answers the bare body as application/json
    events = Events()
    answer = await make_filter(function_module, server.url).inlet(
        inlet_body(), __user__=USER, __event_emitter__=events
    )
    assert answer == {**inlet_body(), "hops": FILTER_IDS}
    assert [call["x-echo-events"] for call in stub.calls] == ["1"]
    assert events.seen == []


@pytest.mark.parametrize("stub_server", [("events",)], indirect=True)
@pytest.mark.parametrize("phase", ["inlet", "outlet"])
async def test_events_are_emitted_in_order_and_only_the_body_is_returned(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer], phase: str
) -> None:
    stub, server = stub_server
    body = inlet_body() if phase == "inlet" else outlet_body()
    events = Events()
    answer = await getattr(make_filter(function_module, server.url), phase)(
        body, __user__=USER, __event_emitter__=events
    )
    assert answer == {**body, "hops": FILTER_IDS}
    assert len(stub.calls) == 1
    assert events.seen == [
        {"type": "status", "data": {"description": f"{fid} did its part", "done": True}} for fid in FILTER_IDS
    ]


@pytest.mark.parametrize("stub_server", [("odd_events",)], indirect=True)
async def test_malformed_events_are_skipped_and_a_flood_is_cut(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer], caplog: pytest.LogCaptureFixture
) -> None:
    _, server = stub_server
    events = Events()
    with caplog.at_level(logging.WARNING):
        answer = await make_filter(function_module, server.url).outlet(
            outlet_body(), __user__=USER, __event_emitter__=events
        )
    assert answer == {**outlet_body(), "hops": FILTER_IDS}  # the body is never lost to a bad event
    shown = [(event["data"]["description"], event["data"]["done"]) for event in events.seen]
    assert shown == [
        ("echo_memory kept", True),
        ("echo_memory running", False),
        *[(f"echo_memory flood {n}", True) for n in range(24)],  # the first 30 entries, 26 shown
    ]
    assert all(
        set(event) == {"type", "data"} and set(event["data"]) == {"description", "done"}
        for event in events.seen
    )
    assert "malformed status event" in caplog.text
    assert "36 status events; only the first 30 were read" in caplog.text


@pytest.mark.parametrize(
    "stub_server",
    [("bad_envelope",), ("envelope_without_events",)],
    indirect=True,
)
async def test_a_malformed_envelope_fails_open(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer]
) -> None:
    _, server = stub_server
    events = Events()
    answer = await make_filter(function_module, server.url).inlet(
        inlet_body(), __user__=USER, __event_emitter__=events
    )
    assert answer == inlet_body()
    assert "inlet answered a malformed body-and-events envelope" in events.only_status()


@pytest.mark.parametrize("stub_server", [("looks_like_envelope",)], indirect=True)
async def test_a_bare_body_is_never_taken_for_an_envelope(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer]
) -> None:
    _, server = stub_server
    events = Events()
    answer = await make_filter(function_module, server.url).inlet(
        inlet_body(), __user__=USER, __event_emitter__=events
    )
    assert answer == {"body": {"x": 1}, "events": [{"description": "not an event"}]}  # as answered
    assert events.seen == []


@pytest.mark.parametrize("stub_server", [("events",)], indirect=True)
async def test_a_broken_emitter_of_echo_events_does_not_cost_the_body(
    function_module: ModuleType, stub_server: tuple[StubEcho, LiveServer]
) -> None:
    _, server = stub_server
    calls = 0

    async def broken(event: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("websocket gone")

    answer = await make_filter(function_module, server.url).outlet(
        outlet_body(), __user__=USER, __event_emitter__=broken
    )
    assert answer == {**outlet_body(), "hops": FILTER_IDS}
    assert calls == 3  # each event tried, none fatal


async def test_the_real_app_answers_the_envelope_when_asked(
    function_module: ModuleType, hooks_server: LiveServer
) -> None:
    echo_filter = make_filter(function_module, hooks_server.url, ECHO_API_KEY=API_KEY)
    events = Events()
    answer = await echo_filter.outlet(outlet_body(), __user__=USER, __event_emitter__=events)
    assert answer["messages"][1]["content"] == f"the key is {MASKED_GOOGLE_KEY}."
    assert set(answer) == set(outlet_body())  # the envelope stayed in the Function
    assert events.seen == []  # the built-in filters raise no events when all goes well
