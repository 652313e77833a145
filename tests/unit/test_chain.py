"""echo.domain.chain: hashing, normalisation, chains of Open WebUI messages, branch detection."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain import chain
from echo.domain.chain import (
    ChainLink,
    Divergence,
    build_chain,
    common_prefix_length,
    compare,
    cumulative_hash,
    invariant_hash,
    message_file_ids,
    message_text,
    message_tools,
    normalize_text,
)

ROLES = st.sampled_from(["system", "user", "assistant", "tool"])
TEXTS = st.text(max_size=40)
FILE_IDS = st.lists(st.text(min_size=1, max_size=8), max_size=4)
MESSAGES = st.lists(
    st.fixed_dictionaries({"role": ROLES, "content": TEXTS}, optional={"files": FILE_IDS}), max_size=12
)
DIGEST = invariant_hash("user", "x")


def test_public_api_is_pinned() -> None:
    assert sorted(chain.__all__) == [
        "ChainLink",
        "Divergence",
        "build_chain",
        "common_prefix_length",
        "compare",
        "cumulative_hash",
        "invariant_hash",
        "message_file_ids",
        "message_text",
        "message_tools",
        "normalize_text",
    ]


@given(ROLES, TEXTS, FILE_IDS)
def test_hashes_are_deterministic_hex_sha256(role: str, text: str, files: list[str]) -> None:
    first = invariant_hash(role, text, files)
    assert first == invariant_hash(role, text, list(files))
    assert len(first) == 64
    assert int(first, 16) >= 0
    assert cumulative_hash(first, None) == cumulative_hash(first, None)
    assert cumulative_hash(first, DIGEST) == cumulative_hash(first, DIGEST)


@given(st.data())
def test_file_id_order_and_duplicates_are_irrelevant(data: st.DataObject) -> None:
    files = data.draw(FILE_IDS)
    shuffled = data.draw(st.permutations(files))
    assert invariant_hash("user", "hi", files) == invariant_hash("user", "hi", [*shuffled, *files])


@given(TEXTS, TEXTS)
def test_different_text_different_hash(a: str, b: str) -> None:
    if normalize_text(a) != normalize_text(b):
        assert invariant_hash("user", a) != invariant_hash("user", b)


@given(ROLES, ROLES, TEXTS)
def test_different_role_different_hash(a: str, b: str, text: str) -> None:
    if a != b:
        assert invariant_hash(a, text) != invariant_hash(b, text)


@given(FILE_IDS, FILE_IDS)
def test_different_files_different_hash(a: list[str], b: list[str]) -> None:
    if set(a) != set(b):
        assert invariant_hash("user", "t", a) != invariant_hash("user", "t", b)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("a", "bc", ()), ("ab", "c", ())),
        (("user", "x", ("f",)), ("user", "xf", ())),
        (("user", "x", ("a", "b")), ("user", "x", ("ab",))),
        (("user", "", ("a",)), ("user", "a", ())),
    ],
)
def test_field_boundaries_never_collide(left: tuple, right: tuple) -> None:
    assert invariant_hash(*left) != invariant_hash(*right)


def test_genesis_differs_from_any_parent_and_from_the_invariant() -> None:
    genesis = cumulative_hash(DIGEST, None)
    assert genesis not in {cumulative_hash(DIGEST, DIGEST), DIGEST}
    assert cumulative_hash(DIGEST, genesis) != genesis


@pytest.mark.parametrize("bad", ["", "abc", "X" * 64, DIGEST.upper(), "user: hello"])
def test_cumulative_hash_rejects_what_is_not_a_digest(bad: str) -> None:
    with pytest.raises(ValueError, match="SHA-256"):
        cumulative_hash(bad, None)
    with pytest.raises(ValueError, match="SHA-256"):
        cumulative_hash(DIGEST, bad)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\r\nb\rc", "a\nb\nc"),
        ("cafe\u0301", "caf\u00e9"),  # NFD é → NFC é
        ("hello  \n\t \n", "hello"),
        ("  indented\n    code", "  indented\n    code"),
        (
            '<attached_files>\n<file type="file" id="f1" name="n.txt"/>\n</attached_files>\nquestion',
            "question",
        ),
        ("<environnement_contexte>\nDate: lundi\n</environnement_contexte>\n\nBonjour", "Bonjour"),
        ('Avant\n\n<smart_context source="draft" v="2">\nbig\n</smart_context>\n\nAprès', "Avant\n\nAprès"),
        ('Question ?\n\n<echo_summary covers="12">résumé</echo_summary>', "Question ?"),
        ('<echo_memories count="2">\nguard\n\n- a\n- b\n</echo_memories>\n\nWhere to?', "Where to?"),
        ("<smart_context/>texte", "texte"),
        (
            "keep <attached_files>x</attached_files> in the middle",
            "keep <attached_files>x</attached_files> in the middle",
        ),
        ("<smart_contextual>kept</smart_contextual>", "<smart_contextual>kept</smart_contextual>"),
    ],
)
def test_normalisation(raw: str, clean: str) -> None:
    assert normalize_text(raw) == clean
    assert invariant_hash("user", raw) == invariant_hash("user", clean)


def test_file_ids_must_not_be_a_bare_string() -> None:
    with pytest.raises(TypeError, match="not one str"):
        invariant_hash("user", "x", "file-1")


def test_role_is_case_and_space_insensitive() -> None:
    assert invariant_hash(" User ", "x") == invariant_hash("user", "x")


def test_decorated_inlet_message_matches_the_clean_shadow() -> None:
    inlet = {
        "role": "user",
        "content": "<echo_summary n='3'>old turns</echo_summary>\n<attached_files>\n"
        '<file type="file" id="f-1" name="a.pdf"/>\n</attached_files>\r\nWhat is in it?  ',
        "files": [{"type": "file", "id": "f-1", "name": "a.pdf"}],
    }
    shadow = {"role": "user", "content": "What is in it?", "files": [{"file": {"id": "f-1"}}]}
    assert build_chain([inlet]) == build_chain([shadow])


def test_message_text_of_strings_none_and_parts() -> None:
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG one").decode()
    other = "data:image/png;base64," + base64.b64encode(b"\x89PNG two").decode()
    parts = [
        {"type": "text", "text": "Voici l'image 1 :"},
        {"type": "image_url", "image_url": {"url": png}},
        {"type": "input_audio", "input_audio": {"data": "..."}},
        {"type": "text", "text": "Compare-les."},
    ]
    text = message_text(parts)
    assert text.startswith("Voici l'image 1 :\n[image sha256:")
    assert text.endswith("]\nCompare-les.")
    assert png.split(",")[1] not in text
    assert message_text([{**parts[1], "image_url": {"url": other}}]) != message_text([parts[1]])
    assert message_text("plain") == "plain"
    assert message_text(None) == ""
    assert message_text(42) == ""
    assert message_text(["x", 3]) == ""


def test_message_file_ids_shapes() -> None:
    message = {"files": [{"id": "a"}, {"file": {"id": "b"}}, "c", {"name": "no id"}, 7]}
    assert message_file_ids(message) == ("a", "b", "c")
    assert message_file_ids({"files": None}) == ()
    assert message_file_ids({}) == ()


def test_build_chain_links() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi", "id": "u1"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "id": 7},
    ]
    links = build_chain(messages)
    assert [link.index for link in links] == [0, 1, 2]
    assert [link.role for link in links] == ["system", "user", "assistant"]
    assert [link.message_id for link in links] == [None, "u1", None]
    assert links[0].cumulative == cumulative_hash(invariant_hash("system", "Be brief."), None)
    assert links[2].invariant == invariant_hash("assistant", "hello")
    assert links[2].cumulative == cumulative_hash(links[2].invariant, links[1].cumulative)
    assert isinstance(links[0], ChainLink)


@given(MESSAGES, MESSAGES)
def test_prefix_property(prefix: list[dict], extension: list[dict]) -> None:
    short, long = build_chain(prefix), build_chain(prefix + extension)
    assert long[: len(short)] == short
    assert compare(short, long) == Divergence(common=len(short), branched=False, added=len(extension))


@given(MESSAGES.filter(bool), st.data())
def test_an_edit_changes_every_cumulative_from_its_position_on(
    messages: list[dict], data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, len(messages) - 1))
    edited = [dict(m) for m in messages]
    edited[k]["content"] = normalize_text(edited[k]["content"]) + " (edited)"
    before, after = build_chain(messages), build_chain(edited)
    for i, (old, new) in enumerate(zip(before, after, strict=True)):
        assert (old.cumulative == new.cumulative) == (i < k)
    assert compare(before, after) == Divergence(common=k, branched=True, added=len(messages) - k)


def _naive_common(a: tuple[ChainLink, ...], b: tuple[ChainLink, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n].cumulative == b[n].cumulative:
        n += 1
    return n


@given(MESSAGES, MESSAGES, MESSAGES)
def test_common_prefix_length_equals_naive(
    shared: list[dict], tail_a: list[dict], tail_b: list[dict]
) -> None:
    a, b = build_chain(shared + tail_a), build_chain(shared + tail_b)
    assert common_prefix_length(a, b) == _naive_common(a, b) >= len(shared)
    assert common_prefix_length(b, a) == common_prefix_length(a, b)


def test_compare_cases() -> None:
    base = build_chain([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    same = compare(base, base)
    assert same.identical
    assert not same.extends
    assert same == Divergence(2, False, 0)
    regenerated = build_chain([{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}])
    assert compare(base, regenerated) == Divergence(common=1, branched=True, added=1)
    assert compare(base, base[:1]) == Divergence(common=1, branched=True, added=0)
    assert compare((), base).extends


FRAGMENTS = st.sampled_from(
    [
        "<echo_summary>",
        "</echo_summary>",
        "<smart_context a='1'>",
        "</smart_context>",
        "<attached_files>",
        "</attached_files>",
        "<environnement_contexte/>",
        "\r\n",
        "\r",
        " ",
        "\n",
        "e",
        "\u0301",
        "\u212a",
        "<",
        ">",
    ]
)


@given(st.lists(FRAGMENTS | st.text(max_size=3), max_size=14).map("".join))
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert invariant_hash("user", once) == invariant_hash("user", text)


# -- tool calls -----------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4)
CALL_IDS = st.text(min_size=1, max_size=8)
NAMES = st.text(min_size=1, max_size=8)


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _assistant(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "tool_calls": list(calls)}


def _invariant(message: dict[str, Any]) -> str:
    [link] = build_chain([message])
    return link.invariant


@given(TEXTS, CALL_IDS, NAMES, ARGUMENTS, st.data())
def test_arguments_hash_as_parsed_json_whatever_their_spacing_and_key_order(
    text: str, call_id: str, name: str, arguments: dict[str, Any], data: st.DataObject
) -> None:
    # Open WebUI sends back {"city":"Paris"} for the {"city": "Paris"} a model streamed.
    keys = data.draw(st.permutations(list(arguments)))
    reordered = {key: arguments[key] for key in keys}
    spaced = json.dumps(reordered, indent=data.draw(st.sampled_from([None, 1, 4])))
    compact = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    as_object = {**_call(call_id, name, ""), "function": {"name": name, "arguments": arguments}}
    hashes = {
        _invariant(_assistant(text, _call(call_id, name, spaced))),
        _invariant(_assistant(text, _call(call_id, name, compact))),
        _invariant(_assistant(text, as_object)),
    }
    assert len(hashes) == 1


@given(TEXTS, CALL_IDS, NAMES, ARGUMENTS, ARGUMENTS, NAMES, CALL_IDS)
def test_the_same_text_with_other_tool_calls_is_another_message(
    text: str, call_id: str, name: str, arguments: dict[str, Any], other: dict[str, Any], name2: str, id2: str
) -> None:
    base = _invariant(_assistant(text, _call(call_id, name, json.dumps(arguments))))
    assert base != _invariant({"role": "assistant", "content": text})
    if other != arguments:
        assert base != _invariant(_assistant(text, _call(call_id, name, json.dumps(other))))
    if name2 != name:
        assert base != _invariant(_assistant(text, _call(call_id, name2, json.dumps(arguments))))
    if id2 != call_id:
        assert base != _invariant(_assistant(text, _call(id2, name, json.dumps(arguments))))
    two = _assistant(text, _call(call_id, name, "{}"), _call(id2, name2, "{}"))
    swapped = _assistant(text, _call(id2, name2, "{}"), _call(call_id, name, "{}"))
    if (call_id, name) != (id2, name2):
        assert _invariant(two) != _invariant(swapped)  # the order of calls is kept by Open WebUI: it counts


@given(TEXTS, CALL_IDS, CALL_IDS)
def test_a_tool_result_is_identified_by_the_call_it_answers(text: str, a: str, b: str) -> None:
    first = _invariant({"role": "tool", "tool_call_id": a, "content": text})
    assert first != _invariant({"role": "tool", "content": text})
    assert (first == _invariant({"role": "tool", "tool_call_id": b, "content": text})) == (a == b)


@given(ROLES, TEXTS, FILE_IDS)
def test_a_message_without_tools_hashes_as_before_tools_were_hashed(
    role: str, text: str, files: list[str]
) -> None:
    message = {"role": role, "content": text, "files": files}
    variants = [
        message,
        {**message, "tool_calls": []},
        {**message, "tool_calls": "not a list"},
        {**message, "tool_call_id": ""},
        {**message, "tool_calls": ["not a mapping"]},
    ]
    for variant in variants:
        assert message_tools(variant) == ""
        assert _invariant(variant) == invariant_hash(role, text, files)


def test_the_tools_field_never_collides_with_the_text() -> None:
    message = _assistant("It is sunny.", _call("call_1", "get_weather", '{"city":"Paris"}'))
    rendered = message_tools(message)
    assert (
        rendered == '{"calls":[{"arguments":"{\\"city\\":\\"Paris\\"}","id":"call_1","name":"get_weather"}]}'
    )
    assert _invariant(message) == invariant_hash("assistant", "It is sunny.", tools=rendered)
    for text in ("It is sunny." + rendered, "It is sunny.\n" + rendered, rendered):
        assert invariant_hash("assistant", text) != _invariant(message)


def test_arguments_that_are_not_json_or_nest_too_deep_hash_as_their_text() -> None:
    for arguments in ("city=Paris", "", "{broken", "[" * 100_000):
        message = _assistant("", _call("c", "f", arguments))
        assert _invariant(message) == _invariant(json.loads(json.dumps(message)))
        assert _invariant(message) != _invariant(_assistant("", _call("c", "f", arguments + " ")))
