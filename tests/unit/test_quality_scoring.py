"""The scoring of bench/quality.py (`bench/locomo.py`): content words, answer recall, the baselines'
budgets, and which LoCoMo QA pairs are judged."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from echo.domain import tokens, transcripts
from echo.domain.memory import context as memory_context

LOCOMO_PATH = Path(__file__).resolve().parents[2] / "bench" / "locomo.py"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "locomo" / "30.json"


def _locomo() -> ModuleType:
    name = "bench_locomo_for_tests"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, LOCOMO_PATH)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


locomo = _locomo()


def test_content_words_drop_stopwords_and_case_and_keep_numbers_and_months() -> None:
    assert locomo.content_words("The LGBTQ support group") == ["lgbtq", "support", "group"]
    assert locomo.content_words("7 May 2023") == ["7", "may", "2023"]
    assert locomo.content_words("She went to the beach, and the Beach was fun") == ["went", "beach", "fun"]
    assert locomo.content_words("Yes, it was") == []


def test_plurals_and_possessives_meet_on_both_sides() -> None:
    assert locomo.content_words("three dogs") == ["three", "dog"]
    assert "caroline" in locomo.words_of("Caroline's new job")
    assert locomo.answer_recalled("dogs", "Audrey walked her dog")
    assert locomo.answer_recalled("her dog", "Audrey has three dogs")


@pytest.mark.parametrize(
    ("answer", "text", "recalled"),
    [
        ("7 May 2023", "[session 1, 1:56 pm on 8 May, 2023] Caroline: hi", True),  # 2 of 3
        ("7 May 2023", "Caroline went on 7 June 2022", False),  # 1 of 3
        ("pottery and painting", "She loves painting", True),  # 1 of 2 is half
        ("pottery and painting", "She loves drawing", False),
        ("Transgender woman", "", False),
        ("camping", "CAMPING trip!", True),
        ("a", "a a a", False),  # no content words: never recalled
    ],
)
def test_answer_recall_needs_half_the_content_words(answer: str, text: str, recalled: bool) -> None:
    assert locomo.answer_recalled(answer, text) is recalled
    assert locomo.answer_recalled(answer, locomo.words_of(text)) is recalled


def test_a_word_inside_another_is_not_found() -> None:
    assert not locomo.answer_recalled("art", "she started a new part-time job")
    assert not locomo.answer_recalled("2023", "in 20235")


def test_fill_budget_takes_the_best_first_and_skips_what_does_not_fit() -> None:
    ranked = ["one two three four", "a much longer text than the budget allows at all here", "five six"]
    budget = tokens.estimate_tokens(ranked[0]) + tokens.estimate_tokens(ranked[2])
    assert locomo.fill_budget(ranked, budget, tokens.estimate_tokens) == [ranked[0], ranked[2]]
    assert locomo.fill_budget(ranked, 0, tokens.estimate_tokens) == []


def test_truncation_keeps_system_and_question_then_the_newest_that_fit() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        *({"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i} " * 20}
          for i in range(10)),
        {"role": "user", "content": "What did we say?"},
    ]  # fmt: skip
    cost = locomo.msgs.message_tokens
    fixed = cost(messages[0]) + cost(messages[-1])
    kept = locomo.truncated(messages, fixed + 2 * cost(messages[9]))
    assert kept == [messages[0], messages[9], messages[10], messages[11]]
    assert locomo.truncated(messages, 0) == [messages[0], messages[-1]]
    assert locomo.truncated(messages, 10**9) == messages


def test_judged_pairs_have_answers_and_evidence_played() -> None:
    [chat] = transcripts.parse(json.loads(FIXTURE.read_text()), "30")
    short, whole = locomo.judged(chat, 30), locomo.judged(chat, len(chat.exchanges))
    assert 0 < len(short) < len(whole)
    assert all(q.category in (1, 2, 3, 4) and locomo.content_words(q.answer) for q in whole)
    assert not any(q.category == 5 for q in whole)
    assert {q.text for q in short} <= {q.text for q in whole}
    played = {s for e in chat.exchanges[:30] for m in (*e.sent, *e.replies) for s in m.sources}
    assert all(set(q.evidence) <= played for q in short)


def test_the_data_folder_falls_back_to_the_fixture(tmp_path: Path) -> None:
    assert locomo.data_dir(tmp_path) == tmp_path
    assert locomo.data_dir() in (locomo.SHARED_LOCOMO, locomo.FIXTURE_LOCOMO)
    assert [chat.id for chat in locomo.load(locomo.FIXTURE_LOCOMO)] == ["30"]


def test_every_message_gets_its_sessions_time_one_second_apart() -> None:
    [chat] = locomo.load(FIXTURE.parent, ["30"])
    stamped = locomo.with_timestamps(chat)
    messages = stamped.messages
    assert [m.content for m in messages] == [m.content for m in chat.messages]  # the texts untouched
    first = messages[0]
    assert str(first.content).startswith("[session 1, 4:04 pm on 20 January, 2023]")
    assert first.fields["timestamp"] == 1674230640  # 2023-01-20 16:04 UTC
    assert messages[1].fields["timestamp"] == 1674230641
    opening = next(m for m in messages if "[session 2, " in str(m.content))
    assert opening.fields["timestamp"] == 1675002720  # 2:32 pm on 29 January, 2023
    stamps = [m.fields["timestamp"] for m in messages]
    assert stamps == sorted(stamps)


def test_the_baseline_takes_no_turn_the_request_carries_nor_one_its_summary_covers_and_states() -> None:
    texts = {
        "a": "Jon: I lost my job as a banker.",
        "b": "Gina: I opened a clothing store.",
        "c": "Jon: I went to Paris.",
        "d": "Gina: My store opened in 2023.",
        "e": "Gina: I opened a clothing store.",  # stated, but outside the summary's range
    }
    sources = {key: str(n) * 64 for n, key in enumerate(texts, start=1)}
    summary = "Gina: I opened a clothing store downtown."
    request = memory_context.held([sources["c"]], [sources["a"], sources["b"], sources["d"]], summary)
    ranked = ["d", "c", "e", "b", "a"]
    assert locomo.not_held(ranked, texts, sources, request) == ["d", "e", "a"]
    unsummarised = memory_context.held([sources["c"]])
    assert locomo.not_held(ranked, texts, sources, unsummarised) == ["d", "e", "b", "a"]
