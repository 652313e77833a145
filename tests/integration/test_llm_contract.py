"""One contract every LLM adapter passes (Gemini and OpenAI-compatible over HTTP, offline in-process)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fakes import llm_samples
from fakes.gemini_server import FakeGemini
from fakes.live_server import LiveServer
from fakes.openai_server import FakeOpenAI
from prometheus_client import REGISTRY

from echo.adapters.llm.gemini import GeminiLLM
from echo.adapters.llm.offline import OfflineLLM
from echo.adapters.llm.openai_compatible import OpenAICompatibleLLM
from echo.adapters.llm.retries import RetryPolicy
from echo.domain.memory import distillation
from echo.domain.memory.distillation import DISTILLATION_SCHEMA as DISTILLATION
from echo.ports.llm import LLM, LLMRequest, LLMResult

pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")

MEMORY = {
    "worth_remembering": True,
    "memories": [
        {
            "fact": "Ana prefers tea.",
            "memory_importance": 3,
            "memory_id": "ana_tea",
            "tags": ["ana", "tea", "drinks"],
        }
    ],
}
CONVERSATION = "user: I always drink green tea in the morning.\nassistant: Noted, green tea every morning."
# the distillation job's window (``cleaning.render``) and its prompt
WINDOW = "User: I always drink green tea in the morning.\n\nAssistant: Noted, green tea every morning."


@dataclass
class Adapter:
    llm: LLM
    script_text: Callable[[str], None]
    script_json: Callable[[Any], None]


@pytest.fixture(scope="module")
def gemini_server() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture(scope="module")
def openai_server() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with LiveServer(fake.app, name="fake-openai") as server:
        yield fake, server.url


@pytest.fixture(params=["gemini", "openai", "offline"])
async def adapter(
    request: pytest.FixtureRequest, gemini_server: FakeGemini, openai_server: tuple[FakeOpenAI, str]
) -> AsyncIterator[Adapter]:
    policy = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02)
    if request.param == "gemini":
        gemini_server.reset()
        made = Adapter(
            GeminiLLM("k", base_url=gemini_server.base_url, timeout_s=5, policy=policy),
            lambda text: gemini_server.reply_text(text, usage=(10, 5)),
            lambda obj: gemini_server.reply_json(obj, usage=(10, 5)),
        )
    elif request.param == "openai":
        fake, url = openai_server
        fake.reset()
        made = Adapter(
            OpenAICompatibleLLM(url, timeout_s=5, policy=policy),
            lambda text: fake.reply_text(text, usage=(10, 5)),
            lambda obj: fake.reply_json(obj, usage=(10, 5)),
        )
    else:
        made = Adapter(OfflineLLM("contract tests"), lambda text: None, lambda obj: None)
    yield made
    await made.llm.aclose()


def req(**fields: Any) -> LLMRequest:
    return llm_samples.request("gemini-2.5-flash", CONVERSATION, **{"purpose": "contract", **fields})


async def test_a_text_request_gets_a_text_result(adapter: Adapter) -> None:
    adapter.script_text("Green tea every morning.")
    result = await adapter.llm.generate(req(system="Summarise the conversation."))
    assert isinstance(result, LLMResult)
    assert result.text.strip()
    assert result.parsed is None
    assert result.provider == adapter.llm.provider_name
    assert result.finish_reason == "stop"
    assert result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens > 0
    assert result.degraded is (result.provider == "offline")


async def test_a_json_request_gets_a_parsed_object_of_the_schema(adapter: Adapter) -> None:
    adapter.script_json(MEMORY)
    system, prompt = distillation.distillation_prompt(WINDOW)
    made = llm_samples.request(
        "gemini-2.5-flash", prompt, system=system, json_schema=DISTILLATION, purpose="distill"
    )
    answer = (await adapter.llm.generate(made)).parsed
    assert isinstance(answer, dict)
    assert set(DISTILLATION["required"]) <= set(answer)
    assert distillation.validate(answer) == []
    assert answer["worth_remembering"] is True
    assert answer["memories"]
    for memory in answer["memories"]:
        assert isinstance(memory["fact"], str)
        assert memory["fact"]
        assert 1 <= memory["memory_importance"] <= 5
        assert 3 <= len(memory["tags"]) <= 5
        assert memory["memory_id"]


async def test_every_call_is_measured(adapter: Adapter) -> None:
    adapter.script_text("ok")
    made = req(purpose="measured")
    model = "offline" if adapter.llm.provider_name == "offline" else made.model
    labels = {"provider": adapter.llm.provider_name, "model": model, "purpose": "measured"}
    latency = REGISTRY.get_sample_value("echo_llm_latency_seconds_count", labels) or 0.0
    calls = REGISTRY.get_sample_value("echo_llm_calls_total", {**labels, "outcome": "ok"}) or 0.0
    await adapter.llm.generate(made)
    assert REGISTRY.get_sample_value("echo_llm_latency_seconds_count", labels) == latency + 1
    assert REGISTRY.get_sample_value("echo_llm_calls_total", {**labels, "outcome": "ok"}) == calls + 1
