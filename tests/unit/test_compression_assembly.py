"""Unit and property tests for echo.domain.compression.assembly: head + summary + tail within the budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echo.domain.compression import assembly, fence, messages, selection
from echo.domain.compression.assembly import AssemblyPolicy, assemble
from echo.domain.compression.messages import conversation_turns, message_tokens
from echo.domain.compression.selection import StoredSummary

SHORT = st.text(alphabet="abc é\n#", max_size=30)
LONG = st.lists(
    st.sampled_from(["# Title", "## Part", "```", "plain line of text", "x" * 90, ""]), max_size=60
)
TEXTS = st.one_of(SHORT, SHORT, LONG.map("\n".join))


def _ids(out: Sequence[Mapping[str, Any]]) -> list[int]:
    return [int(m["id"][1:]) for m in out if "id" in m]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random requests: system prompts anywhere, turns, tool-call groups (a system message may sit
    among the results), protected blocks and injected summaries that came back."""
    items: list[dict[str, Any]] = []
    calls = 0
    for shape in draw(st.lists(st.sampled_from("suuaatttpi"), max_size=16)):
        if shape == "s":
            items.append({"role": "system", "content": draw(SHORT)})
        elif shape == "u":
            items.append({"role": "user", "content": draw(TEXTS)})
        elif shape == "a":
            items.append({"role": "assistant", "content": draw(TEXTS)})
        elif shape == "p":
            items.append({"role": "user", "content": draw(SHORT), "metadata": {"echo_protected": True}})
        elif shape == "i":
            items.append({"role": "assistant", "content": '<echo_summary covers="3">old</echo_summary>'})
        else:
            ids = [f"call_{calls + k}" for k in range(draw(st.integers(1, 3)))]
            calls += len(ids)
            items.append(
                {
                    "role": "assistant",
                    "content": draw(st.sampled_from(["", "let me look"])),
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}
                        for i in ids
                    ],
                }
            )
            for k, call_id in enumerate(ids):
                if k and draw(st.booleans()):
                    items.append({"role": "system", "content": "tick"})
                items.append({"role": "tool", "tool_call_id": call_id, "content": draw(TEXTS)})
    for index, item in enumerate(items):
        item["id"] = f"m{index}"
    return items


