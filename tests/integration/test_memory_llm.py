"""Distillation through a model: the real google-genai SDK against the fake Gemini server, behind
`echoctl serve`'s runtime. The response schema, the one repair attempt, the dead letter with the raw
answer, "nothing worth remembering", and a model that is down (the job waits and retries)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.eventually import eventually
from fakes.gemini_server import FakeGemini
from fakes.memory_llm import memory_answer
from fakes.memory_service import MemoryService, memory_service, outlet_body

FACT = {
    "fact": "The user, Léa, is a cellist in the Lyon opera orchestra and is preparing the Elgar concerto.",
    "memory_importance": 4,
    "memory_id": "lea_cellist_elgar",
    "tags": ["music", "career", "lyon"],
}
VALID = {"worth_remembering": True, "memories": [FACT]}
WINDOW = [
    {"id": "s", "role": "system", "content": "You are helpful."},
    {
        "id": "u1",
        "role": "user",
        "content": "I play cello in the Lyon opera orchestra and I am preparing Elgar.",
    },
    {
        "id": "a1",
        "role": "assistant",
        "content": "The Elgar cello concerto in E minor is a great choice for Lyon.",
    },
]


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
async def service(dsn: str, tmp_path: Path, gemini: FakeGemini) -> Any:
    async with memory_service(
        dsn,
        tmp_path,
        valves={"WINDOW_SIZE": 2, "WINDOW_OVERLAP": 0, "DISTILLATION_MODEL": "gemini-2.5-flash"},
        llm_provider="gemini",
        gemini_api_key="fake-key",
        gemini_base_url=gemini.base_url,
        llm_max_retries=0,
    ) as running:
        yield running


def distillations(gemini: FakeGemini) -> list[Any]:
    return [r for r in gemini.requests if "long-term memory" in str(r.body.get("systemInstruction"))]


async def test_the_model_answers_the_schema_and_an_invalid_answer_is_repaired_once(
    service: MemoryService, gemini: FakeGemini
) -> None:
    gemini.reply_json({**VALID, "memories": [{**FACT, "tags": ["only-one"], "memory_importance": 9}]})
    gemini.reply_json(VALID)
    await service.hook("echo_memory", "outlet", outlet_body(WINDOW), "lea")
    await service.drained()
    [memory] = (await service.admin.get("/memories", params={"user_id": "lea"})).json()["data"]
    assert memory["summary"] == FACT["fact"]
    assert (memory["memory_id"], memory["memory_importance"]) == ("lea_cellist_elgar", 4)
    first, repair = distillations(gemini)
    assert first.response_mime_type == "application/json"
    assert set(first.response_schema["properties"]) == {"worth_remembering", "memories"}
    item = first.response_schema["properties"]["memories"]["items"]
    assert set(item["properties"]) == {"fact", "memory_importance", "memory_id", "tags"}
    assert "User: I play cello in the Lyon opera orchestra" in str(first.body["contents"])
    asked = str(repair.body["contents"])
    assert "Your previous answer was invalid" in asked
    assert "memory_importance" in asked
    assert "tags" in asked


async def test_a_second_invalid_answer_dead_letters_the_job_with_the_raw_text(
    service: MemoryService, gemini: FakeGemini
) -> None:
    gemini.reply_text("I would rather not answer in JSON.")
    gemini.reply_json({**VALID, "memories": [{**FACT, "fact": 42}]})
    await service.hook("echo_memory", "outlet", outlet_body(WINDOW), "mia")
    await service.drained()
    [job] = await service.jobs()
    assert job["state"] == "dead"
    assert "invalid distillation after one repair" in job["last_error"]
    assert '"fact": 42' in job["last_error"]
    assert (await service.admin.get("/memories", params={"user_id": "mia"})).json()["total"] == 0


async def test_the_model_may_say_nothing_is_worth_remembering(
    service: MemoryService, gemini: FakeGemini
) -> None:
    gemini.reply_json({"worth_remembering": False, "memories": []})
    await service.hook("echo_memory", "outlet", outlet_body(WINDOW), "noa")
    await service.drained()
    assert (await service.admin.get("/memories", params={"user_id": "noa"})).json()["total"] == 0
    [outcome] = await service.store.fetch("SELECT outcome, reason FROM memory_windows WHERE user_id = 'noa'")
    assert (outcome["outcome"], outcome["reason"]) == ("discarded", "model")


async def test_a_model_that_is_down_leaves_the_job_queued_and_a_retry_succeeds(
    service: MemoryService, gemini: FakeGemini
) -> None:
    gemini.reply_error(500, "internal error")
    gemini.responder = memory_answer
    await service.hook("echo_memory", "outlet", outlet_body(WINDOW), "omar")

    async def retried() -> bool:
        jobs = await service.jobs()
        return bool(jobs) and jobs[0]["attempts"] >= 1 and jobs[0]["last_error"] is not None

    await eventually(retried, within=30, what="a failed first attempt")
    await service.drained(within=30)  # the queue's backoff, then the model answers
    [job] = await service.jobs()
    assert (job["state"], job["attempts"]) == ("done", 2)
    [memory] = (await service.admin.get("/memories", params={"user_id": "omar"})).json()["data"]
    assert "Elgar" in memory["summary"]


async def test_a_similar_window_is_merged_by_the_model_keeping_both(
    dsn: str, tmp_path: Path, gemini: FakeGemini
) -> None:
    gemini.responder = memory_answer
    valves = {
        "WINDOW_SIZE": 2,
        "WINDOW_OVERLAP": 0,
        "SIMILARITY_THRESHOLD": 0.2,
        "EXACT_MATCH_THRESHOLD": 0.999,
    }
    async with memory_service(
        dsn, tmp_path, valves=valves, llm_provider="gemini", gemini_api_key="k",
        gemini_base_url=gemini.base_url, llm_max_retries=0,
    ) as service:  # fmt: skip
        await service.hook("echo_memory", "outlet", outlet_body(WINDOW), "pam")
        await service.drained()
        later = [
            *WINDOW,
            {
                "id": "u2",
                "role": "user",
                "content": "The Lyon opera orchestra tours Japan in May with the Elgar.",
            },
            {
                "id": "a2",
                "role": "assistant",
                "content": "A Japan tour in May with the Elgar concerto: wonderful.",
            },
        ]
        await service.hook("echo_memory", "outlet", outlet_body(later), "pam")
        await service.drained()
        [memory] = (await service.admin.get("/memories", params={"user_id": "pam"})).json()["data"]
    merges = [r for r in gemini.requests if "Merge the two memories" in str(r.body.get("systemInstruction"))]
    assert len(merges) == 1
    assert "<old_memory>" in str(merges[0].body["contents"])
    assert memory["version"] == 2
    assert "cello in the Lyon opera orchestra" in memory["summary"]
    assert "tours Japan in May" in memory["summary"]
