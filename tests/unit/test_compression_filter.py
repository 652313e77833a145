"""The `echo_compression` filter without a store, its caches, the summary job's payload; no PostgreSQL."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes.shared_data import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from echo.adapters.store import conversations
from echo.capabilities import base
from echo.capabilities.compression import filter as compression
from echo.capabilities.compression import jobs as compression_jobs
from echo.capabilities.compression import payloads, reporting, summary
from echo.config import valves as valves_module
from echo.domain import bodies, chain, output_items, tokens
from echo.domain.compression import allowance, fence, planning, prompts
from echo.domain.compression import messages as msgs
from echo.errors import ConfigError
from echo.queue import errors

ROLES = st.sampled_from(["user", "assistant", "tool", "system", " User ", "narrator", "function", ""])
CONTENT = st.one_of(
    st.none(),
    st.text(max_size=20),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}),
            st.fixed_dictionaries(
                {
                    "type": st.just("image_url"),
                    "image_url": st.fixed_dictionaries({"url": st.text(max_size=8)}),
                }
            ),
        ),
        max_size=3,
    ),
)
CALLS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["c1", "c2"]),
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["f", "g"]),
                    "arguments": st.sampled_from(['{"a":1}', '{"a": 2}', "x"]),
                }
            ),
        }
    ),
    max_size=2,
)
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES, "content": CONTENT},
    optional={
        "files": st.lists(st.fixed_dictionaries({"id": st.text(max_size=4)}), max_size=2),
        "tool_calls": CALLS,
        "tool_call_id": st.sampled_from(["c1", "c2"]),
    },
)


def ctx(phase: str = "inlet", **valves: Any) -> base.HookContext:
    return base.HookContext(
        filter_id="echo_compression",
        phase=phase,  # type: ignore[arg-type]
        user={"id": "u1"},
        ids=bodies.TurnIds("c1", "u1", None, None, None),
        valves=valves_module.CompressionValves(**valves),
    )


def chat(
    turns: int, words: int = 40, system: str = "You are helpful. Today is Monday."
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for i in range(turns):
        items.append({"role": "user", "content": f"question {i} " + "word " * words})
        items.append({"role": "assistant", "content": f"answer {i} " + "reply " * words})
    return items


@settings(max_examples=200, deadline=None)
@given(st.lists(MESSAGE, max_size=12))
def test_the_cached_chain_is_the_domain_chain(messages: list[dict[str, Any]]) -> None:
    costs = compression.Costs(entries=8)  # small: evictions run too
    for _ in range(2):  # cold, then from the caches
        assert costs.turns(messages, msgs.kinds_of(messages)) == msgs.conversation_turns(messages)


def test_the_cache_tells_apart_one_text_with_other_tool_calls_or_call_ids() -> None:
    def call(arguments: str) -> list[dict[str, Any]]:
        return [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]

    messages = [
        {"role": "assistant", "content": "same"},
        {"role": "assistant", "content": "same", "tool_calls": call('{"q": 1}')},
        {"role": "tool", "content": "same", "tool_call_id": "c1"},
        {"role": "assistant", "content": "same", "tool_calls": call('{"q": 2}')},
        {"role": "tool", "content": "same", "tool_call_id": "c2"},
        {"role": "tool", "content": "same"},
        {"role": "assistant", "content": "same", "tool_calls": call('{ "q" : 1 }')},
    ]
    costs = compression.Costs()
    for _ in range(2):  # cold, then from the caches
        turns = costs.turns(messages, msgs.kinds_of(messages))
        assert turns == msgs.conversation_turns(messages)
        invariants = [link.invariant for link in turns.links]
        assert len(set(invariants[:6])) == 6
        assert invariants[6] == invariants[1]  # the same call, re-serialised


def test_cached_token_counts_are_the_estimates() -> None:
    costs = compression.Costs(entries=2)
    for text in ["a", "hello world", "a", "你好", "x" * 100, "hello world"]:
        assert costs.count(text) == tokens.estimate_tokens(text)


def _fixture_messages(name: str) -> list[dict[str, Any]]:
    import json

    body = json.loads((FIXTURES / "tool_flow" / name).read_text())["body"]
    return list(body.get("body", body)["messages"])


def test_the_outlet_unfolds_tool_calls_into_the_turns_the_next_inlet_sends() -> None:
    outlet = _fixture_messages("008_outlet.json")  # [user, assistant+output, user, assistant+output]
    inlet = _fixture_messages("005_inlet.json")  # [user, assistant(tool_calls), tool, assistant, user]
    unfolded = output_items.unfold_output_items(outlet)
    assert [msgs.role_of(m) for m in unfolded] == [
        "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert unfolded[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert unfolded[2]["tool_call_id"] == "call_stub_1"
    outlet_hashes = msgs.conversation_turns(unfolded).hashes
    inlet_hashes = msgs.conversation_turns(inlet).hashes
    assert outlet_hashes[: len(inlet_hashes)] == inlet_hashes


def test_an_assistant_message_without_tool_calls_is_kept_as_it_is() -> None:
    message = {
        "role": "assistant",
        "content": "hi",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}],
    }
    assert output_items.unfold_output_items([message])[0] is message


def test_the_current_user_files_change_only_the_last_user_turn() -> None:
    items = chat(2)
    merged = compression._with_current_files(items, [{"type": "file", "id": "f1"}])
    assert merged[-2]["files"] == [{"type": "file", "id": "f1"}]
    assert "files" not in items[-2]
    before, after = msgs.conversation_turns(items).hashes, msgs.conversation_turns(merged).hashes
    assert before[:2] == after[:2]
    assert before[2] != after[2]
    assert compression._with_current_files(items, None) is items


async def test_a_short_chat_comes_back_with_the_same_messages_and_no_room_for_additions() -> None:
    flt = compression.CompressionFilter()
    body = {"model": "gpt-4o", "messages": chat(3), "metadata": {"chat_id": "c1"}}
    context = ctx()
    out = await flt.inlet(body, context)
    assert out["messages"] is body["messages"]
    assert out["metadata"] == {"chat_id": "c1", allowance.ROOM_KEY: 0}  # nothing freed: memory adds nothing
    assert body["metadata"] == {"chat_id": "c1"}  # the given body is not changed
    assert context.events == []


async def test_background_tasks_and_bodies_without_messages_pass_untouched() -> None:
    flt = compression.CompressionFilter()
    task = base.HookContext(
        "echo_compression", "inlet", {}, bodies.TurnIds("c1", "u1", None, None, "title_generation"), None
    )
    long = {"messages": chat(200), "model": "gpt-4"}
    assert await flt.inlet(long, task) is long
    for body in ({}, {"messages": []}, {"messages": "nope"}, {"messages": [1, 2]}):
        assert await flt.inlet(body, ctx()) is body  # type: ignore[arg-type]
        assert await flt.outlet(body, ctx("outlet")) is body  # type: ignore[arg-type]


async def test_without_a_store_the_inlet_still_fits_the_budget_and_warns() -> None:
    flt = compression.CompressionFilter()
    body = {"model": "m", "messages": chat(80)}
    context = ctx(compression_threshold_tokens=1000, max_context_tokens=4000, max_summary_tokens=100)
    answer = await flt.inlet(body, context)
    kept = answer["messages"]
    assert kept[0] == body["messages"][0]  # the system message
    assert kept[1] == body["messages"][1]  # keep_first
    assert kept[-1] == body["messages"][-1]
    assert sum(msgs.message_tokens(m) for m in kept) <= 4000
    assert body["messages"] == chat(80)  # the input is never changed
    assert [event.level for event in context.events] == ["warning"]
    assert "Context almost full" in context.events[0].description


@pytest.mark.parametrize(
    ("show", "threshold", "shown"), [(True, 80, False), (True, 40, True), (False, 40, False)]
)
async def test_usage_status_follows_its_valves(show: bool, threshold: int, shown: bool) -> None:
    context = ctx(
        show_token_usage_status=show,
        token_usage_status_threshold=threshold,
        max_context_tokens=1000,  # the chat takes about half of it
        compression_threshold_tokens=900,
        max_summary_tokens=100,
    )
    await compression.CompressionFilter().inlet({"model": "m", "messages": chat(5)}, context)
    assert bool(context.events) is shown
    if shown:
        assert context.events[0].description.startswith("Context: ")
        assert context.events[0].level == "info"


async def test_old_tool_outputs_are_trimmed_and_the_current_ones_kept() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    items = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 5000},
        {"role": "assistant", "content": "found"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "", "tool_calls": [{**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "y" * 5000},
    ]
    answer = await compression.CompressionFilter().inlet({"messages": items}, ctx())
    contents = [m.get("content") for m in answer["messages"]]
    assert "tool output trimmed: 5000 characters" in contents[2]
    assert contents[6] == "y" * 5000
    assert [m.get("tool_call_id") for m in answer["messages"]] == [m.get("tool_call_id") for m in items]


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "tool", "tool_call_id": "orphan", "content": "result without its call"}],
        [{"role": "narrator", "content": "an unknown role"}, {"role": "user", "content": "hi"}],
        [{"role": "user", "content": ""}, {"role": "assistant", "content": None}],
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}],
            }
        ],
        [{"role": "user", "content": [{"type": "mystery"}, "text"]}, {"role": "user"}],
        [{"role": "assistant", "content": "x", "tool_calls": "not a list"}, {"role": 3, "content": "x"}],
    ],
)
async def test_odd_messages_never_raise(messages: list[dict[str, Any]]) -> None:
    flt = compression.CompressionFilter()
    body = {"messages": messages * 30, "model": "m"}
    answer = await flt.inlet(
        copy.deepcopy(body),
        ctx(max_context_tokens=200, compression_threshold_tokens=100, max_summary_tokens=10),
    )
    assert isinstance(answer["messages"], list)
    assert await flt.outlet(body, ctx("outlet")) is body


def test_a_stored_message_keeps_what_a_summary_needs_and_not_the_image_bytes() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10_000}}
    message = {
        "role": " Assistant ",
        "content": [{"type": "text", "text": "look"}, image, {"type": "odd"}],
        "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}, "junk"],
        "files": [{"id": "b"}, {"id": "a"}],
        "extra": "dropped",
    }
    stored = conversations.stored_message(message)
    assert stored["role"] == "assistant"
    assert stored["content"][0] == {"type": "text", "text": "look"}
    assert stored["content"][1]["image_url"]["url"].startswith("[image sha256:")
    assert len(str(stored)) < 1000
    assert stored["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
    assert stored["files"] == ["a", "b"]
    assert "extra" not in stored
    # what the summary prompt shows of it is what it showed of the original
    assert prompts.format_entry(stored, 1) == prompts.format_entry({**message, "role": "assistant"}, 1)


def _plan(turns: int = 10) -> tuple[planning.SummaryPlan, msgs.Turns]:
    items = chat(turns)
    found = msgs.conversation_turns(items)
    plan = planning.plan_summary(items, found, keep_first=1, keep_last=4)
    assert plan is not None
    return plan, found


def _job(**changes: Any) -> payloads.SummaryPayload:
    plan, found = _plan()
    job = payloads.SummaryPayload.planned(
        plan,
        user_id="u1",
        parent=found.hashes[plan.start - 1],
        model="gemini-2.5-flash",
        window=compression.budgets.SummaryWindow(4000, 500, "test"),
        style="faithful",
        temperature=0.3,
        fail_mode="raise",
        locale="fr-FR",
        chat_id="c1",
    )
    if changes:
        return payloads.SummaryPayload.decode({**job.to_payload(), **changes})
    return job


def test_the_payload_holds_references_and_round_trips() -> None:
    plan, _ = _plan()
    job = _job()
    payload = job.to_payload()
    assert payloads.SummaryPayload.decode(payload) == job
    assert job.key == planning.summary_job_key("u1", plan.covered_hash)
    assert job.hashes() == plan.hashes
    assert "question" not in str(payload)  # no transcript, only hashes
    assert len(payload["invariants"]) == plan.stop - plan.start


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"invariants": []}, "invariants"),
        ({"style": "poetic"}, "style"),
        ({"fail_mode": "loud"}, "fail_mode"),
        ({"parent": None}, "parent"),
        ({"user_id": ""}, "user_id"),
        ({"window": {"input_tokens": 0, "output_tokens": 5}}, "window"),
        ({"v": 2}, "version 1"),
        ({"head_count": "x"}, "malformed"),
    ],
)
def test_a_malformed_payload_is_a_permanent_error(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.PermanentJobError, match=message):
        _job(**changes)


def test_refs_that_do_not_lead_to_the_key_are_refused() -> None:
    job = _job(covered_hash="0" * 64)
    with pytest.raises(errors.PermanentJobError, match="do not lead to covered_hash"):
        job.hashes()
    with pytest.raises(errors.PermanentJobError, match="malformed"):
        _job(invariants=["not-a-hash"]).hashes()


def test_the_prompt_is_split_into_instructions_and_input() -> None:
    prompt = prompts.build_summary_prompt("[1] User: hi", "old memory", max_summary_tokens=100)
    system, user = summary.split_prompt(prompt)
    assert system.startswith("You compress a conversation")
    assert "<compression_input>" not in system
    assert user.startswith("<compression_input>")
    assert "old memory" in user
    assert "[1] User: hi" in user
    assert summary.split_prompt("no tags") == ("", "no tags")


def test_a_fenced_summary_is_recognised_and_never_hashed() -> None:
    text = fence.fenced_summary("<working_memory/>", locale="en-US", covered_count=3)
    assert chain.normalize_text(text) == ""


def test_a_summary_window_that_breaks_the_80_percent_rule_plans_no_job() -> None:
    plan, found = _plan()
    context = ctx("outlet", max_summary_tokens=30000)  # fine for the 128k valves, not for gpt-4's 32k
    settings = valves_module.CompressionValves(max_summary_tokens=30000)
    with pytest.raises(ConfigError) as refused:
        compression_jobs.summary_job(
            plan, found, settings, chat(10), model="gpt-4", base_model=None, user_id="u1", chat_id="c1"
        )
    reporting.not_planned(compression.CompressionFilter.name, refused.value, context)  # as the outlet does
    [event] = context.events
    assert event.level == "error"
    assert "max_summary_tokens" in event.description
    job = compression_jobs.summary_job(
        plan,
        found,
        valves_module.CompressionValves(),
        [{"role": "user", "content": "Bonjour, je voudrais savoir où est la gare et comment y aller."}],
        model="echo.gemini-2.5-flash",
        base_model=None,
        user_id="u1",
        chat_id="c1",
    )
    assert job.locale == "fr-FR"
    assert job.model == "gemini-2.5-flash"  # the chat's own model when summary_model is empty
