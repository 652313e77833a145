"""The LLM port: request validation, the pure request builders of each provider, the factory, the API."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from echo.adapters.llm import (
    calls,
    errors,
    factory,
    gemini,
    gemini_chat,
    offline,
    openai_compatible,
    responses,
    retries,
)
from echo.config.settings import Settings
from echo.domain import extractive, tokens
from echo.domain.memory import distillation
from echo.ports import llm as interface
from echo.ports.llm import LLM, LLMRequest, LLMResult, Usage

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "summary": {"type": "string", "minLength": 1, "examples": ["…"]},
        "memory_importance": {"type": "integer", "minimum": 1, "maximum": 5},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 5},
        "note": {"type": ["string", "null"], "const": "x"},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["summary", "memory_importance", "tags"],
}


def request(**fields: Any) -> LLMRequest:
    base: dict[str, Any] = {"model": "gemini-2.5-flash", "messages": [("user", "Hello")]}
    return LLMRequest(**{**base, **fields})


def test_public_api_is_pinned() -> None:
    assert interface.__all__ == ["LLM", "ROLES", "LLMRequest", "LLMResult", "Media", "Usage"]
    assert errors.__all__ == ["EmptyAnswer", "InvalidJSON", "LLMError"]
    assert responses.__all__ == [
        "extract_json",
        "extract_text",
        "finish_reason",
        "trim_structure",
        "usage_tokens",
    ]
    assert retries.__all__ == [
        "RetryPolicy",
        "backoff_delay",
        "call_with_retries",
        "is_retryable",
        "parse_retry_after",
    ]
    assert factory.__all__ == ["llm_from_settings", "retry_policy"]
    assert calls.__all__ == ["Answer", "generate"]
    assert extractive.__all__ == [
        "STYLES",
        "importance",
        "keywords",
        "sentences",
        "size",
        "slug",
        "summarize",
    ]
    assert gemini.__all__ == ["GeminiLLM", "gemini_schema"]
    assert openai_compatible.__all__ == [
        "ANSWER_TOKENS",
        "JSON_MODES",
        "JsonMode",
        "OpenAICompatibleLLM",
        "chat_body",
        "max_tokens",
    ]
    assert offline.__all__ == ["OfflineLLM", "fill_schema"]
    assert gemini_chat.LLMError is errors.LLMError  # the pipe keeps importing it from gemini_chat


def test_request_normalises_messages_and_is_hashable() -> None:
    made = request(messages=[["user", "a"], ("assistant", "b")], json_schema={"type": "object"})
    assert made.messages == (("user", "a"), ("assistant", "b"))
    assert hash(made) == hash(request(messages=[("user", "a"), ("assistant", "b")]))
    assert made.input_text == "a\n\nb"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"model": ""}, "model"),
        ({"messages": []}, "messages"),
        ({"messages": [("system", "x")]}, r"messages\[0\]"),
        ({"temperature": 2.5}, "temperature"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"json_schema": "object"}, "json_schema"),
        ({"purpose": ""}, "purpose"),
    ],
)
def test_invalid_requests_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field}:"):
        request(**fields)


def test_usage_and_result_values() -> None:
    assert Usage(3, 4).total_tokens == 7
    result = LLMResult(text="x", provider="gemini", model="m")
    assert (result.usage, result.finish_reason, result.parsed, result.degraded) == (
        Usage(),
        "stop",
        None,
        False,
    )


def test_every_provider_implements_the_port() -> None:
    for provider in (gemini.GeminiLLM, openai_compatible.OpenAICompatibleLLM, offline.OfflineLLM):
        assert {"generate", "aclose", "provider_name"} <= set(dir(provider))
    assert isinstance(offline.OfflineLLM("test"), LLM)


def test_gemini_request_is_built_with_roles_system_and_schema() -> None:
    made = request(
        model="echo.gemini-2.5-pro",
        messages=[("user", "q"), ("assistant", "a"), ("user", "q2")],
        system="Summarise.",
        temperature=0.1,
        max_output_tokens=300,
        json_schema=SCHEMA,
    )
    model, contents, config = gemini.GeminiLLM.build(made)
    assert model == "gemini-2.5-pro"
    assert [(c.role, c.parts[0].text) for c in contents] == [("user", "q"), ("model", "a"), ("user", "q2")]  # type: ignore[index]
    assert (config.system_instruction, config.temperature, config.max_output_tokens) == (
        "Summarise.",
        0.1,
        300,
    )
    assert config.response_mime_type == "application/json"
    assert config.response_schema is not None
    _, _, plain = gemini.GeminiLLM.build(request())
    assert (plain.response_mime_type, plain.response_schema, plain.system_instruction) == (None, None, None)


def test_gemini_schema_keeps_what_gemini_accepts() -> None:
    assert gemini.gemini_schema(SCHEMA) == {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "min_length": 1},
            "memory_importance": {"type": "integer", "minimum": 1, "maximum": 5},
            "tags": {"type": "array", "items": {"type": "string"}, "min_items": 3, "max_items": 5},
            "note": {"type": "string", "nullable": True},
            "either": {"any_of": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["summary", "memory_importance", "tags"],
        "property_ordering": ["summary", "memory_importance", "tags", "note", "either"],
    }


def test_openai_body_for_text() -> None:
    assert openai_compatible.chat_body(request(system="Be brief.", max_output_tokens=64)) == {
        "model": "gemini-2.5-flash",
        "stream": False,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
        "temperature": 0.2,
        "max_tokens": 64,
    }


def test_openai_body_in_json_object_mode_carries_the_schema_in_the_system_text() -> None:
    body = openai_compatible.chat_body(request(system="Distil.", json_schema=SCHEMA), "json_object")
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]["content"]
    assert system.startswith("Distil.\n\nAnswer with one JSON object")
    assert json.dumps(SCHEMA) in system
    without_system = openai_compatible.chat_body(request(json_schema=SCHEMA), "json_object")
    assert without_system["messages"][0]["role"] == "system"


def test_openai_body_in_json_schema_mode() -> None:
    body = openai_compatible.chat_body(request(json_schema=SCHEMA, purpose="memory distill"), "json_schema")
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "memory_distill", "schema": SCHEMA},
    }
    assert body["messages"] == [{"role": "user", "content": "Hello"}]
    assert openai_compatible.chat_body(request(json_schema=SCHEMA)) == body | {
        "response_format": {"type": "json_schema", "json_schema": {"name": "other", "schema": SCHEMA}}
    }  # the default form


def test_openai_body_in_json_object_schema_mode_gives_the_schema_to_the_server() -> None:
    body = openai_compatible.chat_body(request(json_schema=SCHEMA, system="Distil."), "json_object_schema")
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert body["messages"][0] == {"role": "system", "content": "Distil."}


def test_json_modes_go_from_the_strongest_form_to_the_plainest() -> None:
    assert openai_compatible.JSON_MODES == ("json_schema", "json_object_schema", "json_object")
    assert typing.get_args(openai_compatible.JsonMode) == openai_compatible.JSON_MODES
    field = Settings.model_fields["openai_json_mode"]
    assert (typing.get_args(field.annotation), field.default) == (openai_compatible.JSON_MODES, "json_schema")


def test_the_distillation_cap_holds_ten_facts_with_their_fields() -> None:
    sentence = "Caroline said on 12 May 2023 that she has applied to three adoption agencies"
    words = sentence.split()
    fact = ""  # the longest fact a valid answer may hold
    while tokens.estimate_tokens(f"{fact} {words[0]}") <= distillation.MAX_MEMORY_TOKENS:
        fact = f"{fact} {words[0]}".strip()
        words = words[1:] + words[:1]
    memory = {
        "fact": fact,
        "memory_importance": 3,
        "memory_id": "caroline_adoption_agency_2023",
        "tags": ["adoption", "family", "plans", "caroline", "agency"],
    }
    longest = {"worth_remembering": True, "memories": [memory] * distillation.MAX_FACTS}
    assert distillation.validate(longest) == []
    pretty = json.dumps(longest, indent=2)
    assert tokens.estimate_tokens(pretty) * 5 // 4 < openai_compatible.ANSWER_TOKENS["distill"] < 2048
    merged = json.dumps({"summary": fact})
    assert tokens.estimate_tokens(merged) * 3 // 2 < openai_compatible.ANSWER_TOKENS["merge"]


@pytest.mark.parametrize(
    ("purpose", "asked", "ceiling", "sent"),
    [
        ("summary", 99, None, 99),  # a summary's own target
        ("summary", 4096, 512, 512),
        ("distill", 2048, None, openai_compatible.ANSWER_TOKENS["distill"]),
        ("distill", 2048, 300, 300),
        ("distill", 200, None, 200),
        ("merge", 2048, None, openai_compatible.ANSWER_TOKENS["merge"]),
        ("map_reduce", 1500, None, 1500),
    ],
)
def test_every_body_carries_a_generation_cap(
    purpose: str, asked: int, ceiling: int | None, sent: int
) -> None:
    made = request(purpose=purpose, max_output_tokens=asked)
    assert openai_compatible.max_tokens(made, ceiling) == sent
    assert openai_compatible.chat_body(made, "json_object", ceiling)["max_tokens"] == sent


def test_the_cap_setting_is_described_with_the_caps() -> None:
    described = Settings.model_fields["openai_max_output_tokens"].description or ""
    for kind in ("distill", "merge"):
        assert f"{openai_compatible.ANSWER_TOKENS[kind]:,}" in described
    with pytest.raises(ValidationError, match="openai_max_output_tokens"):
        Settings(openai_max_output_tokens=0)
    with pytest.raises(ValueError, match=r"^max_output_tokens:"):
        openai_compatible.OpenAICompatibleLLM("http://127.0.0.1:9/v1", max_output_tokens=0)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("GEMINI_API_KEY", "ECHO_GEMINI_API_KEY", "ECHO_LLM_PROVIDER", "ECHO_OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


async def test_factory_is_offline_without_a_key(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    llm = factory.llm_from_settings(Settings(data_dir=tmp_path))
    assert isinstance(llm, offline.OfflineLLM)
    assert "no Gemini API key" in llm.reason
    explicit = factory.llm_from_settings(
        Settings(data_dir=tmp_path, llm_provider="offline", gemini_api_key="k")
    )
    assert isinstance(explicit, offline.OfflineLLM)
    assert explicit.reason == "ECHO_LLM_PROVIDER=offline"


async def test_factory_picks_gemini_with_a_key(env: pytest.MonkeyPatch) -> None:
    env.setenv("GEMINI_API_KEY", "k")
    llm = factory.llm_from_settings(Settings(llm_max_retries=2, llm_retry_max_wait_seconds=5))
    try:
        assert isinstance(llm, gemini.GeminiLLM)
        assert llm.provider_name == "gemini"
        assert llm._policy == retries.RetryPolicy(max_retries=2, max_total_wait_s=5)
    finally:
        await llm.aclose()


async def test_factory_picks_openai_when_asked(env: pytest.MonkeyPatch) -> None:
    env.setenv("ECHO_LLM_PROVIDER", "openai")
    env.setenv("ECHO_OPENAI_BASE_URL", "http://vllm:8000/v1")
    env.setenv("GEMINI_API_KEY", "k")  # the explicit choice wins over the key
    llm = factory.llm_from_settings(Settings())
    try:
        assert isinstance(llm, openai_compatible.OpenAICompatibleLLM)
        assert llm.provider_name == "openai"
    finally:
        await llm.aclose()


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"llm_provider": "openai"}, "openai_base_url"), ({"llm_provider": "gemini"}, "gemini_api_key")],
)
def test_a_provider_without_its_settings_is_refused_at_load(
    env: pytest.MonkeyPatch, fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**fields)


def test_llm_settings_defaults(env: pytest.MonkeyPatch) -> None:
    settings = Settings()
    assert (
        settings.llm_provider,
        settings.llm_model,
        settings.openai_json_mode,
        settings.openai_max_output_tokens,
    ) == ("auto", "gemini-2.5-flash", "json_schema", None)
    assert factory.retry_policy(settings) == retries.RetryPolicy(max_retries=4, max_total_wait_s=60.0)
