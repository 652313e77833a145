"""The rich shadow's domain (`echo.domain.shadow`): points, stored forms, the suture plan, steps, archive."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain import chain, shadow
from echo.domain.shadow import parts as parts_module
from echo.domain.shadow.parts import ContentDict

SIG = b"\x00\xffsignature\x01"
LONG = "file text " * 300  # over PAYLOAD_MIN_CHARS


def test_a_skeleton_keeps_signatures_apart_and_heavy_parts_as_payloads() -> None:
    contents: list[ContentDict] = [
        {
            "role": "model",
            "parts": [
                {"text": "thinking", "thought": True},
                {"function_call": {"name": "f", "args": {"b": 1, "a": 2}}, "thought_signature": SIG},
            ],
        },
        {
            "role": "user",
            "parts": [{"text": LONG}, {"inline_data": {"mime_type": "image/png", "data": b"\x89PNG"}}],
        },
    ]
    stored = shadow.dehydrate(contents)
    encoded = json.loads(json.dumps(stored.skeleton))  # what the database keeps is JSON
    assert "thought_signature" not in json.dumps(encoded)
    assert [p.kind for p in stored.payloads] == ["text", "inline_data"]
    assert stored.signatures == (shadow.Signature(0, 1, SIG),)
    payloads = {p.hash: p for p in stored.payloads}
    back = shadow.hydrate(encoded, payloads=payloads, signatures=stored.signatures)
    assert back == contents
    assert list(back[0]["parts"][1]["function_call"]["args"]) == ["b", "a"]


def test_calls_and_results_can_live_in_the_journal() -> None:
    contents: list[ContentDict] = [
        {"role": "model", "parts": [{"function_call": {"name": "search", "args": {"q": "x"}}}]},
        {"role": "user", "parts": [{"function_response": {"name": "search", "response": {"hits": [1]}}}]},
    ]
    stored = shadow.dehydrate(contents, calls={(0, 0): 0}, results={(1, 0): 0})
    assert stored.skeleton == [
        {"role": "model", "parts": [{"call": 0}]},
        {"role": "user", "parts": [{"result": 0}]},
    ]
    entry = shadow.JournalEntry(0, "call_1", "search", {"q": "x"}, "echo", {"hits": [1]})
    assert shadow.hydrate(stored.skeleton, payloads={}, journal=[entry]) == contents
    with pytest.raises(shadow.UnreadableShadow, match="journal entry 0 is missing"):
        shadow.hydrate(stored.skeleton, payloads={})
    no_result = shadow.JournalEntry(0, "call_1", "search", {"q": "x"}, "openwebui")
    with pytest.raises(shadow.UnreadableShadow, match="has no result"):
        shadow.hydrate(stored.skeleton, payloads={}, journal=[no_result])


@pytest.mark.parametrize(
    ("skeleton", "message"),
    [
        ({"role": "user"}, "not a list"),
        ([{"role": "system", "parts": []}], "role user or model"),
        ([{"role": "user", "parts": "x"}], "parts is not a list"),
        ([{"role": "user", "parts": [{"ref": "0" * 64}]}], "is missing"),
        ([{"role": "user", "parts": [{"strange": 1}]}], "unknown part"),
        ([{"role": "user", "parts": ["text"]}], "not an object"),
    ],
)
def test_a_skeleton_that_cannot_be_rebuilt_is_unreadable(skeleton: Any, message: str) -> None:
    with pytest.raises(shadow.UnreadableShadow, match=message):
        shadow.hydrate(skeleton, payloads={})


def test_a_signature_for_a_part_that_is_not_there_is_unreadable() -> None:
    with pytest.raises(shadow.UnreadableShadow, match="no such part"):
        shadow.hydrate(
            [{"role": "model", "parts": [{"text": "a"}]}],
            payloads={},
            signatures=[shadow.Signature(0, 3, SIG)],
        )


def test_payload_hashes_are_content_addresses() -> None:
    a = shadow.payload_hash("inline_data", "image/png", b"x")
    assert a == shadow.payload_hash("inline_data", "image/png", b"x")
    assert a != shadow.payload_hash("inline_data", "image/jpeg", b"x")
    assert a != shadow.payload_hash("text", "image/png", b"x")


def history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Today is Monday."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "w", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sun"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "Thanks"},
    ]


def test_points_leave_system_messages_off_the_chain() -> None:
    messages = history()
    points = shadow.conversation_points(messages)
    assert [p.index for p in points] == [1, 2, 3, 4, 5]
    assert [p.position for p in points] == [0, 1, 2, 3, 4]
    other_day = [{"role": "system", "content": "Today is Tuesday."}, *messages[1:]]
    assert shadow.conversation_points(other_day) == points
    assert points[0].parent is None
    assert points[1].parent == points[0].cumulative


def test_the_current_message_is_hashed_as_the_inlet_saw_it() -> None:
    plain = [{"role": "user", "content": "What is the secret word?"}]
    rewritten = [
        {
            "role": "user",
            "content": "### Task: answer with the context\n<context>…</context>\nWhat is the secret word?",
        }
    ]
    inlet = shadow.conversation_points(plain)[0]
    current = shadow.CurrentMessage(0, inlet.invariant)
    assert shadow.conversation_points(rewritten, current=current) == (inlet,)
    assert shadow.conversation_points(rewritten)[0].invariant != inlet.invariant


def stored_answer(messages: list[dict[str, Any]], index: int, signature: bytes) -> shadow.StoredPoint:
    point = next(p for p in shadow.conversation_points(messages) if p.index == index)
    text = messages[index]["content"]
    form = shadow.dehydrate([{"role": "model", "parts": [{"text": text, "thought_signature": signature}]}])
    return shadow.StoredPoint(point.cumulative, "assistant", form.skeleton, form.refs, form.signatures)


def test_the_suture_restores_found_points_and_counts_the_rest() -> None:
    messages = history()
    points = shadow.conversation_points(messages)
    found = {p.cumulative: p for p in [stored_answer(messages, 4, SIG)]}
    suture = shadow.plan_suture(messages, points, found, {}, current_index=5)
    assert suture.restored == {
        4: [{"role": "model", "parts": [{"text": "Sunny.", "thought_signature": SIG}]}]
    }
    assert suture.hits == {"signatures": 1}
    assert suture.misses == {"signatures": 1, "tool_calls": 1}  # the call at index 2 is not stored
    assert suture.restored_bytes == len("Sunny.") + len(SIG)


def test_an_edit_changes_every_later_point_so_the_other_branch_is_never_applied() -> None:
    messages = history()
    found = {p.cumulative: p for p in [stored_answer(messages, 4, SIG)]}
    edited = [dict(m) for m in messages]
    edited[1] = {"role": "user", "content": "Weather, please?"}
    suture = shadow.plan_suture(edited, shadow.conversation_points(edited), found, {}, current_index=5)
    assert suture.restored == {}
    # a regeneration: another answer at the same place is another point
    regenerated = [dict(m) for m in messages]
    regenerated[4] = {"role": "assistant", "content": "Sunny and warm."}
    suture = shadow.plan_suture(
        regenerated, shadow.conversation_points(regenerated), found, {}, current_index=5
    )
    assert suture.restored == {}


def test_an_unreadable_point_is_counted_and_converted_plainly() -> None:
    messages = history()
    point = shadow.conversation_points(messages)[3]
    broken = shadow.StoredPoint(
        point.cumulative, "assistant", [{"role": "model", "parts": [{"ref": "f" * 64}]}], ("f" * 64,)
    )
    suture = shadow.plan_suture(
        messages, shadow.conversation_points(messages), {point.cumulative: broken}, {}, current_index=5
    )
    assert suture.restored == {}
    assert suture.unreadable == 1
    assert suture.misses["payloads"] == 1


def test_steps_join_streamed_text_but_never_a_signed_part() -> None:
    step = shadow.StepBuilder()
    for part in [
        {"text": "Let me ", "thought": True},
        {"text": "think.", "thought": True},
        {"text": "It is"},
        {"text": ""},
        {"text": " sunny.", "thought_signature": SIG},
        {"text": "", "thought_signature": b"s2"},
        {"function_call": {"name": "f", "args": {}}},
    ]:
        step.add(part)  # type: ignore[arg-type]
    assert step.content["parts"] == [
        {"text": "Let me think.", "thought": True},
        {"text": "It is"},
        {"text": " sunny.", "thought_signature": SIG},
        {"text": "", "thought_signature": b"s2"},
        {"function_call": {"name": "f", "args": {}}},
    ]
    assert step.function_calls == [(4, {"name": "f", "args": {}})]
    assert step.has_signature


def test_only_the_current_turns_unsigned_steps_get_the_placeholder() -> None:
    call: dict[str, Any] = {"function_call": {"name": "f", "args": {}}}
    contents: list[ContentDict] = [
        {"role": "user", "parts": [{"text": "old question"}]},
        {"role": "model", "parts": [dict(call)]},  # an earlier turn: Gemini does not check it
        {
            "role": "user",
            "parts": [{"function_response": {"name": "f", "response": {}}}, {"text": "new question"}],
        },
        {"role": "model", "parts": [dict(call), dict(call)]},
        {"role": "user", "parts": [{"function_response": {"name": "f", "response": {}}}]},
        {"role": "model", "parts": [dict(call), {**call, "thought_signature": SIG}]},
        {"role": "user", "parts": [{"function_response": {"name": "f", "response": {}}}]},
    ]
    assert shadow.sign_current_turn(contents) == 1
    assert "thought_signature" not in contents[1]["parts"][0]
    assert contents[3]["parts"][0]["thought_signature"] == shadow.PLACEHOLDER_SIGNATURE
    assert "thought_signature" not in contents[3]["parts"][1]
    assert "thought_signature" not in contents[5]["parts"][0]


arguments = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(st.integers(), st.text(max_size=10), st.booleans(), st.lists(st.integers(), max_size=3)),
    max_size=5,
)


@given(arguments)
def test_the_answer_point_is_the_one_open_webui_replays(args: dict[str, Any]) -> None:
    """Open WebUI re-serialises the arguments and drops the signature: the archived point is still the
    cumulative hash its follow-up message has."""
    question = [{"role": "user", "content": "Do it."}]
    last = shadow.conversation_points(question)[-1]
    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "do", "arguments": json.dumps(args, indent=2)},
    }
    record = shadow.model_record(
        last,
        contents=[
            {
                "role": "model",
                "parts": [{"function_call": {"name": "do", "args": args}, "thought_signature": SIG}],
            }
        ],
        journal=[shadow.JournalEntry(0, "call_9", "do", args, "openwebui")],
        calls={(0, 0): 0},
        results={},
        answer_text="",
        openwebui_calls=[call],
        chat_id="c",
        model="gemini-2.5-flash",
    )
    replay = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "do", "arguments": json.dumps(args, separators=(",", ":"), sort_keys=True)},
    }
    follow_up = [*question, {"role": "assistant", "content": "", "tool_calls": [replay]}]
    assert shadow.conversation_points(follow_up)[-1].cumulative == record.cumulative
    assert record.form is not None
    assert record.form.skeleton == [{"role": "model", "parts": [{"call": 0}]}]


def test_answers_are_stored_masked() -> None:
    key = "AIza" + "SyC" + "q9" * 16
    record = shadow.model_record(
        None,
        contents=[{"role": "model", "parts": [{"text": f"the key is {key}"}]}],
        journal=[],
        calls={},
        results={},
        answer_text="the key is [CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]",
        openwebui_calls=[],
        chat_id="c",
        model=None,
    )
    assert record.form is not None
    assert key not in json.dumps(record.form.skeleton)
    assert record.position == 0
    assert record.parent is None


def user_point(text: str) -> shadow.Point:
    return shadow.conversation_points([{"role": "user", "content": text}])[0]


def test_a_user_message_keeps_a_rich_form_only_when_later_turns_will_not_send_it() -> None:
    point = user_point("Hello")
    plain = shadow.user_record(
        point,
        received_invariant=point.invariant,
        received_text="Hello",
        parts=[{"text": "Hello"}],
        chat_id="c",
        model=None,
    )
    assert plain.form is None
    with_env = "<environnement_contexte>model ##MODEL_ID##</environnement_contexte>\nHello"
    assert (
        shadow.user_record(
            point,
            received_invariant=point.invariant,
            received_text=with_env,
            parts=[{"text": "Hello"}],
            chat_id="c",
            model=None,
        ).form
        is None
    )
    smart = '<smart_context source="f">file body</smart_context>\nHello'
    kept = shadow.user_record(
        point,
        received_invariant=point.invariant,
        received_text=smart,
        parts=[{"text": smart}],
        chat_id="c",
        model=None,
    )
    assert kept.form is not None
    assert kept.form.skeleton == [{"role": "user", "parts": [{"text": smart}]}]
    rewritten = shadow.user_record(
        point,
        received_invariant="0" * 64,
        received_text="RAG: …Hello",
        parts=[{"text": "RAG: …Hello"}],
        chat_id="c",
        model=None,
    )
    assert rewritten.form is not None
    assert shadow.strip_per_turn_blocks(with_env) == "Hello"


def test_echo_ctx_round_trips_and_reads_leniently() -> None:
    body = {
        "model": "echo.gemini-2.5-flash",
        "files": [{"type": "file", "id": "f1", "name": "a.pdf", "status": "pending"}],
        "metadata": {
            "chat_id": "c1",
            "user_id": "u1",
            "user_message_id": "m1",
            "message_id": "a1",
            "session_id": "s",
            "model": {"id": "my-custom-model"},
        },
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
    }
    context = shadow.from_inlet(body, {"id": "u1"})
    assert context.model == "my-custom-model"
    assert context.files == ({"type": "file", "id": "f1", "name": "a.pdf"},)
    assert context.current == shadow.CurrentMessage(0, shadow.message_invariant(body["messages"][1]))
    assert shadow.EchoContext.from_json(json.loads(json.dumps(context.to_json()))) == context
    odd = shadow.EchoContext.from_json(
        {"chat_id": 3, "user_position": True, "user_invariant": "xyz", "files": "no"}
    )
    assert odd == shadow.EchoContext()
    assert shadow.EchoContext.from_json(None) == shadow.EchoContext()
    assert shadow.from_inlet({"messages": [{"role": "assistant", "content": "x"}]}, None).current is None


def test_placeholders_are_resolved_in_strings_and_parts() -> None:
    messages = [
        {
            "role": "user",
            "content": "<environnement_contexte>##MODEL_ID## / ##MODEL_ORIGIN##</environnement_contexte>",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "##MODEL_ID##"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ],
        },
        {"role": "assistant", "content": "plain"},
    ]
    resolved = shadow.resolve_placeholders(
        messages, model_id="gemini-2.5-pro", model_origin="echo.gemini-2.5-flash"
    )
    assert (
        resolved[0]["content"]
        == "<environnement_contexte>gemini-2.5-pro / echo.gemini-2.5-flash</environnement_contexte>"
    )
    assert resolved[1]["content"][0]["text"] == "gemini-2.5-pro"
    assert resolved[2] is messages[2]
    assert messages[0]["content"].startswith("<environnement_contexte>##MODEL_ID##")  # not changed in place
    block = [{"role": "user", "content": 'modèle_origine:  "##MODEL_ORIGIN##"'}]
    quoted = shadow.resolve_placeholders(block, model_id="m", model_origin='my "odd" model')
    assert quoted[0]["content"] == 'modèle_origine:  "my \\"odd\\" model"'  # a YAML scalar of its own


def test_the_invariant_cache_agrees_with_the_chain() -> None:
    message = {
        "role": "assistant",
        "content": "x",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
    }
    expected = chain.invariant_hash("assistant", "x", (), tools=chain.message_tools(message))
    assert shadow.message_invariant(message) == expected == shadow.message_invariant(dict(message))
    assert len(LONG) >= parts_module.PAYLOAD_MIN_CHARS


def test_the_points_memo_hashes_only_what_a_call_adds_and_sees_edits() -> None:
    memo = shadow.PointsMemo(max_chats=2)
    messages = history()
    first = memo.points(("u", "c"), messages[:-1])
    assert first == shadow.conversation_points(messages[:-1])
    assert memo.points(("u", "c"), messages) == shadow.conversation_points(messages)
    edited = [dict(m) for m in messages]
    edited[1] = {"role": "user", "content": "Weather in Rome?"}
    assert memo.points(("u", "c"), edited) == shadow.conversation_points(edited)
    current = shadow.CurrentMessage(4, "a" * 64)
    assert memo.points(("u", "c"), messages, current=current)[-1].invariant == "a" * 64
    memo.points(("u", "d"), messages)
    memo.points(("u", "e"), messages)
    assert ("u", "c") not in memo._chats  # the least recently used chat went
    small = shadow.PointsMemo(max_chars=100)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 200}}
    big = [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]
    assert small.points("k", big) == shadow.conversation_points(big)
    assert "k" not in small._chats  # too big to keep


def test_the_process_caches_are_bounded_and_forget_an_owner() -> None:
    from echo.adapters.store import shadow as shadow_store

    payloads = shadow_store.PayloadCache(max_bytes=10)
    owner = ("schema", "u")
    a, b = (shadow.Payload(h * 64, "text", "text/plain", b"123456") for h in "ab")
    payloads.put(owner, a)
    payloads.put(owner, b)  # 12 bytes > 10: the oldest goes
    assert payloads.get(owner, a.hash) is None
    assert payloads.get(owner, b.hash) == b
    assert payloads.get(("other", "u"), b.hash) is None  # another tenant's schema never shares
    payloads.forget(owner)
    assert payloads.get(owner, b.hash) is None
    points = shadow_store.PointCache(max_entries=2)
    stored = shadow.StoredPoint("c" * 64, "assistant", [])
    points.put(owner, "c" * 64, stored)
    points.put(owner, "d" * 64, None)  # looked up, absent
    assert points.lookup(owner, ["c" * 64, "d" * 64, "e" * 64]) == ({"c" * 64: stored}, ["e" * 64])
    points.put(owner, "e" * 64, None)
    assert points.lookup(owner, ["c" * 64])[1] == ["c" * 64]  # evicted
    points.forget(owner)
    assert points.lookup(owner, ["d" * 64])[1] == ["d" * 64]