def _groups(items: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """An independent oracle: each assistant with tool calls and the tool results after it."""
    found: list[list[int]] = []
    open_group: list[int] | None = None
    for index, item in enumerate(items):
        kind = messages.kind_of(item)
        if kind is not messages.Kind.TURN:
            continue
        if item["role"] == "tool" and open_group is not None:
            open_group.append(index)
            continue
        open_group = None
        if item.get("tool_calls"):
            open_group = [index]
            found.append(open_group)
    return found


def _mandatory(items: Sequence[Mapping[str, Any]]) -> list[int]:
    users = [
        i for i, m in enumerate(items) if m["role"] == "user" and messages.kind_of(m) is messages.Kind.TURN
    ]
    start = users[-1] if users else len(items)
    return [
        i
        for i, m in enumerate(items)
        if messages.kind_of(m) in (messages.Kind.SYSTEM, messages.Kind.PROTECTED)
        or (i >= start and messages.kind_of(m) is messages.Kind.TURN)
    ]


def _check_valid(items: list[dict[str, Any]], result: assembly.Assembly, budget: int | None) -> None:
    out = result.messages
    ids = _ids(out)
    assert ids == sorted(set(ids)), "order kept, nothing twice"
    kept = set(ids)
    for index in _mandatory(items):
        assert index in kept
        assert next(m for m in out if m.get("id") == f"m{index}") is items[index], "never altered"
    for group in _groups(items):
        assert {i in kept for i in group} in ({True}, {False}), f"group {group} split"
    open_calls: set[str] = set()
    for message in out:  # what an OpenAI-compatible API checks
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
        elif messages.kind_of(message) is messages.Kind.TURN:
            open_calls = {call["id"] for call in message.get("tool_calls") or ()}
    summaries = [m for m in out if "<echo_summary" in messages.content_text(m.get("content"))]
    assert len(summaries) == int(result.summary_injected)
    assert result.tokens_after == sum(message_tokens(m) for m in out)
    if budget is not None and sum(message_tokens(items[i]) for i in _mandatory(items)) <= budget:
        assert result.tokens_after <= budget
        assert not result.over_budget


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.data())
def test_every_budget_keeps_the_request_valid(items: list[dict[str, Any]], data: st.DataObject) -> None:
    total = sum(message_tokens(m) for m in items)
    budget = data.draw(st.none() | st.integers(0, total + 20), label="budget")
    policy = AssemblyPolicy(
        keep_first=data.draw(st.integers(0, 4), label="keep_first"),
        keep_last=data.draw(st.integers(0, 8), label="keep_last"),
        max_context_tokens=budget,
        enable_tool_output_trimming=data.draw(st.booleans(), label="trim"),
        tool_trim_threshold_chars=data.draw(st.sampled_from([1, 20, 600]), label="trim_chars"),
        fold_threshold_chars=data.draw(st.sampled_from([50, 6000]), label="fold_chars"),
    )
    summary = None
    turns = conversation_turns(items)
    if len(turns) and data.draw(st.booleans(), label="with summary"):
        covered = data.draw(st.integers(1, len(turns)), label="covered")
        head = data.draw(st.integers(0, covered), label="head_count")
        text = data.draw(
            st.sampled_from(["<working_memory/>", "s <next_reply_guidance>go</next_reply_guidance>"])
        )
        summary = StoredSummary(turns.hashes[covered - 1], covered, text, head_count=head)
    result = assemble(
        items, policy=policy, summary=summary, locale=data.draw(st.sampled_from(["en-US", "ja-JP"]))
    )
    _check_valid(items, result, budget)
    if summary is not None and result.summary_injected:
        out_ids = set(_ids(result.messages))
        positions = turns.positions
        start = policy.keep_first
        replaced = [
            p for t, p in enumerate(positions) if max(start, summary.head_count) <= t < summary.covered_count
        ]
        kept_covered = [p for p in replaced if p in out_ids]
        assert len(kept_covered) < len(replaced), "the summary stands for at least one turn"


PAD = " and more words" * 20  # turns long enough that a summary of a few of them costs less


def _chat(n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "system", "content": "Today is Monday."}]
    for i in range(n):
        items.append({"role": "user", "content": f"question {i}{PAD}", "id": f"m{2 * i + 1}"})
        items.append({"role": "assistant", "content": f"answer {i}{PAD}", "id": f"m{2 * i + 2}"})
    return items


def _texts(result: assembly.Assembly) -> list[str]:
    """The contents, without the padding of ``_chat``."""
    return [m["content"].removesuffix(PAD) for m in result.messages]


def _summary(items: list[dict[str, Any]], covered: int, head: int = 1) -> StoredSummary:
    return StoredSummary(conversation_turns(items).hashes[covered - 1], covered, "<working_memory/>", head)


def test_no_summary_and_no_pressure_changes_nothing() -> None:
    items = _chat(4)
    result = assemble(items, policy=AssemblyPolicy())
    assert list(result.messages) == items
    assert all(a is b for a, b in zip(result.messages, items, strict=True))
    assert result.tokens_before == result.tokens_assembled == result.tokens_after
    assert (result.folded, result.dropped_groups, result.trimmed_tool_outputs) == (0, 0, 0)


def test_head_summary_gap_system_messages_and_tail() -> None:
    items = _chat(6)
    items.insert(5, {"role": "system", "content": "injected later", "id": "sys"})
    summary = _summary(items, covered=8)
    result = assemble(
        items, policy=AssemblyPolicy(keep_first=1, keep_last=2), summary=summary, locale="de-DE"
    )
    roles = [m["role"] for m in result.messages]
    contents = _texts(result)
    assert contents[:2] == ["Today is Monday.", "question 0"]
    assert roles[2] == "assistant"
    assert contents[2].startswith('<echo_summary covers="8" lang="de-DE">\nZusammenfassung')
    assert contents[3:] == ["injected later", "question 4", "answer 4", "question 5", "answer 5"]
    assert result.covered_turns == 7
    assert result.summary is summary


def test_keep_last_pulls_covered_turns_back_into_the_tail() -> None:
    items = _chat(3)
    result = assemble(items, policy=AssemblyPolicy(keep_first=0, keep_last=4), summary=_summary(items, 6, 0))
    assert _texts(result)[2:] == ["question 1", "answer 1", "question 2", "answer 2"]


