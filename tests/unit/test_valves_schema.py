"""The documented body of `valves/update` (`openapi_docs.valves_body`) says exactly what each filter's
valves take (issue 18, point 10): a body the schema allows is accepted unless it breaks a rule across
valves that the schema lists (`x-echo-rules`), and a body it does not allow is refused."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from echo.config import snapshot, valves
from echo.entrypoints.http import openapi_docs
from echo.errors import ConfigError

FILTERS = sorted(valves.FILTER_VALVES)


def body_schema(filter_id: str) -> dict[str, Any]:
    extra = openapi_docs.valves_body(valves.FILTER_VALVES[filter_id])
    schema: dict[str, Any] = extra["requestBody"]["content"]["application/json"]["schema"]
    return schema


def schema_allows(schema: dict[str, Any], body: object) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(body)


def refusal(filter_id: str, body: dict[str, Any]) -> str | None:
    """Why the valves refuse `body` (as `valves/update` says it), or None when they take it."""
    try:
        snapshot.validate_valves(filter_id, body)
    except ConfigError as error:
        return str(error)
    return None


def breaks_a_listed_rule(schema: dict[str, Any], why: str) -> bool:
    return any(all(name in why for name in rule["valves"]) for rule in schema.get("x-echo-rules", []))


def probes(field: dict[str, Any]) -> list[object]:
    """Values at and around a valve's documented bounds, in the wrong types and in text."""
    found: list[object] = [None, True, False, 0, 1, -1, 1.5, "", " ", "x", [], {}, "0", "1", "true"]
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        for branch in [field, *field.get("anyOf", [])]:
            if key in branch:
                bound = branch[key]
                for near in (bound - 1, bound, bound + 1, bound - 0.5, bound + 0.5):
                    found += [near, str(near), f" {near}", f"0{near}", f"{near}.0", f"+{near}"]
    found += ["1e3", "nan", "inf", "-0", "08", "8.", ".5", "1_0", "0.850", "0x10", "٣"]
    found += [
        "gemini-2.5-flash",
        "a\x00b",
        "tab\there",
        "\x85",
        "x" * 201,
        "UTC",
        "utc",
        " UTC",
        "Europe/Paris",
    ]
    found += ["{}", "[]", "{", '{"m": {"compression_threshold_tokens": 1, "max_context_tokens": 2}}']
    found += [{"m": {"compression_threshold_tokens": 1, "max_context_tokens": 2}}]
    found += [{"m": {"compression_threshold_tokens": True, "max_context_tokens": 2}}]
    found += [{"m": {"compression_threshold_tokens": "1", "max_context_tokens": 2}}]
    found += [{"m": {"compression_threshold_tokens": 3, "max_context_tokens": 2}}]
    found += [2**31, 10**8, 10**8 + 1, 10**9, 2**63, 1e308]
    for branch in [field, *field.get("anyOf", [])]:
        found += list(branch.get("enum", [])[:3])
    return found


@pytest.mark.parametrize("filter_id", FILTERS)
def test_the_schema_allows_what_the_valves_take_and_nothing_else(filter_id: str) -> None:
    schema = body_schema(filter_id)
    disagreements = []
    for name, field in schema["properties"].items():
        for value in probes(field):
            body = {name: value}
            allowed, why = schema_allows(schema, body), refusal(filter_id, body)
            if allowed and why is not None and not breaks_a_listed_rule(schema, why):
                disagreements.append(f"schema allows, valves refuse: {body!r}: {why}")
            if not allowed and why is None:
                disagreements.append(f"schema refuses, valves take: {body!r}")
    assert not disagreements, "\n".join(disagreements)


def test_the_rules_across_valves_are_listed_and_said() -> None:
    for filter_id in FILTERS:
        model, schema = valves.FILTER_VALVES[filter_id], body_schema(filter_id)
        assert [rule["rule"] for rule in schema["x-echo-rules"]] == [rule.text for rule in model.RULES]
        for rule in model.RULES:
            assert rule.text in schema["description"]
            assert all(name in model.model_fields for name in rule.valves)
    memory = body_schema("echo_memory")
    assert "WINDOW_OVERLAP < WINDOW_SIZE" in memory["description"]


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ({"SIMILARITY_THRESHOLD": 0.9, "EXACT_MATCH_THRESHOLD": 0.8}, "EXACT_MATCH_THRESHOLD"),
        ({"WINDOW_SIZE": 4, "WINDOW_OVERLAP": 4}, "WINDOW_OVERLAP (4) must be below WINDOW_SIZE (4)"),
        ({"WINDOW_SIZE": 2}, "WINDOW_OVERLAP (2) must be below WINDOW_SIZE (2)"),
    ],
)
def test_a_body_breaking_a_rule_is_refused_naming_its_valves(body: dict[str, Any], rule: str) -> None:
    schema = body_schema("echo_memory")
    assert schema_allows(schema, body)
    why = refusal("echo_memory", body)
    assert why is not None
    assert rule in why
    assert breaks_a_listed_rule(schema, why)


