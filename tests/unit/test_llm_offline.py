"""The offline provider: deterministic, no network, schema-shaped JSON, and loud about being degraded."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fakes.llm_samples import DISTILLATION_SCHEMA as DISTILLATION
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from echo.adapters.llm.offline import OfflineLLM, fill_schema
from echo.domain import extractive, tokens
from echo.domain.memory import cleaning, distillation
from echo.ports.llm import LLMRequest

CONVERSATION = """user: I am migrating the billing service from MySQL to PostgreSQL this quarter.
assistant: Good plan. The billing service should keep its invoices table partitioned by month.
user: The PostgreSQL cluster runs version 16 and the billing invoices must never be deleted.
assistant: Then the migration needs a logical replication step for the billing invoices.
user: Thanks, ok.
assistant: You are welcome.
user: Remember that the migration deadline is the end of June, it is critical for the billing team.
"""
# CONVERSATION as the distillation job hands a window over (``cleaning.render``: ``User: …`` paragraphs)
WINDOW = cleaning.render(
    [
        cleaning.CleanMessage(role, text)
        for role, text in (line.split(": ", 1) for line in CONVERSATION.splitlines())
    ]
)


def request(text: str = CONVERSATION, **fields: Any) -> LLMRequest:
    return LLMRequest(model="gemini-2.5-flash", messages=[("user", text)], **fields)


@pytest.fixture(scope="module")
def llm() -> OfflineLLM:
    return OfflineLLM("tests")


def offline_count(purpose: str) -> float:
    return REGISTRY.get_sample_value("echo_llm_offline_total", {"purpose": purpose}) or 0.0


async def test_it_is_deterministic(llm: OfflineLLM) -> None:
    for fields in ({}, {"json_schema": DISTILLATION}, {"max_output_tokens": 30}):
        first, second = await llm.generate(request(**fields)), await llm.generate(request(**fields))
        assert first == second
        assert first.text == (await OfflineLLM("another").generate(request(**fields))).text


async def test_results_say_they_are_offline(llm: OfflineLLM) -> None:
    result = await llm.generate(request(purpose="summary"))
    assert (result.provider, result.model, result.degraded, result.finish_reason) == (
        "offline",
        "offline",
        True,
        "stop",
    )
    assert result.parsed is None
    assert result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens > 0
    assert llm.provider_name == "offline"


async def test_a_warning_is_logged_once_with_the_reason_and_each_call_is_counted() -> None:
    with capture_logs() as logs:
        llm = OfflineLLM("no Gemini API key")
        before = offline_count("merge")
        await llm.generate(request(purpose="merge"))
        await llm.generate(request(purpose="merge"))
    warnings = [entry for entry in logs if entry["event"] == "llm_offline"]
    assert len(warnings) == 1
    assert warnings[0]["log_level"] == "warning"
    assert warnings[0]["reason"] == "no Gemini API key"
    assert offline_count("merge") == before + 2


async def test_a_short_input_is_its_own_summary(llm: OfflineLLM) -> None:
    result = await llm.generate(request("One sentence. Another one."))
    assert result.text == "One sentence. Another one."


async def test_the_summary_keeps_informative_sentences_in_order_within_the_budget(llm: OfflineLLM) -> None:
    result = await llm.generate(request(max_output_tokens=40))
    assert tokens.exact_tokens(result.text) <= 40
    assert "billing" in result.text
    assert "Thanks, ok." not in result.text
    assert "You are welcome." not in result.text
    lines = result.text.splitlines()
    assert all(line.startswith(("user: ", "assistant: ")) for line in lines)  # who said it
    kept = [s for line in lines for s in extractive.sentences(line.split(": ", 1)[1])]
    positions = [CONVERSATION.index(sentence) for sentence in kept]
    assert positions == sorted(positions)
    assert len(kept) >= 1


async def test_a_budget_smaller_than_any_sentence_cuts_the_best_one(llm: OfflineLLM) -> None:
    result = await llm.generate(request(max_output_tokens=3))
    assert tokens.exact_tokens(result.text) <= 3
    assert extractive.size(result.text.rstrip("…")) >= 1
    assert result.text.endswith("…")


async def test_distillation_json_has_the_seed_shape(llm: OfflineLLM) -> None:
    """The distillation answer (issue 20): one memory per fact, each with the seed's fields."""
    system, prompt = distillation.distillation_prompt(WINDOW)
    made = request(prompt, system=system, json_schema=distillation.DISTILLATION_SCHEMA, purpose="distill")
    answer = (await llm.generate(made)).parsed
    assert set(answer) == {"worth_remembering", "memories"}
    assert answer["worth_remembering"] is True
    assert distillation.validate(answer) == []
    memories = answer["memories"]
    assert 1 <= len(memories) <= distillation.MAX_FACTS
    facts = [memory["fact"] for memory in memories]
    assert all(fact.startswith("User: ") for fact in facts)  # who said it; the assistant's advice is left out
    assert not any("Thanks" in fact or "welcome" in fact or "partitioned" in fact for fact in facts)
    positions = [WINDOW.index(fact.removeprefix("User: ")) for fact in facts]
    assert positions == sorted(positions)  # in the window's order
    assert any("version 16" in fact for fact in facts)
    for memory in memories:
        assert set(memory) == {"fact", "memory_importance", "memory_id", "tags"}
        assert len(memory["fact"].split()) <= distillation.MAX_FACT_WORDS
        assert tokens.estimate_tokens(memory["fact"]) <= distillation.MAX_MEMORY_TOKENS
        assert isinstance(memory["memory_importance"], int)
        assert 1 <= memory["memory_importance"] <= 5
        assert re.fullmatch(r"[a-z0-9_]{3,48}", memory["memory_id"])
        assert all(word in memory["fact"].lower() for word in memory["memory_id"].split("_")[:-1])
        assert 3 <= len(memory["tags"]) <= 5
        assert all(isinstance(t, str) and t for t in memory["tags"])
    assert len({memory["memory_id"] for memory in memories}) == len(memories)
    critical = next(memory for memory in memories if "critical" in memory["fact"])
    assert critical["memory_importance"] == max(memory["memory_importance"] for memory in memories)


