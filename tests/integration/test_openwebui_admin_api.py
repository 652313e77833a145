"""`adapters.openwebui.admin`: what each answer of Open WebUI becomes (httpx's MockTransport at the
edge), the errors named by the call that failed and never holding a key."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from echo.adapters.openwebui import admin, client
from echo.errors import EchoError

KEY = "sk-admin-secret-1234"
ECHO_KEY = "echo-secret-5678"


def owui(handler: Callable[[httpx.Request], httpx.Response]) -> admin.OpenWebUIAdmin:
    transport = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return admin.OpenWebUIAdmin("http://owui:8080/", KEY, redact=[ECHO_KEY], client=transport)


async def test_each_call_sends_the_admin_key_to_its_path() -> None:
    seen: list[tuple[str, str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.headers.get("authorization")))
        if request.url.path == "/api/v1/configs/tool_servers":
            return httpx.Response(200, json={"TOOL_SERVER_CONNECTIONS": None})
        if request.url.path.endswith("/export"):
            return httpx.Response(200, json=[])
        return httpx.Response(200, json={"version": "0.12.4"})

    api = owui(handler)
    assert await api.version() == "0.12.4"
    assert await api.functions() == []
    assert await api.tool_servers() == []
    assert seen == [
        ("GET", "http://owui:8080/api/version", None),  # public: no key sent
        ("GET", "http://owui:8080/api/v1/functions/export?include_valves=true", f"Bearer {KEY}"),
        ("GET", "http://owui:8080/api/v1/configs/tool_servers", f"Bearer {KEY}"),
    ]


async def test_a_read_open_webui_does_not_serve_is_none() -> None:
    api = owui(lambda request: httpx.Response(404, json={"detail": "Not Found"}))
    assert await api.default_model_params() is None
    assert await api.models() is None
    assert await api.chat_config() is None
    assert await api.config_namespace("memories") is None
    assert await api.version() is None
    with pytest.raises(admin.AdminError, match=r"GET http://owui:8080/api/v1/functions/export: HTTP 404"):
        await api.functions()


async def test_errors_name_the_call_say_whether_to_retry_and_hide_the_keys() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/valves/update"):
            return httpx.Response(400, json={"detail": f"bad input_value={{'ECHO_API_KEY': '{ECHO_KEY}'}}"})
        if request.url.path.endswith("/toggle"):
            return httpx.Response(503, text="Service Unavailable")
        if request.url.path.endswith("/export"):
            return httpx.Response(200, text="<html>login</html>")
        return httpx.Response(401, json={"detail": f"invalid token {KEY}"})

    api = owui(handler)
    with pytest.raises(admin.AdminError) as bad:
        await api.set_function_valves("echo", {"ECHO_API_KEY": ECHO_KEY})
    assert str(bad.value) == (
        "POST http://owui:8080/api/v1/functions/id/echo/valves/update: HTTP 400: "
        "bad input_value={'ECHO_API_KEY': '***'}"
    )
    assert not bad.value.retryable
    assert bad.value.status == 400
    with pytest.raises(admin.AdminError, match="toggle: HTTP 503: Service Unavailable") as busy:
        await api.toggle_function("echo")
    assert busy.value.retryable
    with pytest.raises(admin.AdminError, match="export: Open WebUI's answer is not JSON"):
        await api.functions()
    with pytest.raises(admin.AdminKeyRefused) as refused:
        await api.tool_servers()
    assert "refused the admin key (HTTP 401: invalid token ***)" in str(refused.value)
    assert KEY not in str(refused.value)
    assert isinstance(refused.value, client.OpenWebUIError)
    assert isinstance(refused.value, EchoError)


async def test_unreachable_and_slow_are_retryable() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(
        admin.AdminError, match=r"GET http://owui:8080/api/version: Open WebUI is unreachable"
    ) as e:
        await owui(down).version()
    assert e.value.retryable
    with pytest.raises(admin.AdminError, match="did not answer in time") as t:
        await owui(slow).functions()
    assert t.value.retryable


async def test_a_malformed_answer_is_an_error() -> None:
    api = owui(lambda request: httpx.Response(200, json={"not": "a list"}))
    with pytest.raises(admin.AdminError, match="something other than a list of objects"):
        await api.functions()
    listing = owui(lambda request: httpx.Response(200, json=[1, 2]))
    with pytest.raises(admin.AdminError, match="answered a JSON list, not an object"):
        await listing.chat_config()


@pytest.mark.parametrize(
    ("status", "body", "ok", "detail"),
    [
        (200, {"openapi": "3.1.0", "paths": {"/tools/b": {}, "/tools/a": {}}}, True, ""),
        (
            400,
            {"detail": "Failed to connect to the tool server"},
            False,
            "Failed to connect to the tool server",
        ),
        (403, {"detail": "Tool servers are disabled"}, False, "Tool servers are disabled"),
    ],
)
async def test_the_tool_server_verification_is_an_answer(
    status: int, body: dict[str, object], ok: bool, detail: str
) -> None:
    got = await owui(lambda request: httpx.Response(status, json=body)).verify_tool_server(
        {"url": "http://e"}
    )
    assert (got.ok, got.detail) == (ok, detail)
    assert got.paths == (("/tools/a", "/tools/b") if ok else ())


async def test_the_verification_with_a_refused_key_is_an_error() -> None:
    with pytest.raises(admin.AdminKeyRefused):
        await owui(lambda request: httpx.Response(401, json={"detail": "no"})).verify_tool_server({})
    with pytest.raises(admin.AdminError, match="verify: HTTP 500"):
        await owui(lambda request: httpx.Response(500, json={})).verify_tool_server({})