def test_window_overlap_and_model_names_are_bounded() -> None:
    # Issue 18, point 11: WINDOW_OVERLAP took 1,000,000,000 and DISTILLATION_MODEL a NUL.
    assert "WINDOW_OVERLAP" in (refusal("echo_memory", {"WINDOW_OVERLAP": 1_000_000_000}) or "")
    assert "WINDOW_SIZE" in (refusal("echo_memory", {"WINDOW_SIZE": 1_000_000_000}) or "")
    for filter_id, name in [
        ("echo_memory", "DISTILLATION_MODEL"),
        ("echo_context", "MAP_REDUCE_MODEL"),
        ("echo_compression", "summary_model"),
    ]:
        for bad in ("gemini\x00", "gemini\n", "\x1b[31mgemini", "gemini\x85", "g" * 201):
            why = refusal(filter_id, {name: bad})
            assert name in (why or ""), (name, bad)
        assert refusal(filter_id, {name: "gemini-2.5-flash"}) is None
    assert refusal("echo_context", {"AEC_DEFAULT_USER_NAME": "Ada\x00"}) is not None
    assert refusal("echo_context", {"AEC_DEFAULT_LOCATION": "Paris\r\nX-Injected: 1"}) is not None


def test_a_number_takes_its_plain_decimal_text_and_a_boolean_only_true_or_false() -> None:
    # Open WebUI's valves editor sends an edited number as text; its switches send true and false.
    taken = snapshot.validate_valves("echo_memory", {"WINDOW_SIZE": "8", "SIMILARITY_THRESHOLD": "0.5"})
    assert isinstance(taken, valves.MemoryValves)
    assert (taken.WINDOW_SIZE, taken.SIMILARITY_THRESHOLD) == (8, 0.5)
    for value in (" 8", "8.0", "+8", "08", "1e1", "0x8", "8 "):
        assert "WINDOW_SIZE" in (refusal("echo_memory", {"WINDOW_SIZE": value}) or ""), value
    for value in (0, 1, "true", "yes", None):
        assert "ENABLE_RECALL" in (refusal("echo_memory", {"ENABLE_RECALL": value}) or ""), value
    for value in ("nan", "inf", "1e-1", ".5"):
        assert refusal("echo_memory", {"SIMILARITY_THRESHOLD": value}) is not None, value


def test_a_zone_is_exactly_a_name_of_the_list() -> None:
    assert refusal("echo_context", {"AEC_DEFAULT_TIMEZONE": "Europe/Paris"}) is None
    for zone in ("utc", " UTC", "europe/paris"):
        assert refusal("echo_context", {"AEC_DEFAULT_TIMEZONE": zone}) is not None, zone


def _numbers(lowest: int | None, highest: int | None) -> list[int]:
    low = -1000 if lowest is None else lowest - 30
    high = 1000 if highest is None else highest + 30
    return list(range(low, high + 1))


@pytest.mark.parametrize(
    ("low", "high"),
    [
        (0, 0),
        (1, 200),
        (0, 199),
        (16, 8192),
        (-5, 5),
        (None, None),
        (0, None),
        (9, 10),
        (99, 1001),
        (-4567, -123),
    ],
)
def test_an_integer_text_pattern_matches_exactly_the_integers_within_bounds(
    low: int | None, high: int | None
) -> None:
    pattern = re.compile(openapi_docs.decimal_text_pattern(int, ge=low, le=high))
    for number in _numbers(low, high):
        within = (low is None or number >= low) and (high is None or number <= high)
        assert bool(pattern.fullmatch(str(number))) == within, number
    for text in ("", "01", "-0", "+1", " 1", "1.0", "00", "1e2"):
        assert pattern.fullmatch(text) is None, text


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_the_int32_text_pattern_agrees_with_the_bounds(number: int) -> None:
    pattern = re.compile(openapi_docs.decimal_text_pattern(int, ge=-(2**31), le=2**31 - 1))
    assert bool(pattern.fullmatch(str(number))) == (-(2**31) <= number <= 2**31 - 1)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_documented_number_text_is_taken(data: st.DataObject) -> None:
    filter_id = data.draw(st.sampled_from(FILTERS))
    schema = body_schema(filter_id)
    texts = {
        name: branch["pattern"]
        for name, field in schema["properties"].items()
        for branch in field.get("anyOf", [])
        if branch.get("type") == "string" and "pattern" in branch
    }
    name = data.draw(st.sampled_from(sorted(texts)))
    text = data.draw(st.from_regex(texts[name], fullmatch=True))
    why = refusal(filter_id, {name: text})
    assert why is None or breaks_a_listed_rule(schema, why), (name, text, why)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_text_the_schema_refuses_is_refused(data: st.DataObject) -> None:
    filter_id = data.draw(st.sampled_from(FILTERS))
    schema = body_schema(filter_id)
    names = sorted(n for n, f in schema["properties"].items() if "anyOf" in f and "pattern" in json.dumps(f))
    name = data.draw(st.sampled_from(names))
    text = data.draw(st.text(alphabet="0123456789.-+e ", max_size=24))
    body = {name: text}
    if not schema_allows(schema, body):
        assert refusal(filter_id, body) is not None, body


def test_the_model_thresholds_valve_takes_an_object_or_its_json_text() -> None:
    table = {"mine": {"compression_threshold_tokens": 2000, "max_context_tokens": 9000}}
    schema = body_schema("echo_compression")
    for value in (table, json.dumps(table), ""):
        assert schema_allows(schema, {"model_thresholds": value})
        assert refusal("echo_compression", {"model_thresholds": value}) is None
    for entry in (
        {"compression_threshold_tokens": True, "max_context_tokens": 9},
        {"compression_threshold_tokens": "1", "max_context_tokens": 9},
    ):
        assert not schema_allows(schema, {"model_thresholds": {"m": entry}})
        assert refusal("echo_compression", {"model_thresholds": {"m": entry}}) is not None
        assert refusal("echo_compression", {"model_thresholds": json.dumps({"m": entry})}) is not None


def test_valves_models_refuse_what_lax_pydantic_took() -> None:
    with pytest.raises(ValidationError):
        valves.ContextValves.model_validate({"ENABLE_AEC": 0})
