"""The offline provider's extractive summary: informative sentences, in order, after who said them,
small talk out, duplicates once, and never more tokens than the budget."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from echo.domain import extractive, tokens

TRANSCRIPT = """\
<compression_input>
<conversation>
[1] User: Hi there! How are you?
[2] Assistant: Hello! I'm great, thanks for asking.
[3] User: We moved the nightly backup of the orders database to 02:30 UTC on the replica in Frankfurt.
[4] Assistant: Wow, that's cool!
[5] User: Thanks!
[6] Assistant: Noted. The restore test showed the backup takes 47 minutes for 310 GB of data.
[7] User: Okay, sounds good.
[8] Assistant: Haha, awesome.
[9] User: The retention policy keeps 14 daily snapshots and 6 monthly ones in the Glacier bucket.
[10] Assistant: Sure, no problem!
[11] User: Bye, take care!
</conversation>
</compression_input>
"""
SMALL_TALK = ("Hi there", "Hello!", "cool!", "Thanks!", "sounds good", "awesome", "no problem", "take care")


def test_small_talk_is_dropped_when_informative_sentences_exist() -> None:
    summary = extractive.summarize(TRANSCRIPT, 80)
    assert tokens.exact_tokens(summary) <= 80
    assert "02:30 UTC" in summary
    assert "14 daily snapshots" in summary
    assert not [phrase for phrase in SMALL_TALK if phrase in summary]
    assert "<conversation>" not in summary


def test_sentences_keep_their_order_and_speaker_without_the_number() -> None:
    summary = extractive.summarize(TRANSCRIPT, 90)
    lines = summary.splitlines()
    assert lines
    assert all(line.startswith(("User: ", "Assistant: ")) for line in lines)
    assert not re.search(r"\[\d+\]", summary)
    positions = [TRANSCRIPT.index(line.split(": ", 1)[1]) for line in lines]
    assert positions == sorted(positions)
    assert "Assistant: The restore test showed the backup takes 47 minutes for 310 GB of data." in lines


def test_a_named_speaker_inside_a_message_is_kept() -> None:
    text = (
        "[1] User: Ana: Hey Bo, how was your weekend?\n"
        "[2] Assistant: Bo: Great! I adopted a beagle puppy called Pixel from the Lyon shelter on Saturday.\n"
        "[3] User: Ana: Aww, so sweet!\n"
        "[4] Assistant: Bo: Thanks, Ana!\n"
        "[5] User: Ana: My sister starts her cardiology residency at the Geneva hospital in March.\n"
    )
    summary = extractive.summarize(text, 45)
    assert summary.splitlines() == [
        "Assistant: Bo: I adopted a beagle puppy called Pixel from the Lyon shelter on Saturday.",
        "User: Ana: My sister starts her cardiology residency at the Geneva hospital in March.",
    ]


def test_near_identical_sentences_are_kept_once() -> None:
    fact = "The staging cluster runs Kubernetes 1.29 with three worker nodes in Paris."
    text = "\n".join(
        [
            f"user: {fact}",
            f"assistant: {fact.replace('three', 'three') + ' '}",
            "user: The staging cluster runs Kubernetes 1.29 with three worker nodes in Paris!",
            "assistant: Deployments to production need approval from the security team on Fridays.",
            "user: The invoices service writes to PostgreSQL 16 with logical replication enabled.",
            "assistant: " + "Filler sentence about nothing in particular here. " * 6,
        ]
    )
    summary = extractive.summarize(text, 80)
    assert summary.count("staging cluster") == 1
    assert tokens.exact_tokens(summary) <= 80


def test_plain_text_stays_prose_and_a_short_text_is_whole() -> None:
    assert extractive.summarize("One sentence. Another one.", 50) == "One sentence. Another one."
    prose = (
        "The quarterly report was published on 3 March. It shows revenue grew 12% in Europe. "
        "Nice. The board approved a new office in Montreal for 2027. Thanks everyone."
    )
    summary = extractive.summarize(prose, 30)
    assert "\n" not in summary
    assert "Nice." not in summary
    assert "Thanks everyone." not in summary
    assert tokens.exact_tokens(summary) <= 30


def test_only_small_talk_still_gives_a_summary() -> None:
    summary = extractive.summarize("user: Hi!\nassistant: Hello!\nuser: Thanks!\nassistant: Bye!\n" * 20, 6)
    assert summary
    assert tokens.exact_tokens(summary) <= 6


def test_a_budget_below_one_gives_nothing() -> None:
    assert extractive.summarize(TRANSCRIPT, 0) == ""


_LINE = st.one_of(
    st.text(min_size=0, max_size=200),
    st.builds(
        lambda n, role, body: f"[{n}] {role}: {body}",
        st.integers(1, 999),
        st.sampled_from(["User", "Assistant", "Tool result (search)", "User: Ana"]),
        st.text(min_size=0, max_size=200),
    ),
    st.sampled_from(
        ["Thanks!", "Wow, great!", "Hi Bo!", "<conversation>", "Le 3 mai à Paris, 12 €.", "我喝茶。"]
    ),
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_LINE, min_size=1, max_size=40), budget=st.integers(min_value=1, max_value=600))
def test_the_budget_in_tokens_is_never_exceeded(lines: list[str], budget: int) -> None:
    text = "\n".join(lines)
    summary = extractive.summarize(text, budget)
    assert tokens.exact_tokens(summary) <= budget
    assert summary == extractive.summarize(text, budget)  # deterministic


@settings(max_examples=60, deadline=None)
@given(
    facts=st.lists(st.integers(min_value=0, max_value=10**6), min_size=3, max_size=25, unique=True),
    budget=st.integers(min_value=20, max_value=200),
)
def test_kept_sentences_are_in_conversation_order(facts: list[int], budget: int) -> None:
    lines = [
        f"[{i}] User: Order {fact} shipped from warehouse W{fact % 97} to Oslo."
        for i, fact in enumerate(facts)
    ]
    lines.insert(1, "[99] Assistant: Thanks, great!")
    summary = extractive.summarize("\n".join(lines), budget)
    assert tokens.exact_tokens(summary) <= budget
    kept = [int(m) for m in re.findall(r"Order (\d+) shipped", summary)]
    assert kept == [fact for fact in facts if fact in kept]


def test_the_material_of_a_summary_prompt_is_the_conversation_not_the_instructions() -> None:
    from echo.domain.compression.prompts import build_summary_prompt

    prompt = build_summary_prompt(
        "[1] User: The vault opens with the brass key.", "The user keeps a vault.", max_summary_tokens=200
    )
    material = extractive.material(prompt)
    assert "The vault opens with the brass key." in material
    assert "The user keeps a vault." in material
    assert "Return only the XML working memory." not in material
    assert "<conversation>" not in material
    assert extractive.material("No blocks here.") == "No blocks here."
