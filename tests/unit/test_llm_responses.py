"""Reading answers out of provider responses: every shape of seed 002, reasoning never taken as text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakes.openai_server import completion
from hypothesis import given
from hypothesis import strategies as st

from echo.adapters.llm import errors, responses

SHAPES = ["message", "parts", "responses"]


def gemini(*parts: dict[str, Any], finish: str = "STOP") -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "finishReason": finish}]}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_openai_shape_gives_the_answer_without_reasoning(shape: str) -> None:
    payload = completion("The answer.", shape=shape, reasoning="Let me think step by step.")  # type: ignore[arg-type]
    assert responses.extract_text(payload) == "The answer."


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"choices": [{"message": {"content": "plain", "reasoning_content": "hidden"}}]}, "plain"),
        ({"choices": [{"message": {"content": "x", "reasoning": "r", "thinking": "t"}}]}, "x"),
        (
            {
                "choices": [
                    {
                        "message": {
                            "content": [{"type": "text", "text": "a"}, {"type": "output_text", "text": "b"}]
                        }
                    }
                ]
            },
            "ab",
        ),
        ({"choices": [{"message": {"content": ["raw ", {"text": "untyped"}]}}]}, "raw untyped"),
        (
            {
                "choices": [
                    {
                        "message": {
                            "content": [
                                {"type": "reasoning", "text": "no"},
                                {"type": "thinking", "text": "no"},
                                {"type": "refusal", "refusal": "no"},
                                {"type": "output_text", "text": "yes"},
                            ]
                        }
                    }
                ]
            },
            "yes",
        ),
        ({"choices": [{"delta": {"content": "streamed"}}]}, "streamed"),
        ({"choices": [{"text": "legacy completion"}]}, "legacy completion"),
        ({"choices": [{"message": {"content": "<think>hmm</think>\n\nFinal."}}]}, "Final."),
        (
            {
                "output": [
                    {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "no"}]},
                    {"type": "message", "content": [{"type": "output_text", "text": "one "}]},
                    {"type": "function_call", "name": "f", "arguments": "{}"},
                    {"type": "message", "content": [{"type": "output_text", "text": "two"}]},
                ]
            },
            "one two",
        ),
        ({"output_text": "gateway convenience"}, "gateway convenience"),
        (gemini({"text": "thinking…", "thought": True}, {"text": "Gemini answer"}), "Gemini answer"),
        ({"content": [{"type": "thinking", "thinking": "…"}, {"type": "text", "text": "Claude"}]}, "Claude"),
        ("  a bare string  ", "a bare string"),
    ],
)
def test_answer_text_is_found_in_every_shape(payload: Any, expected: str) -> None:
    assert responses.extract_text(payload) == expected


@pytest.mark.parametrize(
    "payload",
    [
        {"choices": [{"message": {"content": None, "reasoning_content": "I thought a lot " * 20}}]},
        {"choices": [{"message": {"content": "", "thinking": "t"}}], "usage": {"prompt_tokens": 3}},
        {"output": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "only this"}]}]},
        gemini({"text": "a thought", "thought": True}, finish="MAX_TOKENS"),
        {"choices": []},
        {"promptFeedback": {"blockReason": "SAFETY"}},
        {"choices": [{"message": {"content": "<think>only thinking</think>  "}}]},
        None,
        [1, 2],
    ],
)
def test_no_usable_text_is_an_empty_answer_with_the_response_structure(payload: Any) -> None:
    with pytest.raises(errors.EmptyAnswer) as caught:
        responses.extract_text(payload)
    error = caught.value
    assert isinstance(error, errors.LLMError)
    assert not error.retryable
    assert "response structure: " in error.message
    assert json.loads(error.message.split("response structure: ", 1)[1]) == error.shape
    assert error.shape == responses.trim_structure(payload)


def test_empty_answer_report_keeps_keys_and_cuts_long_strings() -> None:
    payload = {
        "choices": [{"message": {"content": "", "reasoning_content": "x" * 5000}, "finish_reason": "length"}]
    }
    with pytest.raises(errors.EmptyAnswer) as caught:
        responses.extract_text(payload)
    message = caught.value.message
    assert "reasoning_content" in message
    assert "finish_reason" in message
    assert '"length"' in message
    assert "(5000 chars)" in message
    assert len(message) < 400


def test_trim_structure_shortens_lists_strings_and_depth() -> None:
    assert responses.trim_structure({"a": list(range(10)), "s": "y" * 100, "n": None, "b": True}) == {
        "a": [0, 1, 2, "… 7 more"],
        "s": "y" * 60 + "… (100 chars)",
        "n": None,
        "b": True,
    }
    deep: Any = "leaf"
    for _ in range(10):
        deep = {"k": deep}
    trimmed = json.dumps(responses.trim_structure(deep))
    assert "<dict>" in trimmed
    assert "leaf" not in trimmed
    assert responses.trim_structure(b"bytes") == "<bytes>"


def test_the_empty_report_is_capped_for_huge_responses() -> None:
    payload = {"choices": [{"message": {"content": ""}}], **{f"key{i}": "v" for i in range(1000)}}
    with pytest.raises(errors.EmptyAnswer) as caught:
        responses.extract_text(payload)
    assert len(caught.value.message) < 2200
    assert caught.value.message.endswith("…")


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '  {"a": 1}\n',
        '```json\n{"a": 1}\n```',
        '```JSON\n{"a": 1}```',
        '```\n{"a": 1}\n```',
        'Here is the JSON you asked for:\n```json\n{"a": 1}\n```\nAnything else?',
        'Sure! {"a": 1} hope this helps',
        'Two candidates {not json} then {"a": 1}',
    ],
)
def test_json_is_read_bare_fenced_or_in_prose(text: str) -> None:
    assert responses.extract_json(text) == {"a": 1}


def test_json_arrays_and_scalars_parse_too() -> None:
    assert responses.extract_json("[1, 2]") == [1, 2]
    assert responses.extract_json("42") == 42


@pytest.mark.parametrize("text", ["", "no json here", '{"a": 1', "```json\n{broken}\n```"])
def test_not_json_is_a_retryable_invalid_json(text: str) -> None:
    with pytest.raises(errors.InvalidJSON) as caught:
        responses.extract_json(text)
    assert caught.value.retryable
    assert caught.value.text == text[:200]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (completion("x", finish_reason="stop"), "stop"),
        (completion("x", finish_reason="length"), "length"),
        ({"choices": [{"finish_reason": "max_tokens"}]}, "length"),
        (completion("x", finish_reason="content_filter"), "content_filter"),
        (completion("x", shape="responses", finish_reason="length"), "length"),
        ({"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}, "content_filter"),
        ({"status": "completed"}, "stop"),
        (None, "stop"),
    ],
)
def test_finish_reason(payload: Any, expected: str) -> None:
    assert responses.finish_reason(payload) == expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (completion("x", usage=(11, 4)), (11, 4)),
        (completion("x", shape="responses", usage=(11, 4)), (11, 4)),
        ({"usage": {"prompt_tokens": 2.0, "completion_tokens": True}}, (2, 0)),
        ({"usage": None}, (0, 0)),
        ({}, (0, 0)),
    ],
)
def test_usage_tokens(payload: Any, expected: tuple[int, int]) -> None:
    assert responses.usage_tokens(payload) == expected


_TEXT = st.text(st.characters(categories=["L", "N", "Zs", "P"]), min_size=1, max_size=80).filter(
    lambda t: t.strip() and "<" not in t
)


@given(answer=_TEXT, reasoning=_TEXT, shape=st.sampled_from(SHAPES))
def test_reasoning_never_leaks_into_the_answer(answer: str, reasoning: str, shape: str) -> None:
    payload = completion(answer, shape=shape, reasoning="REASONING:" + reasoning)  # type: ignore[arg-type]
    text = responses.extract_text(payload)
    assert text == answer.strip()
    assert "REASONING:" not in text