def test_a_summary_never_swallows_the_last_user_message() -> None:
    items = _chat(2)
    items.append({"role": "user", "content": "last", "id": "m9"})
    turns = conversation_turns(items)
    summary = StoredSummary(turns.hashes[-1], len(turns), "<working_memory/>")
    result = assemble(items, policy=AssemblyPolicy(keep_first=0, keep_last=0), summary=summary)
    assert result.messages[-1] is items[-1]


def test_summary_is_a_user_turn_when_only_system_messages_precede_it() -> None:
    items = _chat(4)
    result = assemble(items, policy=AssemblyPolicy(keep_first=0, keep_last=2), summary=_summary(items, 6, 0))
    assert [m["role"] for m in result.messages][:3] == ["system", "user", "user"]
    assert result.messages[1]["content"].startswith("<echo_summary")


def test_summary_that_covers_only_the_head_is_not_used() -> None:
    items = _chat(3)
    result = assemble(items, policy=AssemblyPolicy(keep_first=2), summary=_summary(items, 2, 0))
    assert result.summary is None
    assert not result.summary_injected
    assert list(result.messages) == items


def test_a_summary_with_nothing_but_guidance_is_not_used() -> None:
    items = _chat(4)
    summary = StoredSummary(
        conversation_turns(items).hashes[5], 6, "<next_reply_guidance>x</next_reply_guidance>"
    )
    assert assemble(items, policy=AssemblyPolicy(keep_first=0, keep_last=0), summary=summary).summary is None


def test_injected_summaries_that_come_back_are_replaced() -> None:
    items = _chat(4)
    items.insert(
        3,
        {
            "role": "assistant",
            "content": fence.summary_message("old", locale="en", covered_count=2)["content"],
        },
    )
    assert conversation_turns(items).hashes == conversation_turns(_chat(4)).hashes
    result = assemble(
        items, policy=AssemblyPolicy(keep_first=0, keep_last=2), summary=_summary(_chat(4), 6, 0)
    )
    injected = [m for m in result.messages if "<echo_summary" in m["content"]]
    assert len(injected) == 1
    assert "old" not in injected[0]["content"]


def test_over_budget_drops_tail_groups_first_then_head_then_summary() -> None:
    items = _chat(6)  # system, then q0 a0 … q5 a5
    summary = _summary(items, covered=6)

    def at(budget: int) -> assembly.Assembly:
        policy = AssemblyPolicy(keep_first=1, keep_last=6, max_context_tokens=budget)
        return assemble(items, policy=policy, summary=summary)

    def contents(result: assembly.Assembly) -> list[str]:
        return ["S" if text.startswith("<echo_summary") else text for text in _texts(result)]

    full = at(10_000)
    assert contents(full) == [
        "Today is Monday.",
        "question 0",
        "S",
        *[f"{w} {i}" for i in (3, 4, 5) for w in ("question", "answer")],
    ]
    cost = {text: message_tokens(m) for text, m in zip(contents(full), full.messages, strict=True)}
    one_less = at(full.tokens_after - 1)
    assert contents(one_less)[3:5] == ["answer 3", "question 4"]
    assert one_less.dropped_groups == 1
    core = cost["Today is Monday."] + cost["question 5"] + cost["answer 5"]
    with_head = at(core + cost["question 0"] + cost["S"])
    assert contents(with_head) == ["Today is Monday.", "question 0", "S", "question 5", "answer 5"]
    no_head = at(core + cost["S"])
    assert contents(no_head) == ["Today is Monday.", "S", "question 5", "answer 5"]
    assert no_head.messages[1]["role"] == "user"
    bare = at(core)
    assert contents(bare) == ["Today is Monday.", "question 5", "answer 5"]
    assert (bare.dropped_summary, bare.summary_injected, bare.over_budget) == (True, False, False)
    assert bare.dropped_groups == 5
    hopeless = at(0)
    assert contents(hopeless) == contents(bare)
    assert hopeless.over_budget


