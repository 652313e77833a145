"""Summaries shorter than what they replace (issue 20): targets, trimming, the offline styles, the
assembly's refusal of a summary that saves nothing, and the room left to later filters."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.adapters.llm.offline import OfflineLLM
from echo.domain import extractive, tokens, transcripts
from echo.domain.compression import allowance, budgets, fitting, lengths, planning, prompts
from echo.domain.compression import messages as msgs
from echo.domain.compression.assembly import AssemblyPolicy, assemble
from echo.domain.compression.selection import StoredSummary
from echo.ports.llm import LLMRequest

LOCOMO = Path(__file__).resolve().parents[1] / "fixtures" / "locomo" / "30.json"
count = tokens.estimate_tokens


def _locomo_messages(limit: int) -> list[dict[str, Any]]:
    chat = transcripts.parse(json.loads(LOCOMO.read_text()), "30")[0]
    return [{"role": m.role, "content": str(m.content)} for m in chat.messages[:limit]]


def _transcript(limit: int) -> str:
    return "\n\n".join(prompts.format_entry(m, i + 1) for i, m in enumerate(_locomo_messages(limit)))


# -- targets -------------------------------------------------------------------------------------


@given(
    covered=st.integers(0, 10**6),
    share=st.floats(0.01, 1.0),
    ceiling=st.integers(1, 50_000),
    style=st.sampled_from(["aggressive", "balanced", "faithful"]),
)
def test_a_target_never_exceeds_the_share_nor_max_summary_tokens(
    covered: int, share: float, ceiling: int, style: str
) -> None:
    target = lengths.summary_target(covered, max_share=share, max_summary_tokens=ceiling, style=style)
    assert target <= share * covered
    assert target <= ceiling
    assert target == 0 or target >= lengths.MIN_SUMMARY_TOKENS


def test_aggressive_asks_for_half_and_the_others_for_the_whole_share() -> None:
    def target(style: str) -> int:
        return lengths.summary_target(8000, max_share=0.25, max_summary_tokens=16384, style=style)

    assert (target("aggressive"), target("balanced"), target("faithful")) == (1000, 2000, 2000)
    assert lengths.summary_target(8000, max_share=0.25, max_summary_tokens=500, style="balanced") == 500
    assert lengths.summary_target(40, max_share=0.25, max_summary_tokens=500, style="balanced") == 0


# -- trimming ------------------------------------------------------------------------------------

MEMORY = """<working_memory>
  <current_goal>Plan the dance studio opening on 20 January 2023.</current_goal>
  <persistent_context><item>Gina lost her job at Door Dash.</item><item>Jon runs a studio.</item>
  </persistent_context>
  <recent_progress><item>Booked the hall for Friday.</item><item>Printed 200 flyers.</item>
  <item>Called Ana.</item></recent_progress>
  <next_reply_guidance><item>Ask about the budget.</item><item>Suggest a date.</item>
  </next_reply_guidance>
