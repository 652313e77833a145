"""msgspec on the hot path (`wire._parse`, `wire.render_body`): the same values as the standard
library's parser and encoder, and whatever msgspec refuses or cannot be sure of goes to them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import HTTPException

from echo.entrypoints.http import wire

SAME = [
    b'{"n": [18446744073709551616, -9223372036854775809, -0, -0.0, 1e-400, 1E5]}',
    b'{"a": 1, "b": 2, "a": 3}',
    b'"\\ud83d\\ude00 caf\\u00e9 \xe2\x82\xac"',
    b'"\\ud800 lone"',  # a lone surrogate escape: msgspec refuses it, json reads it
    b'\xef\xbb\xbf{"bom": true}',  # a UTF-8 BOM: msgspec refuses it, json.loads(bytes) reads it
    b'{"deep": ' + b"[" * 200 + b"]" * 200 + b"}",
    b'["' + b"9" * 4300 + b'"]',
]


@pytest.mark.parametrize("raw", SAME)
def test_a_body_parses_to_what_json_loads_gives(raw: bytes) -> None:
    parsed = wire._parse(raw)
    expected = json.loads(raw)
    assert parsed == expected
    assert repr(parsed) == repr(expected)  # ints stay ints, floats floats, -0.0 its sign


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"x": NaN}', "NaN is not a finite number"),
        (b'{"x": 1e400}', "1e400 is not a finite number"),
        (b'{"x": ' + b"9" * 5000 + b"}", "an integer of 5000 digits is too long to read"),
    ],
)
def test_what_json_cannot_carry_is_refused_naming_where_it_is(raw: bytes, message: str) -> None:
    with pytest.raises(HTTPException) as refused:
        wire._parse(raw)
    detail = refused.value.detail
    assert refused.value.status_code == 422
    assert isinstance(detail, dict)
    assert message in detail["message"]
    assert detail["errors"][0]["loc"] == ["body", "x"]


def test_malformed_json_keeps_the_standard_parsers_message() -> None:
    with pytest.raises(json.JSONDecodeError, match=r"Expecting ',' delimiter: line 1 column 10"):
        wire._parse(b'{"a": [1 2]}')


def test_a_plain_answer_renders_as_json_would() -> None:
    known: dict[str, Any] = json.loads(b'{"messages": [{"role": "user", "content": "caf\\u00e9"}], "n": 1.5}')
    changed = {
        **known,
        "messages": [*known["messages"], {"role": "assistant", "content": "ok", "k": [1, None]}],
    }
    assert json.loads(wire.render_body(changed, known)) == changed
    assert wire.render_body(known, known) == wire.render_plain(known)


@pytest.mark.parametrize(
    ("extra", "error"),
    [(float("nan"), ValueError), (float("inf"), ValueError), ({"a set"}, TypeError), (b"bytes", TypeError)],
)
def test_a_changed_value_json_cannot_carry_still_fails_the_render(extra: Any, error: type[Exception]) -> None:
    known: dict[str, Any] = {"messages": []}
    with pytest.raises(error):
        wire.render_body({**known, "extra": extra}, known)


def test_a_lone_surrogate_in_an_answer_is_escaped_not_refused() -> None:
    known: dict[str, Any] = {"content": "\ud800"}
    assert wire.render_body(known, known) == b'{"content":"\\ud800"}'
