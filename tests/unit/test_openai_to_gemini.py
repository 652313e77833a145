"""OpenAI chat-completions bodies -> Gemini contents and config (pure conversion to plain data)."""

from __future__ import annotations

import base64
import itertools
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain.openai_to_gemini import (
    ContentDict,
    gemini_model_id,
    to_gemini_config,
    to_gemini_contents,
    to_gemini_request,
    to_gemini_tools,
)

PNG = b"\x89PNG\r\n\x1a\nfake-png-bytes"
PNG_URI = "data:image/png;base64," + base64.b64encode(PNG).decode()


def body(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "echo.gemini-2.5-flash", "messages": list(messages), **fields}


def texts(content: ContentDict) -> list[str | None]:
    return [p.get("text") for p in content["parts"]]


@pytest.mark.parametrize(
    ("pipe", "expected"),
    [
        ("echo.gemini-2.5-flash", "gemini-2.5-flash"),
        ("gemini-2.5-pro", "gemini-2.5-pro"),
        ("echo.echo.x", "echo.x"),
    ],
)
def test_gemini_model_id_strips_the_prefix_once(pipe: str, expected: str) -> None:
    assert gemini_model_id(pipe) == expected


def test_plain_conversation_maps_roles_and_keeps_order() -> None:
    contents, config = to_gemini_request(
        body(
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "How are you?"},
        )
    )
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert [texts(c) for c in contents] == [["Hi"], ["Hello!"], ["How are you?"]]
    assert "system_instruction" not in config


def test_system_and_developer_messages_are_joined_into_the_system_instruction() -> None:
    contents, config = to_gemini_request(
        body(
            {"role": "system", "content": "You are ECHO."},
            {"role": "user", "content": "Hi"},
            {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
            {"role": "user", "content": "Bonjour"},
        )
    )
    assert config["system_instruction"] == "You are ECHO.\n\nAnswer in French."
    assert len(contents) == 1
    assert texts(contents[0]) == ["Hi", "Bonjour"]


def test_consecutive_messages_of_one_role_are_merged() -> None:
    contents, _ = to_gemini_contents(
        [
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "c"},
            {"role": "assistant", "content": "d"},
            {"role": "user", "content": "e"},
        ]
    )
    assert [(c["role"], texts(c)) for c in contents] == [
        ("user", ["a", "b"]),
        ("model", ["c", "d"]),
        ("user", ["e"]),
    ]


def test_multipart_order_text_image_text_is_preserved() -> None:
    contents, _ = to_gemini_contents(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "before"},
                    {"type": "image_url", "image_url": {"url": PNG_URI}},
                    {"type": "text", "text": "after"},
                ],
            }
        ]
    )
    parts = contents[0]["parts"]
    assert [p.get("text") for p in parts] == ["before", None, "after"]
    assert parts[1] == {"inline_data": {"mime_type": "image/png", "data": PNG}}


def test_remote_image_urls_become_text_and_unknown_parts_are_ignored() -> None:
    contents, _ = to_gemini_contents(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                    {"type": "text"},
                    "not-a-dict-part-is-text",
                    42,
                    {"type": "text", "text": "what is it?"},
                ],
            }
        ]
    )
    assert texts(contents[0]) == [
        "[image: https://example.com/cat.jpg]",
        "not-a-dict-part-is-text",
        "what is it?",
    ]


def test_percent_encoded_data_uri_is_decoded() -> None:
    contents, _ = to_gemini_contents(
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/svg+xml,%3Csvg%2F%3E"}}],
            }
        ]
    )
    assert contents[0]["parts"] == [{"inline_data": {"mime_type": "image/svg+xml", "data": b"<svg/>"}}]


TOOL_TURN = [
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris","days":2}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18°C"},
    {"role": "user", "content": "thanks"},
]


def test_tool_calls_and_results_become_function_parts() -> None:
    contents, _ = to_gemini_contents(TOOL_TURN)
    assert contents == [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {
            "role": "model",
            "parts": [{"function_call": {"name": "get_weather", "args": {"city": "Paris", "days": 2}}}],
        },
        {
            "role": "user",
            "parts": [
                {"function_response": {"name": "get_weather", "response": {"result": "18°C"}}},
                {"text": "thanks"},
            ],
        },
    ]


def test_restored_contents_stand_in_for_their_message() -> None:
    restored = [
        {
            "role": "model",
            "parts": [
                {
                    "function_call": {"name": "get_weather", "args": {"days": 2, "city": "Paris"}},
                    "thought_signature": b"sig",
                }
            ],
        }
    ]
    contents, _ = to_gemini_contents(TOOL_TURN, restored={1: restored})
    assert contents[1] == restored[0]
    assert list(contents[1]["parts"][0]["function_call"]["args"]) == ["days", "city"]  # Gemini's order kept
    assert contents[2]["parts"][0]["function_response"]["name"] == "get_weather"


