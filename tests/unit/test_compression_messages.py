"""echo.domain.compression.messages and groups: kinds, costs, the turns' chain, atomic groups."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain import chain, tokens
from echo.domain.compression import fence
from echo.domain.compression.groups import Group, boundaries, ceil_boundary, floor_boundary, turn_groups
from echo.domain.compression.messages import (
    Kind,
    content_text,
    conversation_turns,
    kind_of,
    last_user_turn,
    message_tokens,
    role_of,
    tool_calls_of,
    turn_positions,
)

CALL = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({"role": "system", "content": "x"}, Kind.SYSTEM),
        ({"role": " Developer ", "content": "x"}, Kind.SYSTEM),
        ({"role": "user", "content": "x", "metadata": {"echo_protected": True}}, Kind.PROTECTED),
        ({"role": "user", "content": "x", "metadata": {"is_external_references": 1}}, Kind.PROTECTED),
        ({"role": "user", "content": "  <echo_reference chat='a'>t</echo_reference>"}, Kind.PROTECTED),
        ({"role": "assistant", "content": "<echo_summary covers='2'>s</echo_summary>\n"}, Kind.INJECTED),
        ({"role": "assistant", "content": "<echo_summary>s</echo_summary> and more"}, Kind.TURN),
        ({"role": "user", "content": "x", "metadata": {"echo_protected": False}}, Kind.TURN),
        ({"role": "tool", "content": "x"}, Kind.TURN),
        ({"content": "no role"}, Kind.TURN),
    ],
)
def test_kinds(message: dict[str, Any], kind: Kind) -> None:
    assert kind_of(message) is kind


def test_content_text_roles_and_tool_calls() -> None:
    parts = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {"url": "u"}},
        {"text": "b"},
        3,
    ]
    assert content_text(parts) == "a\nb"
    assert content_text(None) == ""
    assert content_text("s") == "s"
    assert role_of({"role": "function"}) == "tool"
    assert role_of({"role": 3}) == ""
    assert tool_calls_of({"role": "assistant", "tool_calls": [CALL, "junk"]}) == (CALL,)
    assert tool_calls_of({"role": "user", "tool_calls": [CALL]}) == ()


def test_message_tokens_count_text_and_tool_calls_not_images() -> None:
    plain = {"role": "user", "content": "hello world"}
    assert message_tokens(plain) == tokens.MESSAGE_OVERHEAD_TOKENS + tokens.estimate_tokens("hello world")
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:" + "A" * 9000}}]}
    assert message_tokens(image) == tokens.MESSAGE_OVERHEAD_TOKENS
    call = {"role": "assistant", "content": "", "tool_calls": [CALL]}
    assert message_tokens(call, len) == tokens.MESSAGE_OVERHEAD_TOKENS + len("search") + len('{"q": "x"}')
    dict_args = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"k": 1}}}]}
    assert message_tokens(dict_args, len) == tokens.MESSAGE_OVERHEAD_TOKENS + 1 + len('{"k": 1}')


TURN_TEXTS = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.text(max_size=12)), max_size=8)


@given(TURN_TEXTS, st.lists(st.tuples(st.integers(0, 8), st.text(max_size=12)), max_size=4))
def test_system_messages_are_not_on_the_chain(
    turns: list[tuple[str, str]], systems: list[tuple[int, str]]
) -> None:
    plain: list[dict[str, Any]] = [{"role": role, "content": text} for role, text in turns]
    decorated = list(plain)
    for where, text in sorted(systems, reverse=True):
        decorated.insert(min(where, len(decorated)), {"role": "system", "content": text})
    assert conversation_turns(decorated).hashes == conversation_turns(plain).hashes
    assert conversation_turns(plain).links == chain.build_chain(plain)


def test_turns_positions_and_last_user() -> None:
    items: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "user", "content": "ref", "metadata": {"echo_protected": True}},
        {"role": "assistant", "content": fence.fenced_summary("x", locale="en", covered_count=1)},
        {"role": "assistant", "content": "a"},
    ]
    turns = conversation_turns(items)
    assert turns.positions == (1, 4) == turn_positions([kind_of(m) for m in items])
    assert len(turns) == 2
    assert [link.index for link in turns.links] == [0, 1]
    assert last_user_turn(items, turns.positions) == 0
    assert last_user_turn(items[4:], (0,)) is None


def _groups_of(items: list[dict[str, Any]]) -> tuple[Group, ...]:
    return turn_groups(items, conversation_turns(items).positions)


def test_groups_keep_calls_with_their_results() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [CALL, {**CALL, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "system", "content": "between"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "assistant", "content": "done"},
        {"role": "tool", "tool_call_id": "orphan", "content": "?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    assert _groups_of(items) == (Group(0, 1), Group(1, 4), Group(4, 5), Group(5, 6), Group(6, 7), Group(7, 9))
    cuts = boundaries(_groups_of(items), 9)
    assert cuts == (True, True, False, False, True, True, True, True, False, True)
    assert floor_boundary(cuts, 3) == 1
    assert ceil_boundary(cuts, 2) == 4
    assert ceil_boundary(cuts, 8) == 9
    assert floor_boundary(cuts, 99) == 9
    assert ceil_boundary(cuts, -3) == 0


def test_group_values() -> None:
    group = Group(2, 5)
    assert len(group) == 3
    assert 4 in group
    assert 5 not in group
    assert "2" not in group
    with pytest.raises(ValueError, match="at least one turn"):
        Group(3, 3)
