"""The filter's cached kinds, costs and chain, and ``assemble`` fed with them, agree with the pure
functions computed from scratch (the inlet's fast path changes no result)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echo import tokens
from echo.compression import assembly, fence, selection
from echo.compression import messages as msgs
from echo.filters import compression

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
