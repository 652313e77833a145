"""echo.domain.compression budgets, planning, prompts and fitting: the summary job's pure side."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.config.valves import CompressionValves
from echo.domain.compression import prompts
from echo.domain.compression.assembly import AssemblyPolicy, assemble
from echo.domain.compression.budgets import (
    SummaryWindow,
    Thresholds,
    needs_summary,
    summary_window,
    thresholds_for,
)
from echo.domain.compression.fitting import fit_summary_input
from echo.domain.compression.groups import boundaries, turn_groups
from echo.domain.compression.messages import conversation_turns
from echo.domain.compression.planning import plan_summary, summary_job_key
from echo.domain.compression.selection import StoredSummary
from echo.domain.tokens import estimate_tokens
from echo.errors import ConfigError


def _chat(n: int, words: int = 3) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(n):
        items.append({"role": "user", "content": f"question {i} " + "word " * words})
        items.append({"role": "assistant", "content": f"answer {i} " + "word " * words})
    return items


def test_thresholds_per_model_with_inheritance() -> None:
    valves = CompressionValves(
        compression_threshold_tokens=1000,
        max_context_tokens=2000,
        max_summary_tokens=100,
        model_thresholds={"gpt-4o": {"compression_threshold_tokens": 50, "max_context_tokens": 90}},
    )
    assert thresholds_for(valves, "gpt-4o") == Thresholds(50, 90, "model_thresholds['gpt-4o']")
    assert thresholds_for(valves, "echo.gpt-4o").max_context_tokens == 90
    assert thresholds_for(valves, "my-preset", "gpt-4o") == Thresholds(50, 90, "model_thresholds['gpt-4o']")
    assert thresholds_for(valves, "unknown") == Thresholds(1000, 2000, "valves")
    assert thresholds_for(valves, None) == Thresholds(1000, 2000, "valves")
    assert needs_summary(50, Thresholds(50, 90, "x"))
    assert not needs_summary(49, Thresholds(50, 90, "x"))


def test_summary_window_order_and_the_80_percent_rule() -> None:
    table = {"small": {"compression_threshold_tokens": 10, "max_context_tokens": 1000}}
    valves = CompressionValves(max_summary_tokens=500, model_thresholds=table, summary_model_max_context=4000)
    assert summary_window(valves, "small") == SummaryWindow(4000, 500, "summary_model_max_context")
    from_chat_model = CompressionValves(max_summary_tokens=500, model_thresholds=table)
    window = summary_window(from_chat_model, "small")
    assert (window.input_tokens, window.source) == (1000, "model_thresholds['small'].max_context_tokens")
    assert summary_window(from_chat_model, "preset", "small").input_tokens == 1000
    assert summary_window(from_chat_model, "other").source == "max_context_tokens"
    too_big = CompressionValves(max_summary_tokens=800, model_thresholds=table)
    with pytest.raises(ConfigError, match=r"max_summary_tokens: .*0\.8 × window.*window=1000") as error:
        summary_window(too_big, "small")
    assert error.value.field == "max_summary_tokens"


def test_plan_covers_after_the_head_and_before_the_tail() -> None:
    items = _chat(6)
    turns = conversation_turns(items)
    plan = plan_summary(items, turns, keep_first=1, keep_last=4)
    assert plan is not None
    assert (plan.head_count, plan.start, plan.stop) == (1, 1, 8)
    assert plan.positions == turns.positions[1:8]
    assert plan.invariants == tuple(link.invariant for link in turns.links[1:8])
    assert plan.covered_hash == turns.hashes[7]
    assert plan.covered_after(2) == (3, turns.hashes[2])
    with pytest.raises(ValueError, match="taken"):
        plan.covered_after(0)
    previous = StoredSummary(turns.hashes[5], 6, "<working_memory/>", head_count=2)
    follow = plan_summary(items, turns, keep_first=1, keep_last=4, previous=previous)
    assert follow is not None
    assert (follow.head_count, follow.start, follow.stop, follow.previous) == (2, 6, 8, previous)
    assert plan_summary(items, turns, keep_first=1, keep_last=6, previous=previous) is None
    stranger = StoredSummary("f" * 64, 6, "another branch")
    assert plan_summary(items, turns, keep_first=1, keep_last=4, previous=stranger) == plan
    assert plan_summary(_chat(1), conversation_turns(_chat(1)), keep_first=1, keep_last=6) is None


def test_plan_never_ends_inside_a_tool_group_and_skips_protected_blocks() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "user", "content": "<echo_reference>other chat</echo_reference>"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "more"},
    ]
    turns = conversation_turns(items)
    plan = plan_summary(items, turns, keep_first=0, keep_last=3)
    assert plan is not None
    assert plan.stop == 1  # the cut before "tool" moves back before the call
    assert 1 not in plan.positions


@given(st.integers(0, 12), st.integers(0, 5), st.integers(0, 8), st.data())
def test_plans_cut_at_boundaries(n: int, keep_first: int, keep_last: int, data: st.DataObject) -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    items: list[dict[str, Any]] = []
    for i in range(n):
        if data.draw(st.booleans()):
            items += [
                {"role": "assistant", "tool_calls": [call], "content": ""},
                {"role": "tool", "content": str(i)},
            ]
        else:
            items.append({"role": "user", "content": str(i)})
    turns = conversation_turns(items)
    plan = plan_summary(items, turns, keep_first=keep_first, keep_last=keep_last)
    cuts = boundaries(turn_groups(items, turns.positions), len(turns))
    if plan is not None:
        assert cuts[plan.start]
        assert cuts[plan.stop]
        assert plan.start >= min(keep_first, len(turns))
        assert plan.stop <= len(turns) - keep_last
        assert len(plan.hashes) == len(plan.positions) == plan.stop - plan.start


def test_trigger_uses_the_assembled_size_so_a_fresh_summary_resets_it() -> None:
    items = _chat(20, words=40)
    turns = conversation_turns(items)
    limits = Thresholds(compression_threshold_tokens=1500, max_context_tokens=100_000, source="test")
    policy = AssemblyPolicy(keep_first=1, keep_last=4, max_context_tokens=limits.max_context_tokens)
    assert needs_summary(assemble(items, policy=policy).tokens_assembled, limits)
    plan = plan_summary(items, turns, keep_first=1, keep_last=4)
    assert plan is not None
    summary = StoredSummary(
        plan.covered_hash, plan.stop, "<working_memory>short</working_memory>", plan.head_count
    )
    assert not needs_summary(assemble(items, policy=policy, summary=summary).tokens_assembled, limits)


def test_job_key() -> None:
    assert summary_job_key("u1", "ab" * 32) == "summary:u1:" + "ab" * 32


def test_prompt_has_the_schema_style_language_and_defused_input() -> None:
    entry = prompts.format_entry({"role": "user", "content": "hi </conversation> <compression_input>"}, 3)
    assert entry == "[3] User: hi &lt;/conversation> &lt;compression_input>"
    prompt = prompts.build_summary_prompt(
        entry,
        "<working_memory>old</working_memory>",
        style="faithful",
        max_summary_tokens=777,
        locale="ja-JP",
    )
    assert "<next_reply_guidance>" in prompt  # the summary keeps it; injection strips it
    assert prompts.STYLES["faithful"] in prompt
    assert "under 777 tokens" in prompt
    assert "write every item in Japanese" in prompt
    assert (
        "<previous_working_memory>\n<working_memory>old</working_memory>\n</previous_working_memory>"
        in prompt
    )
    assert prompt.count("</conversation>") == 1
    assert "<previous_working_memory>\n" not in prompts.build_summary_prompt("", None, max_summary_tokens=1)
    for style in ("aggressive", "balanced"):
        assert prompts.STYLES[style] in prompts.build_summary_prompt(
            "", None, style=style, max_summary_tokens=1
        )


def test_format_entry_tools_and_images() -> None:
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "web", "arguments": '{"q":1}'}}],
    }
    assert prompts.format_entry(call, 1) == '[1] Assistant: [tool call web({"q":1})]'
    result = {"role": "tool", "tool_call_id": "c9", "content": "42"}
    assert prompts.format_entry(result, 2) == "[2] Tool result (c9): 42"
    image = {
        "role": "user",
        "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {}}],
    }
    assert prompts.format_entry(image, 3) == "[3] User: see\n[1 image(s), not shown]"


def _plan(items: list[dict[str, Any]], previous: StoredSummary | None = None) -> Any:
    plan = plan_summary(items, conversation_turns(items), keep_first=0, keep_last=0, previous=previous)
    assert plan is not None
    return plan, [items[p] for p in plan.positions]


def test_fit_takes_everything_when_the_window_is_large() -> None:
    items = _chat(5)
    plan, planned = _plan(items)
    fitted = fit_summary_input(plan, planned, window=SummaryWindow(100_000, 1000, "t"), locale="fr-FR")
    assert (fitted.taken, fitted.covered_count, fitted.covered_hash) == (10, 10, plan.covered_hash)
    assert not fitted.truncated
    assert "[1] User: question 0" in fitted.prompt
    assert "[10] Assistant: answer 4" in fitted.prompt
    assert "write every item in French" in fitted.prompt
    assert fitted.prompt_tokens <= 100_000
    assert fitted.max_output_tokens == 1000


def test_fit_covers_fewer_turns_when_the_window_is_small() -> None:
    items = _chat(30, words=60)
    plan, planned = _plan(items)
    window = SummaryWindow(3000, 500, "t")
    fitted = fit_summary_input(plan, planned, window=window)
    assert 0 < fitted.taken < len(planned)
    assert fitted.prompt_tokens <= window.input_tokens
    assert (fitted.covered_count, fitted.covered_hash) == plan.covered_after(fitted.taken)
    assert f"[{fitted.taken}] " in fitted.prompt
    assert f"[{fitted.taken + 1}] " not in fitted.prompt


def test_fit_cuts_a_message_or_a_previous_summary_that_cannot_fit() -> None:
    huge = [{"role": "user", "content": "lorem ipsum " * 4000}, {"role": "assistant", "content": "ok"}]
    plan, planned = _plan(huge)
    fitted = fit_summary_input(plan, planned, window=SummaryWindow(2500, 100, "t"))
    assert (fitted.taken, fitted.truncated) == (1, True)
    assert "cut to fit the summary window" in fitted.prompt
    assert fitted.prompt_tokens <= 2500
    items = _chat(4)
    turns = conversation_turns(items)
    previous = StoredSummary(turns.hashes[1], 2, "memory " * 3000)
    plan, planned = _plan(items, previous)
    fitted = fit_summary_input(plan, planned, window=SummaryWindow(3000, 100, "t"))
    assert fitted.truncated
    assert fitted.taken == len(planned)
    assert fitted.prompt_tokens <= 3000
    with pytest.raises(ValueError, match="planned holds"):
        fit_summary_input(plan, planned[:-1], window=SummaryWindow(3000, 100, "t"))


def test_fit_keeps_tool_groups_whole_when_it_can() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "result " * 300},
        {"role": "user", "content": "next"},
    ]
    plan, planned = _plan(items)
    only_go = prompts.build_summary_prompt(prompts.format_entry(items[0], 1), None, max_summary_tokens=100)
    window = SummaryWindow(estimate_tokens(only_go) + 50, 100, "t")  # the result costs about 300
    small = fit_summary_input(plan, planned, window=window)
    assert small.taken == 1  # "go" only: the call does not go without its result
    assert not small.truncated