def test_over_budget_folds_before_dropping_and_a_failed_fold_keeps_the_original() -> None:
    document = "\n".join(["# Report", *[f"line {i} " + "w" * 60 for i in range(200)], "## End", "bye"])
    items: list[dict[str, Any]] = [
        {"role": "user", "content": document, "id": "m0"},
        {"role": "assistant", "content": "ok", "id": "m1"},
        {"role": "user", "content": "x" * 7000, "id": "m2"},  # one long line: folds to its two ends
        {"role": "assistant", "content": "ok", "id": "m3"},
        {"role": "user", "content": "and now?", "id": "m4"},
    ]
    before = sum(message_tokens(m) for m in items)
    result = assemble(items, policy=AssemblyPolicy(keep_first=0, keep_last=0, max_context_tokens=before // 3))
    assert result.folded >= 1
    assert result.dropped_groups == 0
    folded = result.messages[0]["content"]
    assert folded.startswith("# Report\nline 0")
    assert "## End" in folded
    assert folded.endswith("bye")
    assert "lines collapsed" in folded
    small = [
        {"role": "user", "content": "short " * 10, "id": "m0"},
        {"role": "user", "content": "q", "id": "m1"},
    ]
    kept = assemble(small, policy=AssemblyPolicy(keep_last=0, max_context_tokens=5, fold_threshold_chars=10))
    assert kept.folded == 0
    assert kept.dropped_groups == 1


def test_protected_blocks_stay_whole_in_place_and_off_the_chain() -> None:
    block = {"role": "user", "content": "<echo_reference chat='c1'>" + "t" * 5000 + "</echo_reference>"}
    items = [*_chat(3), block, {"role": "user", "content": "use it", "id": "m9"}]
    assert conversation_turns(items).hashes[:6] == conversation_turns(_chat(3)).hashes
    result = assemble(
        items, policy=AssemblyPolicy(keep_last=0, max_context_tokens=10, fold_threshold_chars=10)
    )
    assert result.messages[-2] is block
    assert result.over_budget


def test_tool_outputs_of_earlier_turns_are_trimmed_current_ones_never() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 900},
        {"role": "assistant", "content": "found"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 900},
    ]
    result = assemble(items, policy=AssemblyPolicy(), locale="es-ES")
    assert result.trimmed_tool_outputs == 1
    assert result.messages[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "[salida de herramienta recortada: 900 caracteres]",
    }
    assert result.messages[6] is items[6]
    off = assemble(items, policy=AssemblyPolicy(enable_tool_output_trimming=False))
    assert off.trimmed_tool_outputs == 0
    turns = conversation_turns(items)
    covering = StoredSummary(turns.hashes[3], 4, "<working_memory/>")
    summarised = assemble(items, policy=AssemblyPolicy(keep_first=0, keep_last=0), summary=covering)
    assert summarised.trimmed_tool_outputs == 0  # the trimmed group is summarised, not sent
    assert summarised.covered_turns == 4


def test_policy_validation_and_valves() -> None:
    with pytest.raises(ValueError, match="keep_last"):
        AssemblyPolicy(keep_last=-1)
    with pytest.raises(ValueError, match="max_context_tokens"):
        AssemblyPolicy(max_context_tokens=-5)
    with pytest.raises(ValueError, match="tool_trim_threshold_chars"):
        AssemblyPolicy(tool_trim_threshold_chars=0)
    from echo.config.valves import CompressionValves
    from echo.domain.compression.budgets import Thresholds

    policy = AssemblyPolicy.from_valves(
        CompressionValves(keep_first=2, keep_last=3, tool_trim_threshold_chars=50), Thresholds(10, 900, "x")
    )
    assert (
        policy.keep_first,
        policy.keep_last,
        policy.max_context_tokens,
        policy.tool_trim_threshold_chars,
    ) == (
        2,
        3,
        900,
        50,
    )


def test_selected_summary_from_the_store_round_trip() -> None:
    items = _chat(5)
    turns = conversation_turns(items)
    stored = [_summary(items, 4), _summary(items, 8), StoredSummary("0" * 64, 9, "other branch")]
    chosen = selection.select_summary(turns.hashes, stored)
    assert chosen is stored[1]
    result = assemble(items, policy=AssemblyPolicy(keep_first=1, keep_last=2), summary=chosen)
    assert result.covered_turns == 7
