"""An outlet's branch is unfolded and prepared once per request (`costs.prepared_branch`): the filters
of one `POST /hooks/outlet` share the work; another request, or another list, is prepared anew."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from echo.capabilities.compression import costs as compression_costs
from echo.domain import bodies, output_items


def _chat(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for index in range(turns):
        messages.append({"id": f"u{index}", "role": "user", "content": f"question {index}"})
        messages.append({"id": f"a{index}", "role": "assistant", "content": f"answer {index}"})
    return messages


@pytest.fixture
def unfolds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = output_items.unfold_output_items

    def counted(messages: Any) -> Any:
        calls.append(len(messages))
        return real(messages)

    monkeypatch.setattr(output_items, "unfold_output_items", counted)
    return calls


async def test_the_second_filter_of_a_request_reuses_the_first_ones_work(unfolds: list[int]) -> None:
    messages = _chat(3)
    first = await compression_costs.prepared_branch(compression_costs.Costs(), messages, ("c", "u", "chat"))
    second = await compression_costs.prepared_branch(compression_costs.Costs(), messages, ("m", "u", "chat"))
    assert first is not None
    assert second is not None
    assert second[0] is first[0]
    assert second[1] is first[1]
    assert unfolds == [6]
    assert len(first[1].turns) == 6  # a turn is a message


async def test_another_list_is_prepared_again_even_when_equal(unfolds: list[int]) -> None:
    messages = _chat(2)
    costs = compression_costs.Costs()
    await compression_costs.prepared_branch(costs, messages, None)
    masked = bodies.map_assistant_text({"messages": messages}, lambda text: text.replace("answer", "ANSWER"))
    again = await compression_costs.prepared_branch(costs, masked["messages"], None)
    assert unfolds == [4, 4]
    assert again is not None
    assert again[0][1]["content"] == "ANSWER 0"


async def test_each_request_prepares_its_own_branch(unfolds: list[int]) -> None:
    messages = _chat(2)
    costs = compression_costs.Costs()

    async def request() -> None:  # each request is a task of its own, as the server runs it
        await compression_costs.prepared_branch(costs, messages, None)

    await asyncio.create_task(request())
    await asyncio.create_task(request())
    assert unfolds == [4, 4]


@pytest.mark.parametrize("messages", [[], [{"role": "user", "content": "hi"}, "not a message"]])
async def test_no_branch_without_messages_that_are_objects(messages: list[Any]) -> None:
    assert await compression_costs.prepared_branch(compression_costs.Costs(), messages, None) is None
