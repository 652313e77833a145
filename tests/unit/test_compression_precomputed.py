"""The filter's cached kinds, costs and chain, and ``assemble`` fed with them, agree with the pure
functions computed from scratch (the inlet's fast path changes no result)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.compression import filter as compression
from echo.domain import tokens
from echo.domain.compression import assembly, fence, groups, selection
from echo.domain.compression import messages as msgs
from echo.domain.compression import trimming as trimming_module

TEXTS = st.one_of(
    st.text(alphabet="ab é\n#", max_size=20),
    st.lists(st.sampled_from(["# Title", "```", "plain line", "x" * 120, ""]), max_size=40).map("\n".join),
)


@st.composite
def requests(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for number, shape in enumerate(draw(st.lists(st.sampled_from("suuaaatpifmr"), max_size=14))):
        text = draw(TEXTS)
        if shape == "s":
            items.append({"role": "system", "content": text})
        elif shape == "u":
            items.append({"role": "user", "content": text, "id": f"m{number}"})
        elif shape == "a":
            items.append({"role": "assistant", "content": text})
        elif shape == "t":
            call = {"id": f"c{number}", "type": "function", "function": {"name": "f", "arguments": text}}
            items.append({"role": "assistant", "content": "", "tool_calls": [call]})
            items.append({"role": "tool", "tool_call_id": f"c{number}", "content": text * 20})
        elif shape == "p":
            items.append({"role": "user", "content": text, "metadata": {"echo_protected": True}})
        elif shape == "i":
            items.append(
                {"role": "assistant", "content": fence.fenced_summary(text, locale="en", covered_count=2)}
            )
        elif shape == "f":
            items.append({"role": "user", "content": text, "files": [{"id": f"file-{number}"}]})
        elif shape == "m":
            items.append({"role": " User ", "content": [{"type": "text", "text": text}]})
        else:
            items.append(
                {"role": "assistant", "content": f'<details type="tool_calls" result="{"r" * 700}">'}
            )
    return items


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(requests(), st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=3000))
def test_cached_facts_and_precomputed_assembly_agree_with_the_pure_functions(
    request: list[dict[str, Any]], covered: int, budget: int
) -> None:
    costs = compression.Costs()
    for _ in range(2):  # the second time from the caches
        profile = costs.profile(request)
        assert profile.kinds == msgs.kinds_of(request)
        assert profile.costs == tuple(msgs.message_tokens(m, tokens.estimate_tokens) for m in request)
        turns = costs.turns(request, profile.kinds)
        assert turns == msgs.conversation_turns(request)
        assert turns.hashes == tuple(link.cumulative for link in turns.links)
    summary = None
    if len(turns) >= covered:
        summary = selection.StoredSummary(turns.hashes[covered - 1], covered, "what was said", head_count=0)
    policy = assembly.AssemblyPolicy(keep_first=1, keep_last=2, max_context_tokens=budget)
    plain = assembly.assemble(request, policy=policy, summary=summary, counter=costs.count)
    fast = assembly.assemble(
        request, policy=policy, summary=summary, counter=costs.count, kinds=profile.kinds, costs=profile.costs
    )
    assert fast == plain
    prepared = costs.prepare(request, "chat")
    assert (
        assembly.assemble(
            request,
            policy=policy,
            summary=summary,
            counter=costs.count,
            kinds=prepared.profile.kinds,
            costs=prepared.profile.costs,
            groups=prepared.groups,
            positions=prepared.turns.positions,
        )
        == plain
    )


def _pure(request: list[dict[str, Any]]) -> compression_costs.Prepared:
    turns = msgs.conversation_turns(request)
    profile = compression_costs.Profile(
        msgs.kinds_of(request), tuple(msgs.message_tokens(m, tokens.estimate_tokens) for m in request)
    )
    return compression_costs.Prepared(profile, turns, groups.turn_groups(request, turns.positions))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(requests(), st.lists(st.tuples(st.sampled_from("atrei"), requests(), st.integers(0, 20)), max_size=5))
def test_a_chat_prepared_request_after_request_gets_what_the_pure_functions_give(
    first: list[dict[str, Any]], steps: list[tuple[str, list[dict[str, Any]], int]]
) -> None:
    # The next turn appends (a), a regeneration or an edit changes a message (r, e), a request may be
    # shorter (t), a repeat changes nothing (i); other chats' requests share the caches.
    costs = compression.Costs(entries=64)  # small: evictions run too
    request = first
    assert costs.prepare(request, "c1") == _pure(request)
    for step, more, at in steps:
        if step == "a":
            request = [*request, *more]
        elif step == "t":
            request = request[: at % (len(request) + 1)]
        elif step in "re" and request:
            index = at % len(request)
            replaced = {**request[index], "content": f"edited {at}"}
            request = [*request[:index], replaced, *(more if step == "r" else request[index + 1 :])]
        assert costs.prepare(request, "c1") == _pure(request)
        assert costs.prepare(more, "c2") == _pure(more)


def test_a_tool_result_after_the_prefix_joins_its_call_group() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    asked = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    answered = [*asked, {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    costs = compression.Costs()
    assert costs.prepare(asked, "chat").groups == (groups.Group(0, 1), groups.Group(1, 2))
    assert costs.prepare(answered, "chat").groups == (groups.Group(0, 1), groups.Group(1, 3))
    assert costs.prepare(asked, "chat").groups == (groups.Group(0, 1), groups.Group(1, 2))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(requests(), st.integers(min_value=0, max_value=3000), st.booleans())
def test_a_request_left_untouched_is_what_the_general_assembly_makes_of_it(
    request: list[dict[str, Any]], budget: int, trimming: bool
) -> None:
    policy = assembly.AssemblyPolicy(
        keep_first=1, keep_last=2, max_context_tokens=budget, enable_tool_output_trimming=trimming
    )
    result = assembly.assemble(request, policy=policy)
    shape = assembly._Shape.of(request)
    costs = [msgs.message_tokens(m) for m in request]
    head, tail = assembly._layout(policy, None, shape)
    trims: dict[int, dict[str, Any]] = {}
    if trimming:
        trims = trimming_module.tool_output_trims(
            request,
            shape.positions,
            shape.groups,
            threshold_chars=policy.tool_trim_threshold_chars,
            before_turn=shape.current,
            locale="en-US",
        )
    general = assembly._assembled(
        request, shape, (head, tail), None, None, trims, costs, policy, "en-US", tokens.estimate_tokens
    )
    assert result == general
