"""What every request meets before a route runs (`echo.entrypoints.http.edge`), and what a refusal carries
back.

- the body limit holds while reading, on every route, the FastAPI-parsed tool routes included: the
  stream is cut at the limit (413), never read whole; a declared Content-Length past it is a 413
  before a byte is read (issue 18, part 1);
- every POST takes JSON only: any other Content-Type (the `text/plain` of a browser's cross-origin
  "simple request"), or none with a body, is a 415 naming it, before a byte is read (part 5);
- a 422 echoes at most a short, encodable prefix of what it refuses, however long the value and
  whatever it holds (a lone surrogate), and never becomes a 500 (part 8).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import asgi
from fakes.live_server import LiveServer
from fakes.shared_data import ADMIN_KEY, API_KEY
from fastapi.testclient import TestClient

from echo.config.settings import Settings
from echo.entrypoints.http import create_app

TOOL_HEADERS = {"x-openwebui-user-id": "u1", "x-openwebui-chat-id": "c1"}
HOOKS = {"Authorization": f"Bearer {API_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ADMIN_PATH = re.compile(r"^(/v1)?(/memories|/users/|/chats/[^/]+/compact)")
LIMIT = 64 * 1024
CHUNK = 4096
# A browser's cross-origin "simple request" (no preflight): `fetch(url, {method: "POST", mode:
# "no-cors", body: JSON.stringify(...)})` from any page the user has open.
BROWSER = {
    "host": "127.0.0.1:9099",
    "content-type": "text/plain;charset=UTF-8",
    "origin": "https://attacker.example",
    "referer": "https://attacker.example/",
    "accept": "*/*",
    "sec-fetch-mode": "no-cors",
    "sec-fetch-site": "cross-site",
    "sec-fetch-dest": "empty",
    "user-agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0",
}


def _settings(tmp_path: Path, **options: Any) -> Settings:
    keys: dict[str, Any] = {} if options.get("allow_unauthenticated") else {"api_key": API_KEY}
    return Settings(
        data_dir=tmp_path / "echo",
        admin_key=ADMIN_KEY,
        gemini_api_key="fake",
        gemini_base_url="http://127.0.0.1:9",
        config_reload_seconds=60,
        **{**keys, **options},
    )


def _post_routes(app: Any) -> list[str]:
    found = []
    for route in app.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        for context in contexts() if contexts else [route]:
            if "POST" in (getattr(context, "methods", None) or ()):
                path = re.sub(r"\{hook_id\}|\{filter_id\}", "echo_context", context.path)
                found.append(re.sub(r"\{[^}]+\}", "x", path.replace("{phase}", "inlet")))
    return found


def _key_for(path: str) -> dict[str, str]:
    return ADMIN if ADMIN_PATH.match(path) else HOOKS


def _endless() -> Iterator[bytes]:
    yield b'{"query": "'
    while True:
        yield b"x" * CHUNK


# -- the body limit --------------------------------------------------------------------------------


def test_every_post_route_cuts_the_stream_at_the_limit(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path, max_body_bytes=LIMIT))
    routes = _post_routes(app)
    reading = {
        "/tools/search_memories",
        "/tools/search_session_context",
        "/tools/save_plan",
        "/tools/commit_code",
        "/echo_context/filter/inlet",
        "/v1/echo_context/valves/update",
        "/chat/completions",
        "/memories/search",
        "/chats/x/compact",
    }
    assert reading <= set(routes)

    async def scenario() -> set[str]:
        cut = set()
        for path in routes:
            headers = [
                ("content-type", "application/json"),
                ("transfer-encoding", "chunked"),  # no Content-Length: only counting while reading holds
                *_key_for(path).items(),
                *TOOL_HEADERS.items(),
            ]
            exchange = await asgi.call(app, "POST", path, headers=headers, chunks=_endless())
            assert exchange.bytes_read <= LIMIT + CHUNK + 16, (path, exchange.bytes_read)
            if exchange.reads:
                assert exchange.status == 413, (path, exchange.status, exchange.body[:300])
                assert f"exceeds {LIMIT} bytes" in exchange.json()["detail"], path
                cut.add(path)
        return cut

    assert reading <= asyncio.run(scenario())


def test_a_declared_length_past_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path, max_body_bytes=LIMIT))

    async def scenario() -> None:
        for path in _post_routes(app):
            headers = [
                ("content-type", "application/json"),
                ("content-length", str(LIMIT + 1)),
                *_key_for(path).items(),
                *TOOL_HEADERS.items(),
            ]
            exchange = await asgi.call(app, "POST", path, headers=headers, chunks=_endless())
            assert (exchange.status, exchange.reads) == (413, 0), (path, exchange.status, exchange.body[:300])
            assert f"request body of {LIMIT + 1} bytes exceeds {LIMIT} bytes" in exchange.json()["detail"]

    asyncio.run(scenario())


class _PeakMemory:
    """The process's resident memory, sampled every 10 ms while in the block (server and client are
    this process: a server that buffered the body would show)."""

    def __enter__(self) -> _PeakMemory:
        self.base = self.peak = self._rss()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / 1e6

    def _sample(self) -> None:
        while not self._done.wait(0.01):
            self.peak = max(self.peak, self._rss())

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _streamed(megabytes: int) -> Iterator[bytes]:
    chunk = b"x" * (1024 * 1024)
    yield b'{"query": "'
    for _ in range(megabytes):
        yield chunk
    yield b'"}'


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc/self/statm")
def test_a_huge_body_without_a_key_or_past_the_limit_is_never_buffered(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path, max_body_bytes=1024 * 1024))
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        for headers, status in (({}, 401), ({**HOOKS, **TOOL_HEADERS}, 413)):
            with _PeakMemory() as memory:
                started = time.monotonic()
                answer = http.post(
                    "/tools/search_memories",
                    content=_streamed(256),
                    headers={"content-type": "application/json", **headers},
                )
                elapsed = time.monotonic() - started
            print(f"256 MiB, answered {answer.status_code}: {elapsed:.2f} s, +{memory.growth_mb:.0f} MB")
            assert answer.status_code == status, answer.text[:300]
            assert memory.growth_mb < 64
            assert http.get("/healthz").status_code == 200


# -- JSON only -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain;charset=UTF-8",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=----x",
        "text/json",
        "application/jsonp",
        "application/json; charset=latin-1",
        None,
    ],
)
def test_a_post_that_is_not_json_is_a_415_naming_its_type(tmp_path: Path, content_type: str | None) -> None:
    app = create_app(_settings(tmp_path))

    async def scenario() -> None:
        for path in _post_routes(app):
            headers = [*_key_for(path).items(), *TOOL_HEADERS.items(), ("content-length", "2")]
            if content_type is not None:
                headers.append(("content-type", content_type))
            exchange = await asgi.call(app, "POST", path, headers=headers, chunks=[b"{}"])
            if path.endswith("/pipelines/x"):  # Open WebUI's upload form: the 405 that says why, unread
                assert (exchange.status, exchange.reads) == (405, 0), (path, exchange.status)
                continue
            assert (exchange.status, exchange.reads) == (415, 0), (path, exchange.status, exchange.body[:300])
            detail = exchange.json()["detail"]
            assert ("no Content-Type" if content_type is None else repr(content_type)) in detail, detail
            assert "application/json" in detail

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        'application/json; charset="utf-8"',
        "Application/JSON",
        "application/vnd.echo.hook-request+json",
    ],
)
def test_json_in_any_of_its_spellings_is_taken(client: httpx.Client, content_type: str) -> None:
    answer = client.post(
        "/echo_context/filter/inlet",
        content=json.dumps({"body": {"messages": [{"role": "user", "content": "hi"}]}}),
        headers={"content-type": content_type},
    )
    assert answer.status_code == 200, answer.text
    tool = client.post(
        "/tools/search_memories",
        content=b'{"query": "q"}',
        headers={"content-type": content_type, **TOOL_HEADERS},
    )
    assert tool.status_code == 503, tool.text  # read and checked; no store here


def test_a_post_without_a_body_needs_no_content_type(client: httpx.Client, admin: dict[str, str]) -> None:
    assert client.post("/tools/list_plans", headers=TOOL_HEADERS).status_code == 503  # no store here
    compact = client.post("/chats/c1/compact", headers={**admin, "x-openwebui-user-id": "u1"})
    assert compact.status_code == 503, compact.text


def test_a_browser_cannot_change_valves_or_write_through_an_outlet_on_a_server_without_auth(
    tmp_path: Path,
) -> None:
    app = create_app(_settings(tmp_path, allow_unauthenticated=True))
    with TestClient(app, base_url="http://127.0.0.1:9099") as client:
        before = client.get("/echo_compression/valves").json()
        refused = client.post(
            "/echo_compression/valves/update", content=json.dumps({"keep_last": 0}), headers=BROWSER
        )
        assert refused.status_code == 415
        assert "'text/plain;charset=UTF-8'" in refused.json()["detail"]
        assert client.get("/echo_compression/valves").json() == before
        assert not list((tmp_path / "echo").glob("**/*valves*"))  # nothing saved either

    outlet = {
        "body": {"chat_id": "c1", "id": "a1", "messages": [{"id": "a1", "role": "user", "content": "x"}]}
    }

    async def scenario() -> asgi.Exchange:
        raw = json.dumps(outlet).encode()
        headers = [*BROWSER.items(), ("content-length", str(len(raw)))]
        return await asgi.call(app, "POST", "/echo_memory/filter/outlet", headers=headers, chunks=[raw])

    exchange = asyncio.run(scenario())
    assert (exchange.status, exchange.reads) == (415, 0)  # never read, so nothing of it was stored


# -- bounded, encodable 422s -----------------------------------------------------------------------


def _raw(client: httpx.Client, path: str, raw: bytes | str, **headers: str) -> httpx.Response:
    return client.post(
        path, content=raw, headers={"content-type": "application/json", **TOOL_HEADERS, **headers}
    )


def test_a_lone_surrogate_in_a_tool_call_is_a_422_not_a_500(client: httpx.Client) -> None:
    for path, raw in (
        ("/tools/search_memories", b'{"query": "\\ud800 hi"}'),
        ("/tools/search_memories", b'{"query": "\\ud800 hi", "k": 0}'),
        ("/tools/search_session_context", b'{"source_id": "\\ud800", "query": "q"}'),
        ("/tools/search_memories", b'{"query": "q", "\\udfff": 1}'),
    ):
        answer = _raw(client, path, raw)
        assert answer.status_code == 422, (path, answer.text)
        errors = answer.json()["detail"]
        assert errors, answer.text
        assert all({"loc", "msg", "type"} <= set(error) for error in errors), errors


def test_a_422_echoes_a_short_prefix_of_a_huge_value(client: httpx.Client) -> None:
    query = "y" * (30 * 1024 * 1024)  # within the 32 MiB limit, far past the query's 20,000 characters
    answer = _raw(client, "/tools/search_memories", json.dumps({"query": query}))
    assert answer.status_code == 422
    assert len(answer.content) < 2000
    [error] = answer.json()["detail"]
    assert error["loc"] == ["body", "query"]
    assert error["input"].startswith("y" * 100)
    assert "truncated" in error["input"]
    assert len(error["input"]) < 200


def test_a_422_bounds_its_keys_and_its_count_of_errors(client: httpx.Client, admin: dict[str, str]) -> None:
    long_key = "k" * 1_000_000
    for path, body, headers in (
        ("/tools/search_memories", {"query": "q", long_key: 1}, {}),
        ("/memories/search", {"user_id": "u", "query": "q", long_key: 1}, admin),
        ("/tools/save_plan", {"goal": "g", "status": "todo", long_key: 1}, {}),
    ):
        answer = _raw(client, path, json.dumps(body), **headers)
        assert answer.status_code == 422, (path, answer.text[:300])
        assert len(answer.content) < 2000, path
        assert "truncated" in answer.text, path
    many: dict[str, Any] = {"query": "q", **{f"extra{i}": i for i in range(5000)}}
    crowded: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        ("/tools/search_memories", many, {}),
        ("/memories/search", {"user_id": "u", **many}, admin),
        ("/echo_memory/valves/update", {f"NOPE_{i}": i for i in range(5000)}, {}),
    ]
    for path, body, headers in crowded:
        answer = _raw(client, path, json.dumps(body), **headers)
        assert answer.status_code == 422, (path, answer.text[:300])
        assert len(answer.content) < 5000, (path, len(answer.content))
        assert "more errors not shown" in answer.text or "truncated" in answer.text, path


def test_no_lone_surrogate_anywhere_in_a_request_gives_a_500(
    client: httpx.Client, admin: dict[str, str]
) -> None:
    surrogate = "\ud800"
    hook = {"body": {"chat_id": surrogate, "messages": [{"role": "user", "content": surrogate}]}}
    calls: list[tuple[str, Any, dict[str, str]]] = [
        ("/tools/search_session_context", {"source_id": "s" + surrogate, "query": surrogate}, {}),
        ("/tools/save_plan", {"goal": surrogate, "status": "todo", "steps": [surrogate]}, {}),
        ("/tools/update_plan", {"id": surrogate, "goal": surrogate}, {}),
        ("/tools/commit_code", {"id": "a.py", "lang": surrogate, "content": surrogate, "message": "m"}, {}),
        ("/tools/read_code", {"id": surrogate}, {}),
        ("/memories/search", {"user_id": surrogate, "query": surrogate}, admin),
        ("/chats/c1/compact", {"user_id": surrogate, "model": surrogate}, admin),
        ("/echo_context/filter/inlet", {**hook, "user": {"id": surrogate}}, {}),
        ("/echo_memory/filter/outlet", {**hook, "user": {"id": surrogate}}, {}),
        ("/echo_context/valves/update", {"AEC_DEFAULT_LOCATION": surrogate}, {}),
        ("/echo_context/valves/update", {surrogate: 1}, {}),
        ("/chat/completions", {"model": surrogate, "messages": [{"role": "user", "content": surrogate}]}, {}),
    ]
    for path, body, headers in calls:
        answer = _raw(client, path, json.dumps(body), **headers)  # json.dumps escapes it: \ud800
        assert answer.status_code < 500, (path, answer.status_code, answer.text[:300])
        answer.json()
