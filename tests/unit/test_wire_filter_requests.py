"""The type-only check of filter requests agrees with pydantic: it accepts nothing pydantic refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakes.shared_data import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from echo.entrypoints.http import wire

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)
ANY = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)
MESSAGE = st.one_of(
    ANY,
    st.fixed_dictionaries(
        {"role": st.one_of(st.text(max_size=5), ANY)},
        optional={
            "content": st.one_of(st.text(max_size=5), st.none(), st.lists(ANY, max_size=2), ANY),
            "id": ANY,
        },
    ),
)
BODY = st.one_of(
    ANY,
    st.fixed_dictionaries(
        {},
        optional={
            "messages": st.one_of(st.lists(MESSAGE, max_size=3), ANY),
            "metadata": st.one_of(st.none(), st.dictionaries(st.text(max_size=3), ANY, max_size=2), ANY),
            "model": st.one_of(st.none(), st.text(max_size=3), ANY),
            "chat_id": st.one_of(st.none(), st.text(max_size=3), ANY),
            "stream": ANY,
        },
    ),
)
REQUEST = st.one_of(
    ANY,
    st.fixed_dictionaries(
        {"body": BODY},
        optional={"user": st.one_of(st.none(), st.dictionaries(st.text(max_size=3), ANY), ANY)},
    ),
)


def pydantic_accepts(data: Any) -> bool:
    try:
        wire.FILTER_REQUEST.validate_python(data)
    except ValidationError:
        return False
    return True


@settings(max_examples=300)
@given(REQUEST)
def test_the_type_check_accepts_only_what_pydantic_accepts(data: Any) -> None:
    data = json.loads(json.dumps(data))  # JSON-decoded, as a request body is
    if wire.plainly_a_filter_request(data):
        assert pydantic_accepts(data)


FILTER_CAPTURES = sorted(
    p.name
    for p in FIXTURES.glob("*.json")
    if json.loads(p.read_text()).get("path", "").endswith(("/filter/inlet", "/filter/outlet"))
)  # the models listing and the pipe's chat calls are not filter requests


@pytest.mark.parametrize("name", FILTER_CAPTURES)
def test_every_captured_filter_request_takes_the_fast_path(name: str) -> None:
    capture = json.loads((FIXTURES / name).read_text())
    assert wire.plainly_a_filter_request(capture["body"])
    assert pydantic_accepts(capture["body"])