def test_tool_arguments_that_are_not_json_name_the_field() -> None:
    broken = [dict(m) for m in TOOL_TURN]
    broken[1] = {**broken[1], "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{nope"}}]}
    with pytest.raises(ValueError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.arguments"):
        to_gemini_contents(broken)


def test_openai_tools_become_function_declarations() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": " Weather. ",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        },
        {"type": "function", "function": {"name": "now"}},
        {"type": "retrieval"},
    ]
    assert to_gemini_tools(tools) == [
        {
            "name": "get_weather",
            "description": "Weather.",
            "parameters_json_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"name": "now"},
    ]
    assert to_gemini_tools(None) == []
    with pytest.raises(ValueError, match=r"tools\[0\]\.function\.name"):
        to_gemini_tools([{"type": "function", "function": {}}])
    with pytest.raises(ValueError, match="tools: expected a list"):
        to_gemini_tools({"a": 1})
    with pytest.raises(ValueError, match=r"tools\[0\]\.function\.parameters"):
        to_gemini_tools([{"type": "function", "function": {"name": "x", "parameters": "no"}}])


def test_empty_assistant_messages_are_skipped() -> None:
    contents, _ = to_gemini_contents(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "b"},
        ]
    )
    assert [(c["role"], texts(c)) for c in contents] == [("user", ["a", "b"])]


def test_sampling_fields_map_to_the_config() -> None:
    config = to_gemini_config(
        body(
            {"role": "user", "content": "x"},
            temperature=0.2,
            top_p=0.9,
            max_tokens=100,
            max_completion_tokens=50,
            stop="END",
            seed=7,
        )
    )
    assert config == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 50,
        "stop_sequences": ["END"],
        "seed": 7,
    }
    plain = to_gemini_config({"max_tokens": 10, "stop": ["a", "b"], "temperature": 1})
    assert plain == {"max_output_tokens": 10, "stop_sequences": ["a", "b"], "temperature": 1.0}
    assert type(plain["temperature"]) is float
    assert to_gemini_config({}) == {}
    assert to_gemini_config({"stop": []}, system_instruction=None) == {}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"model": "echo.x"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": [{"role": "system", "content": "only system"}]}, "messages"),
        ({"messages": [{"role": "assistant", "content": "no user"}]}, "messages"),
        ({"messages": [{"role": "user", "content": ""}]}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": ["hi"]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}],
                    }
                ]
            },
            "messages[0].content[0].image_url",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": [1]}, "stop"),
    ],
)
def test_malformed_bodies_raise_value_error_naming_the_field(bad: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(field) + ":"):
        to_gemini_request(bad)


def test_non_object_body_is_rejected() -> None:
    with pytest.raises(ValueError, match="body"):
        to_gemini_request(["not", "a", "dict"])  # type: ignore[arg-type]


_messages = st.lists(
    st.tuples(st.sampled_from(["system", "user", "assistant"]), st.text(min_size=1, max_size=8)), max_size=12
).map(lambda ms: [{"role": "user", "content": "first"}] + [{"role": r, "content": t} for r, t in ms])


@given(_messages)
def test_merging_alternates_roles_and_keeps_every_text_in_order(messages: list[dict[str, Any]]) -> None:
    contents, system = to_gemini_contents(messages)
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(contents))
    assert [t for c in contents for t in texts(c)] == [
        m["content"] for m in messages if m["role"] != "system"
    ]
    assert system == ("\n\n".join(m["content"] for m in messages if m["role"] == "system") or None)


def test_the_result_is_plain_data_the_sdk_accepts() -> None:
    """The adapter turns the plain result into SDK types (the conversion itself imports no SDK)."""
    from google.genai import types

    from echo.adapters.llm import gemini_chat

    look = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": PNG_URI}]
    request = body(
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": look},
        temperature=0.5,
        stop="END",
        seed=3,
    )
    contents, _ = to_gemini_request(request)
    png = {"inline_data": {"mime_type": "image/png", "data": PNG}}
    assert contents == [{"role": "user", "parts": [{"text": "look"}, png]}]
    model, sdk_contents, sdk_config = gemini_chat.sdk_request(request)
    assert model == "gemini-2.5-flash"
    image = types.Part(inline_data=types.Blob(mime_type="image/png", data=PNG))
    assert sdk_contents == [types.Content(role="user", parts=[types.Part(text="look"), image])]
    assert sdk_config == types.GenerateContentConfig(
        system_instruction="Be brief.", temperature=0.5, stop_sequences=["END"], seed=3
    )
    with pytest.raises(ValueError, match=r"^model:"):
        gemini_chat.sdk_request({"messages": [{"role": "user", "content": "x"}]})
