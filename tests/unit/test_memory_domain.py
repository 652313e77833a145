"""The pure memory domain: windows, cleaning, the small-talk filter, collisions and merges."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.adapters.store import conversations
from echo.domain import chain, tokens
from echo.domain.memory import cleaning, collisions, distillation, merging, recall, windows, worth
from echo.domain.memory import context as memory_context


def hashes(count: int) -> list[str]:
    out, parent = [], None
    for i in range(count):
        parent = chain.cumulative_hash(chain.invariant_hash("user", f"m{i}", []), parent)
        out.append(parent)
    return out


def test_a_window_ends_every_size_messages_and_overlaps_the_previous_one() -> None:
    branch = hashes(14)
    due = windows.due_windows(branch, size=5, overlap=2, lookback=14)
    assert [(w.start, w.stop) for w in due] == [(0, 5), (3, 10)]
    assert [w.key for w in due] == [branch[4], branch[9]]
    assert len(due[1]) == 7  # WINDOW_SIZE + WINDOW_OVERLAP


def test_an_outlet_asks_only_for_the_windows_ending_among_its_last_messages() -> None:
    branch = hashes(40)
    assert [w.stop for w in windows.due_windows(branch, size=5, overlap=2)] == [35, 40]
    assert windows.due_windows(branch[:3], size=5, overlap=2) == []


@given(st.integers(1, 12), st.integers(0, 6), st.integers(1, 120))
def test_played_turn_by_turn_every_message_is_in_a_window_once_a_window_ends_after_it(
    size: int, overlap: int, count: int
) -> None:
    branch = hashes(count)
    seen: dict[str, windows.Window] = {}
    for end in range(1, count + 1):  # one outlet per message (the tightest Open WebUI can do)
        for window in windows.due_windows(branch[:end], size=size, overlap=overlap):
            seen[window.key] = window
    last_end = count - count % size
    covered = {i for w in seen.values() for i in range(w.start, w.stop)}
    assert covered == set(range(last_end))
    assert all(len(w) <= size + overlap for w in seen.values())


def test_bad_window_valves_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="WINDOW_SIZE"):
        windows.due_windows(hashes(3), size=0, overlap=2)
    with pytest.raises(ValueError, match="WINDOW_OVERLAP"):
        windows.due_windows(hashes(3), size=2, overlap=-1)


def test_cleaning_keeps_role_text_file_names_and_the_day_sent_only() -> None:
    messages = [
        {"id": "s", "role": "system", "content": "You are helpful."},
        {
            "id": "u1",
            "role": "user",
            "timestamp": 1795981950,
            "content": [
                {"type": "text", "text": "Look   at this\r\nplan"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 400}},
            ],
            "files": [{"type": "file", "id": "f1", "name": "plan.pdf"}],
            "metadata": {"branch": "x"},
        },
        {
            "id": "a1",
            "role": "assistant",
            "content": '<details type="reasoning" done="true">\nthinking…\n</details>\nIt looks fine.'
            '<smart_context filename="a">x</smart_context>',
        },
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"rows": list(range(50))})},
        {"role": "user", "content": '<echo_memories count="1">old</echo_memories>'},
    ]
    cleaned = cleaning.clean_messages(messages)
    assert cleaned == [
        cleaning.CleanMessage("user", "Look at this\nplan", ("plan.pdf",), 1795981950.0),
        cleaning.CleanMessage("assistant", "It looks fine."),
    ]
    assert cleaning.render(cleaned) == (
        "User (29 November 2026): Look at this\nplan\n[files: plan.pdf]\n\nAssistant: It looks fine."
    )


def test_stored_messages_name_their_files_through_the_names_given() -> None:
    stored = [{"role": "user", "content": "see attached", "files": ["f1", "f2"]}]
    cleaned = cleaning.clean_messages(stored, {"f1": "a.csv"})
    assert cleaned[0].files == ("a.csv",)


def test_a_stored_message_keeps_the_day_it_was_sent_for_its_window() -> None:
    sent = 1683554160  # 8 May 2023, 13:56 UTC
    stored = conversations.stored_message({"role": "user", "content": "I moved to Lyon.", "timestamp": sent})
    assert stored["timestamp"] == sent
    assert cleaning.render(cleaning.clean_messages([stored])) == "User (8 May 2023): I moved to Lyon."
    undated = conversations.stored_message({"role": "user", "content": "hi", "timestamp": "soon"})
    assert "timestamp" not in undated
    assert "timestamp" not in conversations.stored_message({"role": "user"})


def test_cleaning_an_open_webui_outlet_body_is_several_times_cheaper_than_str() -> None:
    message = {
        "id": "3f0c6b0e-8f1e-4d5c-9a53-4543484f0001",
        "parentId": "5f0c6b0e-8f1e-4d5c-9a53-4543484f0002",
        "childrenIds": ["7f0c6b0e-8f1e-4d5c-9a53-4543484f0003"],
        "role": "assistant",
        "content": "Sure.",
        "timestamp": 1795981950,
        "model": "gemini-2.5-flash",
        "modelName": "gemini-2.5-flash",
        "modelIdx": 0,
        "usage": {"prompt_tokens": 1200, "completion_tokens": 3, "total_tokens": 1203},
        "done": True,
        "info": None,
    }
    raw = tokens.estimate_tokens(str([message] * 7))
    clean = tokens.estimate_tokens(cleaning.render(cleaning.clean_messages([message] * 7)))
    assert raw / clean > 8


def test_small_talk_is_not_worth_distilling_and_facts_are() -> None:
    def worth_of(*texts: str) -> bool:
        return worth.is_worth_distilling([cleaning.CleanMessage("user", t) for t in texts])

    assert not worth_of("Hi!", "Hello! How can I help you today?", "Thanks, bye", "You're welcome, bye!")
    assert not worth_of("Bonjour !", "Bonjour, comment puis-je vous aider ?", "Merci, bonne journée")
    assert not worth_of("你好", "你好！", "谢谢")
    assert worth_of("My daughter Léa starts at the Lycée Hoche in Versailles next September.")
    assert worth_of("我下个月要搬到上海浦东工作，公司在陆家嘴。")


def test_collisions_follow_the_seed_thresholds() -> None:
    def action(score: float | None) -> collisions.Action:
        nearest = None if score is None else ("m1", score)
        return collisions.decide(nearest, similarity_threshold=0.85, exact_match_threshold=0.95).action

    assert action(None) is collisions.Action.INSERT
    assert action(0.84) is collisions.Action.INSERT
    assert action(0.85) is collisions.Action.MERGE
    assert action(0.949) is collisions.Action.MERGE
    assert action(0.95) is collisions.Action.TOUCH
    assert collisions.merged_importance(5, 2) == 5
    assert collisions.merged_tags(["a", "b"], ["b", "c", "d", "e", "f"]) == ("a", "b", "c", "d", "e")
    with pytest.raises(ValueError, match="EXACT_MATCH_THRESHOLD"):
        collisions.decide(None, similarity_threshold=0.9, exact_match_threshold=0.8)


def test_the_offline_merge_keeps_every_sentence_of_both_once() -> None:
    old = "Ada lives in Paris. She works at Inria on compilers."
    new = "Ada lives in Paris. She moved to Lyon in 2026. Her cat is called Turing."
    merged = merging.offline_merge(old, new)
    assert merged == (
        "Ada lives in Paris. She works at Inria on compilers. She moved to Lyon in 2026. "
        "Her cat is called Turing."
    )
    assert merging.offline_merge(merged, new) == merged


def test_a_merge_answer_without_text_is_invalid_naming_the_field() -> None:
    with pytest.raises(distillation.InvalidDistillation, match="summary"):
        merging.parse_merge({"summary": "  "})
    assert merging.parse_merge({"summary": " merged "}) == "merged"


def test_a_huge_message_keeps_its_head_and_tail_within_the_bound() -> None:
    text = "START " + "log line\n" * 200_000 + " END"
    [cleaned] = cleaning.clean_messages([{"role": "user", "content": text}])
    assert len(cleaned.text) < cleaning.MAX_MESSAGE_CHARS + 60
    assert cleaned.text.startswith("START")
    assert cleaned.text.endswith("END")
    assert "characters cut" in cleaned.text


def test_windows_of_images_only_or_tool_output_only_clean_to_nothing() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 100}}
    assert cleaning.clean_messages([{"role": "user", "content": [image]}]) == []
    tools = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "{}"},
    ]
    assert cleaning.clean_messages(tools) == []
    assert cleaning.clean_messages([{"role": "user", "content": None}, {"role": 3, "content": "x"}]) == []


def test_a_merge_stays_the_size_of_one_memory_the_new_fact_kept() -> None:
    old = "Ada lives in Paris with her two cats and works as a nurse at the Hôpital Saint-Louis in the city."
    new = "Ada moved to Lyon in 2026 and now works as a nurse at the Édouard Herriot hospital there."
    merged = merging.offline_merge(old, new)
    assert "Lyon" in merged
    assert tokens.estimate_tokens(merged) <= distillation.MAX_MEMORY_TOKENS
    long_answer = {"summary": "word " * (distillation.MAX_FACT_WORDS + 1)}
    with pytest.raises(distillation.InvalidDistillation):
        merging.parse_merge(long_answer)


def test_the_summary_a_request_carries_is_read_back_only_when_it_is_a_hash() -> None:
    body = memory_context.with_summary({"metadata": {"chat_id": "c1"}}, "a" * 64)
    assert body["metadata"]["chat_id"] == "c1"
    assert memory_context.summary_of(body) == "a" * 64
    assert memory_context.summary_of({"metadata": {memory_context.SUMMARY_KEY: "not a hash"}}) is None
    assert memory_context.summary_of({}) is None
    held = memory_context.held(["1" * 64], ["2" * 64], "Caroline joined a choir")
    assert held.carried == {"1" * recall.SOURCE_CHARS}
    assert held.summarised == {"2" * recall.SOURCE_CHARS}
    assert held.summary_terms == {"caroline", "joined", "choir"}


def test_sources_are_hash_prefixes_once_each_and_none_past_the_limit() -> None:
    assert recall.source_ids(["ab" * 32, "ab" * 32, "cd" * 32]) == ["ab" * 8, "cd" * 8]
    assert recall.source_ids(f"{i:016x}" + "0" * 48 for i in range(recall.MAX_SOURCES + 1)) is None
    known = recall.Candidate("m", "text", 0.9, 3, 0.0, sources=frozenset({"ab" * 8}))
    assert memory_context.holds(memory_context.Held(frozenset({"ab" * 8, "cd" * 8})), known)
    assert not memory_context.holds(memory_context.Held(frozenset({"cd" * 8})), known)
    unknown = recall.Candidate("n", "text", 0.9, 3, 0.0)
    assert not memory_context.holds(memory_context.Held(frozenset({"ab" * 8})), unknown)


def test_a_summarised_memory_is_held_only_when_the_summary_states_it() -> None:
    fact = recall.Candidate(
        "m",
        "[8 May, 2023] Caroline went to an LGBTQ support group",
        0.9,
        3,
        0.0,
        sources=frozenset({"ab" * 8}),
    )
    stated = memory_context.held([], ["ab" * 32], "On 8 May 2023 Caroline went to an LGBTQ support group.")
    lost = memory_context.held([], ["ab" * 32], "Caroline and Melanie talked about painting and their kids.")
    elsewhere = memory_context.held([], ["cd" * 32], "On 8 May 2023 Caroline went to an LGBTQ support group.")
    assert memory_context.holds(stated, fact)
    assert not memory_context.holds(lost, fact)  # left the context: the summary dropped it
    assert not memory_context.holds(elsewhere, fact)  # its messages are not in this request at all
