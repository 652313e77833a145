"""Unit and property tests for echo.domain.compression.selection: branch-valid summaries only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain.compression.messages import conversation_turns
from echo.domain.compression.selection import StoredSummary, is_valid_for, select_summary

TEXTS = st.text(alphabet="abcxyz ", min_size=1, max_size=10)


def _chat(texts: list[str], system: str = "Today is Monday.") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "system", "content": system}]
    items += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    return items


def _summaries(items: list[dict[str, Any]], upto: int, label: str) -> list[StoredSummary]:
    hashes = conversation_turns(items).hashes
    return [StoredSummary(hashes[n - 1], n, f"{label}{n}") for n in range(1, upto + 1)]


@given(st.lists(TEXTS, min_size=1, max_size=10), st.data())
def test_after_an_edit_the_nearest_valid_ancestor_wins_and_siblings_never(
    texts: list[str], data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, len(texts) - 1), label="edited turn")
    edited_texts = [*texts[:k], texts[k] + " (edited)", *data.draw(st.lists(TEXTS, max_size=4))]
    original, edited = _chat(texts), _chat(edited_texts, system="Today is Tuesday.")  # a new date
    made_on_edit = data.draw(st.integers(0, len(edited_texts)), label="summaries on the edited branch")
    candidates = _summaries(original, len(texts), "old") + _summaries(edited, made_on_edit, "new")
    candidates = data.draw(st.permutations(candidates))
    hashes = conversation_turns(edited).hashes
    chosen = select_summary(hashes, candidates)
    expected = max(k, made_on_edit)
    if expected == 0:
        assert chosen is None
        return
    assert chosen is not None
    assert chosen.covered_count == expected
    assert chosen.covered_hash == hashes[expected - 1]
    sibling = [s for s in candidates if s.text.startswith("old") and s.covered_count > k]
    assert not any(is_valid_for(s, hashes) for s in sibling)


def test_newest_of_one_branch_point_wins_and_bad_counts_are_ignored() -> None:
    items = _chat(["q", "a", "q2", "a2"])
    hashes = conversation_turns(items).hashes
    older = StoredSummary(hashes[1], 2, "older", created_at=10.0)
    newer = StoredSummary(hashes[1], 2, "newer", created_at=20.0)
    misplaced = StoredSummary(hashes[1], 3, "count does not match the key")
    beyond = StoredSummary(hashes[3], 5, "longer than the branch")
    assert select_summary(hashes, [newer, older, misplaced, beyond]) is newer
    assert select_summary(hashes, [older, newer]) is newer
    assert select_summary(hashes, []) is None
    assert select_summary((), [older]) is None


def test_a_forked_chat_reuses_the_summaries_of_its_common_prefix() -> None:
    source = _chat(["plan a trip", "where to?", "Lisbon", "good choice"])
    fork = _chat(["plan a trip", "where to?", "Lisbon", "good choice", "and hotels?"], system="Other prompt")
    summary = _summaries(source, 4, "s")[-1]
    assert select_summary(conversation_turns(fork).hashes, [summary]) is summary


@pytest.mark.parametrize(
    ("covered", "head", "match"), [(0, 0, "covered_count"), (2, 3, "head_count"), (2, -1, "head_count")]
)
def test_stored_summary_validation(covered: int, head: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        StoredSummary("0" * 64, covered, "t", head_count=head)
