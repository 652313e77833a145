"""echo.domain.text: what PostgreSQL and Qdrant cannot keep (NUL, lone surrogates) is replaced."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echo.domain import text
from echo.domain.text import REPLACEMENT, is_storable, storable, storable_json, storable_value

# Every code point, lone surrogates and NUL included (hypothesis leaves surrogates out by default),
# with the unstorable ones and the halves of a pair drawn often.
ANY_TEXT = st.text(
    st.one_of(
        st.characters(codec=None, categories=None, exclude_categories=()),
        st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "\\"]),
    ),
    max_size=40,
)


def encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("plain", "plain"),
        ("a\x00b", "a\ufffdb"),
        ("\x00\x00", "\ufffd\ufffd"),
        ("été\x00夏", "été\ufffd夏"),
        ("x\ud800y", "x\ufffdy"),
        ("x\udc00", "x\ufffd"),
        ("\udbff", "\ufffd"),
        ("\ud800\ud800\udc00", "\ufffd\U00010000"),  # a pair held as two code points is one character
        ("😀\x00\ud83d", "😀\ufffd\ufffd"),
        ("", ""),
    ],
)
def test_nul_and_lone_surrogates_become_the_replacement_character(raw: str, kept: str) -> None:
    assert storable(raw) == kept
    assert is_storable(kept)
    assert is_storable(raw) is (raw == kept)


def test_clean_text_is_returned_as_it_is() -> None:
    for clean in ("ascii only", "été 夏 " * 1000, "emoji 😀" * 100):
        assert storable(clean) is clean
    value = {"a": ["b", {"c": "d"}], "n": 1, "none": None}
    assert storable_value(value) is value


@given(ANY_TEXT)
def test_storable_text_always_encodes_and_keeps_every_other_character(raw: str) -> None:
    kept = storable(raw)
    assert encodable(kept)
    assert storable(kept) == kept
    if encodable(raw):
        assert kept == raw
    assert len(kept) <= len(raw)
    if not any("\ud800" <= c <= "\udfff" for c in raw):
        assert kept == raw.replace("\x00", REPLACEMENT)  # a NUL is replaced where it stood


def test_json_values_are_made_storable_through_keys_lists_and_tuples() -> None:
    raw: dict[str, Any] = {
        "text\x00": "a\ud800",
        "list": ["ok", "\udc00", {"deep\ud83d": ("t\x00", 1, 2.5, True, None)}],
    }
    assert storable_value(raw) == {
        "text\ufffd": "a\ufffd",
        "list": ["ok", "\ufffd", {"deep\ufffd": ("t\ufffd", 1, 2.5, True, None)}],
    }
    assert raw["text\x00"] == "a\ud800"  # the original is left alone


def test_two_keys_that_become_the_same_keep_the_last_value() -> None:
    assert storable_value({"a\x00": 1, "a\ud800": 2}) == {"a\ufffd": 2}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"t": "a\x00b"}, {"t": "a\ufffdb"}),
        ({"t\x00": "\ud800"}, {"t\ufffd": "\ufffd"}),
        (["\udc00x", "y\ud83d"], ["\ufffdx", "y\ufffd"]),
        ("\ud83d\ude00", "\U0001f600"),  # a pair of code points: the character it encodes
        ({"t": "😀 \\u0000 \\ud800"}, {"t": "😀 \\u0000 \\ud800"}),  # escapes typed as text are text
        ({"t": "\\\x00\\\\\ud800"}, {"t": "\\\ufffd\\\\\ufffd"}),
        ({"t": "clean été"}, {"t": "clean été"}),
    ],
)
def test_json_text_is_fixed_after_encoding(value: Any, expected: Any) -> None:
    dumped = storable_json(json.dumps(value, ensure_ascii=False))
    assert "\\u0000" not in dumped.replace("\\\\", "")
    assert json.loads(dumped) == expected
    assert encodable(json.dumps(json.loads(dumped), ensure_ascii=False))


@settings(max_examples=500)
@given(st.dictionaries(ANY_TEXT, st.lists(ANY_TEXT, max_size=3), max_size=4))
def test_fixed_json_is_the_storable_value(value: dict[str, list[str]]) -> None:
    fixed = json.loads(storable_json(json.dumps(value, ensure_ascii=False)))
    assert fixed == json.loads(json.dumps(storable_value(value)))
    assert all(encodable(key) and all(map(encodable, items)) for key, items in fixed.items())


def test_dumps_is_json_dumps_then_fixed() -> None:
    assert text.dumps({"a": "b\x00"}) == '{"a": "b\\ufffd"}'
    assert text.dumps({"a": "été \ud800"}) == '{"a": "été \ufffd"}'
    clean = {"a": ["b", "été 😀", "\\u0000"]}
    assert text.dumps(clean) == json.dumps(clean, ensure_ascii=False)
    assert json.loads(text.dumps(clean)) == clean


@pytest.mark.parametrize("backslashes", range(6))
def test_a_nul_escape_is_told_from_escaped_backslashes(backslashes: int) -> None:
    raw = "\\" * backslashes + "\x00" + "\\" * backslashes + "u0000"
    assert json.loads(text.dumps(raw)) == storable(raw)


def test_encodable_replaces_lone_surrogates_only() -> None:
    assert text.encodable("a\x00b\ud800c\ud83d\ude00") == "a\x00b\ufffdc😀"
    kept = "clean été"
    assert text.encodable(kept) is kept
    assert text.encodable_value({"k\udc00": ["\x00", "\ud800"]}) == {"k\ufffd": ["\x00", "\ufffd"]}