</working_memory>"""


def test_an_over_long_working_memory_loses_guidance_then_recent_items_first() -> None:
    target = count(MEMORY) - count("<item>Ask about the budget.</item><item>Suggest a date.</item>") + 2
    trimmed = lengths.trim_summary(MEMORY, target, count)
    assert trimmed is not None
    assert count(trimmed) <= target
    assert "Suggest a date" not in trimmed
    assert "Door Dash" in trimmed
    assert "Printed 200 flyers" in trimmed
    tighter = lengths.trim_summary(MEMORY, count(MEMORY) // 2, count)
    assert tighter is not None
    assert count(tighter) <= count(MEMORY) // 2
    assert "<current_goal>" in tighter
    assert "Called Ana" not in tighter


def test_a_working_memory_cut_at_the_limit_is_closed() -> None:
    cut = MEMORY[: MEMORY.index("Printed 200") + 4]  # the model stopped inside an item
    closed = lengths.trim_summary(cut, 1000, count)
    assert closed is not None
    assert closed.endswith("</recent_progress>\n</working_memory>")
    assert "Booked the hall for Friday." in closed
    assert "Printed" not in closed


def test_plain_text_loses_its_last_lines_and_nothing_fitting_is_refused() -> None:
    text = "Gina: I opened a studio on 20 January.\nJon: I lost my job.\nGina: Let's meet Friday."
    trimmed = lengths.trim_summary(
        text, count("Gina: I opened a studio on 20 January.\nJon: I lost my job."), count
    )
    assert trimmed == "Gina: I opened a studio on 20 January.\nJon: I lost my job."
    assert lengths.trim_summary(MEMORY, 3, count) is None
    assert lengths.trim_summary("", 100, count) is None


# -- the offline summariser's styles --------------------------------------------------------------


def _said(line: str) -> str:
    """A summary line without its speaker labels (``User: Jon: …``)."""
    return re.sub(r"^(?:User|Assistant): (?:[A-Z]\w+: )?", "", line)


def _source_of(line: str, sources: list[str]) -> int:
    return next((i for i, source in enumerate(sources) if _said(line)[:30] in source), -1)


def test_the_three_styles_keep_different_things_within_their_targets() -> None:
    text = _transcript(200)
    targets = {"aggressive": 150, "balanced": 300, "faithful": 300}  # lengths.STYLE_SHARES of 300
    found = {style: extractive.summarize(text, targets[style], style) for style in extractive.STYLES}
    assert len(set(found.values())) == 3
    for style, summary in found.items():
        assert tokens.exact_tokens(summary) <= targets[style]
    lines = {style: summary.splitlines() for style, summary in found.items()}
    assert len(lines["faithful"]) < len(lines["balanced"])  # whole messages: fewer, longer lines


def test_aggressive_keeps_only_sentences_that_carry_a_fact() -> None:
    summary = extractive.summarize(_transcript(120), 200, "aggressive")
    for line in summary.splitlines():
        for sentence in extractive.sentences(_said(line)):
            words = set(re.findall(r"\w+", sentence.lower()))
            has_name = any(word[:1].isupper() for word in sentence.split()[1:])
            has_number = any(ch.isdigit() for ch in sentence)
            dated = bool(words & extractive._DATE_WORDS)
            assert has_name or has_number or dated or extractive._DECISION.search(sentence), sentence


def test_the_summariser_picks_fact_sentences_from_the_whole_chat_not_a_prefix() -> None:
    text = _transcript(200)
    summary = extractive.summarize(text, 250)
    assert summary == extractive.summarize(text, 250)  # deterministic
    sources = [m["content"] for m in _locomo_messages(200)]
    positions = [_source_of(line, sources) for line in summary.splitlines()]
    assert max(positions) >= 60
    assert positions != list(range(len(positions)))


def test_an_unknown_style_is_refused() -> None:
    with pytest.raises(ValueError, match="style"):
        extractive.summarize("One. Two.", 10, "terse")


async def test_the_offline_provider_follows_the_style_a_summary_prompt_names() -> None:
    llm = OfflineLLM("test")
    answers = []
    for style in ("aggressive", "faithful"):
        prompt = prompts.build_summary_prompt(_transcript(120), style=style, max_summary_tokens=300)
        system, user = prompt.split("\n<compression_input>\n", 1)
        assert prompts.style_of(system) == style
        request = LLMRequest(
            model="offline",
            messages=[("user", "<compression_input>\n" + user)],
            system=system,
            max_output_tokens=300,
            purpose="summary",
        )
        answers.append((await llm.generate(request)).text)
    assert answers[0] != answers[1]
    assert prompts.style_of("Summarise this.") is None


# -- the summary's target in the fitted request ----------------------------------------------------


def test_the_fitted_request_asks_for_a_share_of_the_covered_turns() -> None:
    planned = _locomo_messages(60)
    hashes = tuple(f"{i:064x}" for i in range(1, len(planned) + 1))
    plan = planning.SummaryPlan(
        head_count=0, start=0, stop=len(planned), positions=tuple(range(len(planned))),
        invariants=hashes, hashes=hashes, previous=None,
    )  # fmt: skip
    window = budgets.SummaryWindow(100_000, 16_384, "test")
    fitted = fitting.fit_summary_input(
        plan, planned, window=window, max_share=0.25, covered_before_tokens=4000
    )
    covered = 4000 + sum(msgs.message_tokens(m) for m in planned)
    assert fitted.max_output_tokens == int(0.25 * covered)
    assert f"stay under {fitted.max_output_tokens} tokens" in fitted.prompt
    assert fitting.fit_summary_input(plan, planned, window=window).max_output_tokens == 16_384


# -- the assembly and the room ---------------------------------------------------------------------


def test_a_summary_that_costs_as_much_as_its_turns_is_not_used() -> None:
    items = [{"role": "system", "content": "Be brief."}, *_locomo_messages(12)]
    turns = msgs.conversation_turns(items)
    replaced = sum(msgs.message_tokens(m) for m in items[2:9])
    long_text = " ".join(["Gina opened a dance studio."] * (replaced // 5))
    policy = AssemblyPolicy(keep_first=1, keep_last=4)
    too_long = assemble(items, policy=policy, summary=StoredSummary(turns.hashes[7], 8, long_text, 1))
    assert too_long.refused_summary
    assert not too_long.summary_injected
    assert list(too_long.messages) == items
    short = assemble(
        items, policy=policy, summary=StoredSummary(turns.hashes[7], 8, "Gina opened a studio.", 1)
    )
    assert short.summary_injected
    assert not short.refused_summary
    assert short.tokens_after < short.tokens_before


def test_the_room_is_what_the_assembly_freed_within_the_ceiling() -> None:
    assert allowance.room(1000, 1000, None) == 0
    assert allowance.room(1000, 400, None) == 600 - allowance.MARGIN
    assert allowance.room(1000, 400, 500) == 100 - allowance.MARGIN
    assert allowance.room(1000, 995, None) == 0
    body = {"messages": [], "metadata": {"chat_id": "c1"}}
    given = allowance.with_room(body, 42)
    assert allowance.room_of(given) == 42
    assert body == {"messages": [], "metadata": {"chat_id": "c1"}}
    assert allowance.room_of(body) is None
    assert allowance.room_of({"metadata": {allowance.ROOM_KEY: "9"}}) is None
    assert allowance.room_of({"metadata": {allowance.ROOM_KEY: True}}) is None