async def test_importance_follows_cues(llm: OfflineLLM) -> None:
    bland = "We chatted about the weather in the park and the colour of the sky. " * 4
    critical = (
        "My name is Ana. Remember: I am allergic to peanuts, it is critical and important, never forget it. "
        * 2
    )
    low = (await llm.generate(request(bland, json_schema=DISTILLATION))).parsed["memory_importance"]
    high = (await llm.generate(request(critical, json_schema=DISTILLATION))).parsed["memory_importance"]
    tiny = (await llm.generate(request("ok", json_schema=DISTILLATION))).parsed["memory_importance"]
    assert (tiny, low, high) == (1, 2, 5)


async def test_cjk_text_gets_bigram_tags_padded_to_three(llm: OfflineLLM) -> None:
    text = "我喜欢喝茶。明天我要去北京开会。会议很重要。北京的会议在上午。"
    memory = (await llm.generate(request(text, json_schema=DISTILLATION))).parsed
    assert memory["tags"][:2] == ["北京", "会议"]
    assert len(memory["tags"]) == 3
    assert memory["summary"]
    assert memory["memory_id"].startswith("memory_")


def test_generic_schemas_are_filled_by_type() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["fact", "preference"]},
            "language": {"type": "string", "default": "fr"},
            "confident": {"type": "boolean"},
            "score": {"type": "number", "minimum": 0.5},
            "count": {"type": "integer"},
            "note": {"type": ["string", "null"]},
            "title": {"type": "string", "maxLength": 8},
            "details": {"properties": {"id": {"type": "string"}, "text": {"type": "string", "maxLength": 5}}},
            "items": {"type": "array", "items": {"type": "integer", "minimum": 2}, "minItems": 2},
            "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "nothing": {"type": "null"},
            "free": {},
        },
    }
    value = fill_schema(schema, CONVERSATION)
    assert value == {
        "kind": "fact",
        "language": "fr",
        "confident": False,
        "score": 0.5,
        "count": 0,
        "note": "",
        "title": value["title"],
        "details": {"id": extractive.slug(CONVERSATION), "text": value["details"]["text"]},
        "items": [2, 2],
        "keywords": ["billing", "invoices"],
        "nothing": None,
        "free": None,
    }
    assert len(value["title"]) <= 8
    assert len(value["details"]["text"]) == 5


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=1, max_size=600), budget=st.integers(min_value=1, max_value=400))
async def test_any_text_gives_a_valid_memory_within_budget(llm: OfflineLLM, text: str, budget: int) -> None:
    memory = (await llm.generate(request(text, json_schema=DISTILLATION, max_output_tokens=budget))).parsed
    assert tokens.exact_tokens(memory["summary"]) <= budget
    assert 1 <= memory["memory_importance"] <= 5
    assert re.fullmatch(r"[a-z0-9_]+_[0-9a-f]{6}", memory["memory_id"])
    assert len(memory["memory_id"]) <= 48
    assert 3 <= len(memory["tags"]) <= 5
    assert len(set(memory["tags"])) == len(memory["tags"])
    result = await llm.generate(request(text, max_output_tokens=budget))
    assert tokens.exact_tokens(result.text) <= budget
    assert result.usage.completion_tokens == tokens.estimate_tokens(result.text)
