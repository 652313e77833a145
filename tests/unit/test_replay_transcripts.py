"""What `echoctl replay` reads: Open WebUI chat exports and LoCoMo conversations, as plain data."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from fakes.shared_data import FIXTURES, LOCOMO

from echo.domain import transcripts
from echo.domain.transcripts import Message, TranscriptError, exchanges_of, parse
from echo.entrypoints.replay import driver


def stored_chat() -> dict[str, Any]:
    return json.loads((FIXTURES / "tool_flow" / "stored_chat.json").read_text())


def node(id_: str, role: str, content: str, parent: str | None, **extra: Any) -> dict[str, Any]:
    return {"id": id_, "parentId": parent, "role": role, "content": content, "childrenIds": [], **extra}


def tree_chat(**chat: Any) -> dict[str, Any]:
    """A chat row with two branches after the first answer; the second is on screen."""
    messages = {
        "u1": node("u1", "user", "first question", None),
        "a1": node("a1", "assistant", "first answer", "u1"),
        "u2": node("u2", "user", "an edited question", "a1"),
        "a2": node("a2", "assistant", "an answer on the old branch", "u2", timestamp=5),
        "u2b": node("u2b", "user", "the question on screen", "a1", files=[{"type": "file", "id": "f1"}]),
        "a2b": node("a2b", "assistant", "the answer on screen", "u2b", timestamp=9),
    }
    return {
        "id": "chat-1",
        "title": "Branches",
        "chat": {
            "models": ["gpt-4o"],
            "params": {"system": "Be brief."},
            "history": {"currentId": "a2b", "messages": messages},
            "messages": [],
            **chat,
        },
    }


def test_a_real_export_replays_the_branch_on_screen_with_its_tool_items() -> None:
    row = stored_chat()
    [chat] = parse([row])  # what "Export chat (.json)" downloads: a list with the row
    assert (chat.id, chat.title, chat.kind, chat.model) == (row["id"], "New Chat", "openwebui", "stub_pipe")
    assert [len(e.sent) for e in chat.exchanges] == [1, 1]
    assert [m.role for m in chat.messages] == ["user", "assistant", "user", "assistant"]
    answer = chat.exchanges[0].replies[0]
    assert answer.fields["output"][0]["type"] == "function_call"
    recorded = answer.recorded()
    assert recorded["id"] == answer.id
    assert recorded["output"] == answer.fields["output"]
    # The next inlet carries the tool call and its result, as Open WebUI rebuilds them from `output`.
    sent = driver.inlet_messages(chat, list(chat.messages[:3]))
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[2] == {"role": "tool", "tool_call_id": "call_stub_1", "content": "sunny in Paris, 21 C"}
    assert all("id" not in message for message in sent)  # an inlet carries no ids


def test_the_current_branch_the_system_prompt_and_files() -> None:
    [chat] = parse(tree_chat())
    assert [m.id for m in chat.messages] == ["u1", "a1", "u2b", "a2b"]
    assert chat.system == "Be brief."
    assert chat.model == "gpt-4o"
    body = driver.inlet_body(chat, list(chat.messages[:3]), user_id="u", reply_id="a2b")
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["files"] == [{"type": "file", "id": "f1"}]
    assert body["metadata"] == {
        "chat_id": "chat-1",
        "user_id": "u",
        "message_id": "a2b",
        "user_message_id": "u2b",
        "session_id": "echoctl-replay",
    }
    outlet = driver.outlet_body(chat, list(chat.messages))
    assert outlet["id"] == "a2b"
    assert [m["id"] for m in outlet["messages"]] == ["u1", "a1", "u2b", "a2b"]
    assert "system" not in [m["role"] for m in outlet["messages"]]  # outlets carry the history only


def test_every_chat_of_an_export_a_bare_chat_and_an_old_message_list() -> None:
    rows = [tree_chat(), {**tree_chat(), "id": "chat-2", "title": "Second"}]
    assert [chat.id for chat in parse(rows)] == ["chat-1", "chat-2"]
    [bare] = parse(tree_chat()["chat"], name="stem")
    assert bare.id == "stem"
    assert [m.id for m in bare.messages] == ["u1", "a1", "u2b", "a2b"]
    old = {"title": "Old", "chat": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]}}
    [chat] = parse(old)
    assert [(m.id, m.role, m.content) for m in chat.messages] == [
        ("m0", "user", "hi"),
        ("m1", "assistant", ""),
    ]


def test_without_a_current_id_the_newest_leaf_ends_the_branch() -> None:
    row = tree_chat()
    del row["chat"]["history"]["currentId"]
    [chat] = parse(row)
    assert [m.id for m in chat.messages] == ["u1", "a1", "u2b", "a2b"]
    row["chat"]["history"]["currentId"] = "gone"
    row["chat"]["history"]["messages"]["a2"]["timestamp"] = 10
    [chat] = parse(row)
    assert [m.id for m in chat.messages] == ["u1", "a1", "u2", "a2"]


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ([], "empty list"),
        ("text", "top level: expected a chat object"),
        ({"something": "else"}, "neither an Open WebUI chat"),
        ([tree_chat(), 5], "[1]: expected a chat object"),
        ({"chat": {"history": {"currentId": "a", "messages": {"a": node("a", "user", "x", "zz")}}}}, "'zz'"),
        (
            {"chat": {"history": {"currentId": "a", "messages": {"a": node("a", "user", "x", "a")}}}},
            "breaks at 'a'",
        ),
        ({"chat": {"history": {"currentId": "a", "messages": {"a": {"content": "no role"}}}}}, ".role"),
        ({"chat": {"messages": "not a list"}}, ".chat.messages: expected a list"),
    ],
)
def test_what_is_not_a_chat_is_refused_with_the_place_named(document: object, words: str) -> None:
    with pytest.raises(TranscriptError, match=None) as raised:
        parse(document)
    assert words in str(raised.value)


def test_exchanges_end_with_the_answer() -> None:
    def m(role: str, n: int) -> Message:
        return Message(id=f"{role}{n}", role=role, content=str(n))

    cut = exchanges_of([m("assistant", 0), m("user", 1), m("assistant", 2), m("assistant", 3), m("user", 4)])
    assert [[x.id for x in e.sent] for e in cut] == [["assistant0", "user1"], ["user4"]]
    assert [[x.id for x in e.replies] for e in cut] == [["assistant2", "assistant3"], []]
    assert exchanges_of([]) == ()


def locomo(**extra: Any) -> dict[str, Any]:
    return {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob!"},
            {
                "speaker": "Ann",
                "dia_id": "D1:2",
                "text": "I adopted a cat.",
                "blip_caption": "a photo of a cat",
            },
            {"speaker": "Bob", "dia_id": "D1:3", "text": "Lovely."},
        ],
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How is the cat?"}],
        "session_2_summary": "not a session",
        "qa": [
            {"question": "What did Ann adopt?", "answer": "a cat", "evidence": ["D1:2"], "category": 1},
            {"question": "When?", "answer": 2023, "evidence": ["D1:2; D2:1"], "category": 2},
            {"question": "Trick?", "evidence": ["D1:1"], "category": 5, "adversarial_answer": "a dog"},
        ],
        **extra,
    }


def test_a_locomo_conversation_becomes_a_chat_of_two_speakers() -> None:
    [chat] = parse(locomo(), name="tiny")
    assert (chat.id, chat.kind, chat.model, chat.system) == ("tiny", "locomo", None, None)
    first, second = chat.messages
    assert first.role == "user"
    assert first.content == (
        "[session 1, 1:00 pm on 1 May, 2023]\nAnn: Hi Bob!\nAnn: I adopted a cat. [shares a photo of a cat]"
    )
    assert first.sources == ("D1:1", "D1:2")
    assert second.role == "assistant"
    assert second.content == "Bob: Lovely.\n[session 2, 2:00 pm on 9 May, 2023]\nBob: How is the cat?"
    assert dict(chat.sources)["D2:1"] == "How is the cat?"
    assert [(q.answer, q.evidence, q.category) for q in chat.questions] == [
        ("a cat", ("D1:2",), 1),
        ("2023", ("D1:2", "D2:1"), 2),
        ("", ("D1:1",), 5),
    ]
    [sample] = parse([{"sample_id": "conv-1", "conversation": locomo(qa=None), "qa": locomo()["qa"]}])
    assert sample.id == "conv-1"
    assert len(sample.questions) == 3


def test_a_locomo_turn_from_a_third_speaker_is_refused() -> None:
    bad = locomo(session_3=[{"speaker": "Eve", "dia_id": "D3:1", "text": "psst"}])
    with pytest.raises(TranscriptError, match=r"\.session_3\[0\]\.speaker: 'Eve'"):
        parse(bad)
    with pytest.raises(TranscriptError, match=r"session_3\[0\]\.text: expected a string"):
        parse(locomo(session_3=[{"speaker": "Ann", "dia_id": "D3:1"}]))
    with pytest.raises(TranscriptError, match=r"\.qa\[0\]\.question"):
        parse(locomo(qa=[{"answer": "x"}]))


def test_the_locomo_fixtures_parse_whole() -> None:
    paths = sorted(LOCOMO.glob("*.json"))
    assert paths, f"no LoCoMo conversation in {LOCOMO}"
    for path in paths:
        data = json.loads(path.read_text())
        [chat] = parse(copy.deepcopy(data), name=path.stem)
        turns = [t for key, value in data.items() if key.startswith("session_") and isinstance(value, list)
                 for t in value]  # fmt: skip
        assert len(chat.sources) == len(turns)
        assert sum(len(m.sources) for m in chat.messages) == len(turns)
        roles = [m.role for m in chat.messages]
        assert all(a != b for a, b in itertools.pairwise(roles))  # runs of a speaker are one message
        assert len(chat.questions) == len(data["qa"])
        assert transcripts.Transcript is type(chat)
