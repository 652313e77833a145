"""echo.domain.compression.compaction: a recorded branch rebuilt, and "summarise it now" planned."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.adapters.store.conversations import stored_message
from echo.domain.compression.compaction import MissingMessages, plan_compaction, rebuild_branch
from echo.domain.compression.messages import conversation_turns
from echo.domain.compression.planning import plan_summary
from echo.domain.compression.selection import StoredSummary


def _turns(n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(n):
        items.append({"role": "user", "content": f"question {i}"})
        items.append({"role": "assistant", "content": f"answer {i}"})
    return items


def _recorded(items: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """What the outlet leaves in the store: the head's invariants and the messages by invariant."""
    turns = conversation_turns(items)
    invariants = [link.invariant for link in turns.links]
    return invariants, {
        link.invariant: stored_message(items[p]) for link, p in zip(turns.links, turns.positions, strict=True)
    }


def test_a_rebuilt_branch_has_the_chain_the_outlet_saw() -> None:
    items = [{"role": "system", "content": "Be brief."}, *_turns(5)]
    invariants, stored = _recorded(items)
    branch = rebuild_branch(invariants, stored)
    original = conversation_turns(items)
    assert branch.turns.hashes == original.hashes
    assert [link.role for link in branch.turns.links] == [link.role for link in original.links]
    assert branch.turns.positions == tuple(range(10))
    assert [m["content"] for m in branch.messages] == [m["content"] for m in items[1:]]


def test_a_repeated_message_is_stored_once_and_placed_twice() -> None:
    items = [*_turns(1), {"role": "user", "content": "ok"}, {"role": "assistant", "content": "a"}]
    items += [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "b"}]
    invariants, stored = _recorded(items)
    assert len(stored) == 5
    branch = rebuild_branch(invariants, stored)
    assert branch.turns.hashes == conversation_turns(items).hashes


def test_missing_messages_are_named() -> None:
    invariants, stored = _recorded(_turns(3))
    gone = invariants[2]
    del stored[gone]
    with pytest.raises(MissingMessages) as error:
        rebuild_branch(invariants, stored)
    assert error.value.missing == (gone,)
    assert "1 of the branch's messages" in str(error.value)


def test_compaction_plans_what_plan_summary_plans_whatever_the_size() -> None:
    items = _turns(6)  # a few tokens: far below any threshold
    branch = rebuild_branch(*_recorded(items))
    done = plan_compaction(branch.messages, branch.turns, keep_first=1, keep_last=4)
    assert done.outcome == "planned"
    assert done.plan == plan_summary(branch.messages, branch.turns, keep_first=1, keep_last=4)
    assert done.plan is not None
    assert (done.plan.start, done.plan.stop, done.turns) == (1, 8, 12)
    assert done.reason == "summarise turns 2-8 of 12"


def test_an_existing_summary_is_folded_in_or_already_covers_the_branch() -> None:
    branch = rebuild_branch(*_recorded(_turns(6)))
    hashes = branch.turns.hashes
    earlier = StoredSummary(hashes[5], 6, "<working_memory/>", head_count=1)
    done = plan_compaction(branch.messages, branch.turns, keep_first=1, keep_last=4, previous=earlier)
    assert done.outcome == "planned"
    assert done.plan is not None
    assert (done.plan.start, done.plan.stop, done.plan.previous) == (6, 8, earlier)
    assert done.reason.endswith("into the summary of the first 6")
    covering = StoredSummary(hashes[7], 8, "<working_memory/>", head_count=1)
    done = plan_compaction(branch.messages, branch.turns, keep_first=1, keep_last=4, previous=covering)
    assert (done.outcome, done.plan, done.previous) == ("summarised", None, covering)
    assert "already covers everything before the last 4" in done.reason


def test_a_summary_of_another_branch_is_ignored() -> None:
    branch = rebuild_branch(*_recorded(_turns(6)))
    stranger = StoredSummary("f" * 64, 8, "another branch")
    done = plan_compaction(branch.messages, branch.turns, keep_first=1, keep_last=4, previous=stranger)
    assert done.outcome == "planned"
    assert done.previous is None
    assert done.plan is not None
    assert done.plan.start == 1


def test_a_short_branch_has_nothing_to_summarise() -> None:
    branch = rebuild_branch(*_recorded(_turns(2)))
    done = plan_compaction(branch.messages, branch.turns, keep_first=1, keep_last=3)
    assert (done.outcome, done.plan, done.turns) == ("nothing", None, 4)
    assert "keep_first=1, keep_last=3" in done.reason
    empty = rebuild_branch([], {})
    assert plan_compaction(empty.messages, empty.turns, keep_first=0, keep_last=0).outcome == "nothing"


def test_a_tool_call_and_its_results_are_never_split() -> None:
    call = {"id": "t1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    items = [
        *_turns(2),
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "t1", "content": "found"},
        {"role": "assistant", "content": "here it is"},
    ]
    branch = rebuild_branch(*_recorded(items))
    # keep_last=2 would cut between the call and its result: the plan ends before the call.
    done = plan_compaction(branch.messages, branch.turns, keep_first=0, keep_last=2)
    assert done.plan is not None
    assert done.plan.stop == 5


@given(
    n=st.integers(0, 12),
    keep_first=st.integers(0, 6),
    keep_last=st.integers(0, 8),
    covered=st.integers(0, 24),
)
def test_outcomes_agree_with_plan_summary(n: int, keep_first: int, keep_last: int, covered: int) -> None:
    branch = rebuild_branch(*_recorded(_turns(n)))
    count = len(branch.turns)
    previous = (
        StoredSummary(branch.turns.hashes[covered - 1], covered, "s", head_count=min(keep_first, covered))
        if 0 < covered <= count
        else None
    )
    done = plan_compaction(
        branch.messages, branch.turns, keep_first=keep_first, keep_last=keep_last, previous=previous
    )
    plan = plan_summary(
        branch.messages, branch.turns, keep_first=keep_first, keep_last=keep_last, previous=previous
    )
    assert done.plan == plan
    assert (done.outcome == "planned") == (plan is not None)
    if done.outcome == "summarised":
        assert previous is not None
        assert previous.covered_count >= count - keep_last
    if plan is not None:
        assert plan.stop <= count - keep_last
