"""Unit tests for echo.domain.compression.trimming: tool-output placeholders and structure-aware folding."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from echo.domain.compression.groups import turn_groups
from echo.domain.compression.messages import conversation_turns
from echo.domain.compression.trimming import fold_message, fold_text, tool_output_trims


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "web", "arguments": "{}"}}


def _trims(items: list[dict[str, Any]], threshold: int, before: int, locale: str = "en-US") -> dict[int, Any]:
    positions = conversation_turns(items).positions
    return tool_output_trims(
        items,
        positions,
        turn_groups(items, positions),
        threshold_chars=threshold,
        before_turn=before,
        locale=locale,
    )


def test_a_group_over_the_threshold_has_each_result_replaced_by_its_size() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [_call("a"), _call("b"), _call("c")]},
        {"role": "tool", "tool_call_id": "a", "content": "x" * 400, "name": "web"},
        {"role": "tool", "tool_call_id": "b", "content": "y" * 300},
        {"role": "tool", "tool_call_id": "c", "content": "tiny"},
        {"role": "user", "content": "next"},
    ]
    trims = _trims(items, threshold=600, before=5)
    assert sorted(trims) == [2, 3]
    assert trims[2] == {
        "role": "tool",
        "tool_call_id": "a",
        "content": "[tool output trimmed: 400 characters]",
        "name": "web",
    }
    assert trims[3]["content"] == "[tool output trimmed: 300 characters]"
    assert items[2]["content"] == "x" * 400  # the request itself is not modified
    assert _trims(items, threshold=705, before=5) == {}
    assert _trims(items, threshold=600, before=4) == {}  # the current turn's results stay
    assert _trims(items, threshold=600, before=5, locale="ko-KR")[2]["content"] == "[도구 출력 생략: 400자]"


def test_details_blocks_of_non_native_tool_calls_are_trimmed_in_place() -> None:
    block = (
        '<details type="tool_calls" done="true" id="t1" name="web" arguments="{}" result="{}">\n'
        "Done\n</details>"
    )
    long_result = block.replace('result="{}"', 'result="' + "z" * 700 + '"')
    short_result = block
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": f"Looking.\n{long_result}\n{short_result}\nAnswer."},
        {"role": "user", "content": "next"},
    ]
    trimmed = _trims(items, threshold=600, before=2)[1]["content"]
    assert 'result="[tool output trimmed: 700 characters]"' in trimmed
    assert 'result="{}"' in trimmed
    assert trimmed.startswith("Looking.\n<details")
    assert trimmed.endswith("</details>\nAnswer.")
    assert _trims(items, threshold=800, before=2) == {}


def test_fold_keeps_the_skeleton() -> None:
    lines = ["# Title", "intro"] + [f"body {i}" for i in range(40)] + ["## Section"]
    lines += (
        [f"more {i}" for i in range(40)] + ["```python", "code()", "```"] + [f"tail {i}" for i in range(10)]
    )
    folded = fold_text("\n".join(lines))
    assert folded is not None
    kept = folded.split("\n")
    assert kept[:5] == ["# Title", "intro", "body 0", "body 1", "body 2"]
    assert "## Section" in kept
    assert kept.count("```python") == 1
    assert kept.count("```") == 1
    assert kept[-5:] == [f"tail {i}" for i in range(5, 10)]
    assert "[… 37 lines collapsed …]" in kept
    assert fold_text("\n".join(lines), locale="fr-FR") is not None
    assert "lignes repliées" in str(fold_text("\n".join(lines), locale="fr-FR"))


def test_fold_shortens_very_long_lines_and_fails_when_it_does_not_pay() -> None:
    single = "a" * 3000 + "b" * 3000
    folded = fold_text(single)
    assert folded is not None
    assert folded.startswith("a" * 200)
    assert folded.endswith("b" * 200)
    assert " … " in folded
    assert fold_text("short\ntext") is None
    assert fold_text("\n".join(f"# heading {i}" for i in range(30))) is None  # all skeleton


@given(st.text(max_size=3000))
def test_a_fold_is_shorter_or_nothing(text: str) -> None:
    folded = fold_text(text)
    assert folded is None or len(folded) < len(text)


def test_fold_message_shapes() -> None:
    long_text = "\n".join(f"line {i}" for i in range(300))
    message = {"role": "user", "content": long_text, "id": "m1"}
    folded = fold_message(message, threshold_chars=100, locale="en-US")
    assert folded is not None
    assert folded["id"] == "m1"
    assert len(folded["content"]) < len(long_text)
    assert fold_message(message, threshold_chars=len(long_text), locale="en-US") is None
    image = {"type": "image_url", "image_url": {"url": "data:x"}}
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": long_text}, image, {"type": "text", "text": "q"}],
    }
    folded_parts = fold_message(parts, threshold_chars=100, locale="en-US")
    assert folded_parts is not None
    assert folded_parts["content"][1] is image
    assert folded_parts["content"][2] == {"type": "text", "text": "q"}
    assert fold_message({"role": "user", "content": [image]}, threshold_chars=1, locale="en-US") is None
    assert fold_message({"role": "user", "content": None}, threshold_chars=1, locale="en-US") is None
