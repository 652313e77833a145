"""The replay driver's waits and measures, with an in-memory queue."""

from __future__ import annotations

from typing import Any

from echo.capabilities import registry
from echo.config import valves as valves_module
from echo.domain import jobs as domain
from echo.domain import transcripts
from echo.domain.compression import fence
from echo.entrypoints.replay import driver
from echo.queue import queue


class Depths:
    """A queue that answers `depths()` from a script, one answer per call (the last one repeats)."""

    def __init__(self, *answers: list[queue.Depth]) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def depths(self) -> list[queue.Depth]:
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def depth(state: domain.JobState, jobs: int, ready: int) -> queue.Depth:
    return queue.Depth("summary", state, jobs, ready)


async def test_the_drain_waits_for_ready_and_running_jobs_only() -> None:
    busy = [depth(domain.JobState.PENDING, 1, 1), depth(domain.JobState.RUNNING, 0, 0)]
    running = [depth(domain.JobState.PENDING, 0, 0), depth(domain.JobState.RUNNING, 1, 0)]
    later = [depth(domain.JobState.PENDING, 2, 0), depth(domain.JobState.DEAD, 3, 3)]  # a retry, the dead
    jobs: Any = Depths(busy, running, later)
    assert await driver.QueueDrain(jobs, within=5, poll=0.001)() is True
    assert jobs.calls == 3


async def test_the_drain_gives_up_after_its_time() -> None:
    jobs: Any = Depths([depth(domain.JobState.RUNNING, 1, 0)])
    assert await driver.QueueDrain(jobs, within=0.02, poll=0.005)() is False
    assert jobs.calls >= 2


def test_what_a_summary_stands_for_is_read_from_its_fence() -> None:
    injected = fence.summary_message("what was said", locale="en-US", covered_count=42)
    messages = [{"role": "system", "content": "Be brief."}, injected, {"role": "user", "content": "next?"}]
    assert driver.summary_covers(messages) == 42
    assert driver.summary_covers(messages[::2]) == 0
    assert driver.tokens_of(messages) > driver.tokens_of(messages[::2]) > 0


async def test_without_a_store_the_replay_fits_the_budget_and_the_probe_follows_the_whole_chat() -> None:
    filters = registry.build_filters((), lambda counts: None)  # no store: the inlet trims, no summary
    valves = {
        "echo_compression": driver.compression_valves(
            valves_module.CompressionValves(), threshold=200, max_context=400, keep_last=2
        )
    }
    replayer = driver.Replayer(list(filters.filters.values()), valves.get, user={"id": "u1"})
    said = [
        transcripts.Message(f"m{i}", "user" if i % 2 == 0 else "assistant", f"message {i} " * 20)
        for i in range(30)
    ]
    chat = transcripts.Transcript("c", "Chat", "locomo", None, "Be brief.", transcripts.exchanges_of(said))
    seen: list[int] = []
    replayed = await replayer.replay(chat, on_turn=lambda turn: seen.append(turn.number))
    assert seen == list(range(1, 16))
    last = replayed.turns[-1]
    assert last.tokens_after <= 400 < last.tokens_before
    assert (last.summary_covers, replayed.first_summary) == (0, None)
    assert (replayed.threshold, replayed.max_context) == (200, 400)
    assert replayed.final[0] == {"role": "system", "content": "Be brief."}
    probe = await replayer.probe(chat, "and now?")
    assert probe[-1]["role"] == "user"
    assert probe[-1]["content"].startswith("<environnement_contexte>")  # echo_context's AEC block
    assert probe[-1]["content"].endswith("</environnement_contexte>\n\nand now?")
    assert driver.tokens_of(probe) <= 400
