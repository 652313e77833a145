"""The pure parts of the request edge: which key, which media type, and what a refusal shows."""

from __future__ import annotations

import json
import time

import pytest

from echo.entrypoints.http import edge, security, wire

HOOKS_KEY, ADMIN_KEY = "hooks-key-0123456789", "admin-key-0123456789"


def _bearer(key: str) -> list[bytes]:
    return [f"Bearer {key}".encode()]


def test_each_key_opens_its_own_part_only() -> None:
    keys = security.Keys(HOOKS_KEY, ADMIN_KEY)
    assert keys.refusal(security.HOOKS, _bearer(HOOKS_KEY)) is None
    assert keys.refusal(security.ADMIN, _bearer(ADMIN_KEY)) is None
    hooks_on_admin = keys.refusal(security.ADMIN, _bearer(HOOKS_KEY))
    assert hooks_on_admin is not None
    assert hooks_on_admin.status == 403
    assert "ECHO_ADMIN_KEY" in hooks_on_admin.detail
    admin_on_hooks = keys.refusal(security.HOOKS, _bearer(ADMIN_KEY))
    assert admin_on_hooks is not None
    assert admin_on_hooks.status == 403
    for sent in ([], [b"Bearer"], [b"Basic " + HOOKS_KEY.encode()], _bearer(HOOKS_KEY + "x"), _bearer("")):
        refused = keys.refusal(security.HOOKS, sent)
        assert refused is not None, sent
        assert refused.status == 401
        assert refused.headers == {"WWW-Authenticate": "Bearer"}
    twice = keys.refusal(security.HOOKS, [*_bearer(HOOKS_KEY), *_bearer(HOOKS_KEY)])
    assert twice is not None
    assert twice.status == 401
    assert keys.refusal(security.HOOKS, [f"bearer   {HOOKS_KEY} ".encode()]) is None  # as before: lenient


def test_without_an_admin_key_the_api_is_off_unless_nothing_is_checked() -> None:
    off = security.Keys(HOOKS_KEY, None).refusal(security.ADMIN, _bearer(HOOKS_KEY))
    assert off is not None
    assert off.status == 403
    assert "set ECHO_ADMIN_KEY to enable the memory-management API" in off.detail
    open_mode = security.Keys(None, None)
    assert not open_mode.enabled
    assert open_mode.refusal(security.ADMIN, []) is None
    assert open_mode.refusal(security.HOOKS, []) is None
    assert security.Keys(None, ADMIN_KEY).refusal(security.ADMIN, []) is not None  # a key set is required


@pytest.mark.parametrize(
    ("content_type", "taken"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("application/json;charset=UTF-8", True),
        ("application/problem+json", True),
        ("text/plain;charset=UTF-8", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("application/json; charset=utf-16", False),
        ("json", False),
        ("", False),
    ],
)
def test_the_media_types_taken(content_type: str, taken: bool) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"2")]
    refused = edge.media_type_refusal("POST", headers)
    assert (refused is None) is taken, refused
    assert edge.media_type_refusal("GET", headers) is None  # only what carries a body is checked


def test_no_content_type_is_refused_only_with_a_body() -> None:
    assert edge.media_type_refusal("POST", []) is None
    assert edge.media_type_refusal("POST", [(b"content-length", b"0")]) is None
    assert edge.media_type_refusal("POST", [(b"content-length", b"5")]) is not None
    assert edge.media_type_refusal("POST", [(b"transfer-encoding", b"chunked")]) is not None
    two = [(b"content-type", b"application/json"), (b"content-type", b"text/plain")]
    assert edge.media_type_refusal("POST", two) is not None


def test_a_refusal_shows_a_short_prefix_of_a_long_content_type() -> None:
    refused = edge.media_type_refusal("POST", [(b"content-type", b"text/" + b"x" * 10_000)])
    assert refused is not None
    assert len(refused) < 400
    assert "truncated" in refused


def test_previews_are_short_encodable_and_cheap() -> None:
    assert wire.field_errors([{"loc": ("body", "q"), "msg": "m", "type": "t", "input": "y" * 10**6}])[0][
        "input"
    ].endswith("(truncated: 1000000 characters)")
    long_list = list(range(10**6))
    started = time.perf_counter()
    [shown] = wire.field_errors([{"loc": ("body",), "msg": "m", "type": "t", "input": long_list}])
    assert time.perf_counter() - started < 0.05  # the list is not rendered past the prefix
    assert shown["input"].startswith("[0, 1, 2")
    assert shown["input"].endswith("(truncated)")
    for value, expected in ((float("nan"), "nan"), (10**400, "an integer of 1329 bits"), (True, True)):
        assert wire.field_errors([{"loc": (), "msg": "", "type": "", "input": value}])[0]["input"] == expected
    odd = wire.field_errors(
        [{"loc": ("body", "\ud800" * 500), "msg": "\ud800", "type": "t", "input": b"\xff"}]
    )
    json.dumps(odd)  # escaped: encodable
    assert wire.render_json(odd).isascii()
    assert len(odd[0]["loc"][1]) < 200


def test_errors_past_ten_are_counted_not_listed() -> None:
    errors = [
        {"loc": ("body", f"k{i}"), "msg": "Extra inputs are not permitted", "type": "extra"}
        for i in range(999)
    ]
    shown = wire.field_errors(errors)
    assert len(shown) == 11
    assert shown[-1]["msg"] == "989 more errors not shown"
    detail = wire.unprocessable(errors).detail
    assert len(detail["errors"]) == 11
    assert "989 more errors not shown" in detail["message"]
