"""Who a hook call is for (issue 18, part 2): the `user` object Open WebUI attaches, never a body field.

Forged bodies here need nothing outside the repository; the captured Open WebUI 0.12.4 calls
(`tests/fixtures/owui-0.12.4/`) check that real traffic names one user everywhere, so the
mismatch counter stays at zero for it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes.metric_samples import sample
from fakes.shared_data import FIXTURES, load_fixture
from structlog.testing import capture_logs

from echo.domain import bodies, shadow
from echo.entrypoints.http import identity

MALLORY = {"id": "mallory", "name": "Mallory", "email": "m@example.com", "role": "user"}


def forged_inlet(claimed: str = "bob") -> dict[str, Any]:
    """An inlet body whose metadata names `claimed` in every place Open WebUI writes a user id."""
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {
            "chat_id": "c1",
            "user_id": claimed,
            "user_message_id": "u1",
            "user_message": {"id": "u1", "user_id": claimed, "user": {"id": claimed, "name": "B"}},
        },
    }


def test_the_attached_user_is_the_identity_not_the_metadata() -> None:
    ids = bodies.turn_ids(forged_inlet("bob"), MALLORY)
    assert ids.user_id == "mallory"
    assert ids.chat_id == "c1"
    assert ids.message_id == "u1"


def test_without_an_attached_user_a_body_claim_names_nobody() -> None:
    assert bodies.turn_ids(forged_inlet("bob")).user_id is None
    assert bodies.turn_ids(forged_inlet("bob"), {}).user_id is None
    assert bodies.turn_ids(forged_inlet("bob"), {"id": ""}).user_id is None
    assert bodies.turn_ids(forged_inlet("bob"), {"id": 7}).user_id is None
    flat = {"chat_id": "c", "id": "a1", "user_id": "bob", "user": {"id": "bob"}, "messages": []}
    assert bodies.turn_ids(flat).user_id is None


def test_every_body_field_naming_a_user_is_a_claim() -> None:
    body = forged_inlet("bob")
    body["user_id"] = "carol"
    body["user"] = {"id": "dave"}
    body[shadow.ECHO_CTX_KEY] = {"user_id": "erin"}
    claims = bodies.user_claims(body)
    assert {(claim.field, claim.user_id) for claim in claims} == {
        ("metadata.user_id", "bob"),
        ("metadata.user_message.user_id", "bob"),
        ("metadata.user_message.user.id", "bob"),
        ("user_id", "carol"),
        ("user.id", "dave"),
        ("echo_ctx.user_id", "erin"),
    }
    assert bodies.foreign_claims(body, "bob") == tuple(c for c in claims if c.user_id != "bob")
    # A string `user` is OpenAI's end-user tag (API clients send one), not an Open WebUI user.
    assert bodies.user_claims({"messages": [], "user": "tag-42"}) == ()
    assert len(bodies.foreign_claims(body, None)) == len(claims)  # no identity: every claim is foreign
    # The pipe's payload: its top-level `user` is Open WebUI's own, not a claim.
    payload = {"model": "m", "messages": [], "user": {"id": "mallory"}, "echo_ctx": {"user_id": "bob"}}
    assert [(c.field, c.user_id) for c in bodies.user_claims(payload, payload_user=False)] == [
        ("echo_ctx.user_id", "bob")
    ]


def test_a_body_that_names_its_own_user_claims_nothing_foreign() -> None:
    assert bodies.foreign_claims(forged_inlet("mallory"), "mallory") == ()
    assert bodies.foreign_claims({"messages": []}, "mallory") == ()


def test_the_pipe_inlet_hands_on_the_attached_user_not_the_metadata() -> None:
    context = shadow.from_inlet(forged_inlet("bob"), MALLORY)
    assert context.user_id == "mallory"
    assert shadow.from_inlet(forged_inlet("bob"), None).user_id is None


def test_a_huge_or_odd_claim_is_reported_short() -> None:
    body = forged_inlet("b" * 100_000)
    [claim, *_] = bodies.foreign_claims(body, "mallory")
    assert len(claim.digest) == 16
    assert claim.digest == bodies.foreign_claims(forged_inlet("b" * 100_000), "x")[0].digest


def test_a_mismatch_is_logged_with_digests_and_counted_once_per_call() -> None:
    claims = bodies.foreign_claims(forged_inlet("bob"), "mallory")
    before = sample("echo_identity_mismatch_total", route="filter", phase="inlet")
    with capture_logs() as logs:
        identity.report("filter", "inlet", "mallory", claims)
        identity.report("filter", "inlet", "mallory", ())  # nothing foreign: nothing logged
    assert sample("echo_identity_mismatch_total", route="filter", phase="inlet") == before + 1
    [line] = [entry for entry in logs if entry["event"] == "identity_mismatch"]
    assert line["user_id"] == "mallory"
    assert line["claimed_fields"] == [
        "metadata.user_id",
        "metadata.user_message.user_id",
        "metadata.user_message.user.id",
    ]
    assert line["claimed_sha256"] == [claims[0].digest]
    assert "bob" not in repr(line)


# -- the captured Open WebUI 0.12.4 calls --------------------------------------------------------------

FILTER_CALLS = [
    "016_inlet_filter_pipe_only.json",
    "017_inlet_filter_all.json",
    "019_inlet_filter_pipe_only.json",
    "024_outlet_stub_pipe.json",
    "026_outlet_filter_all.json",
    "api_nonstream_inlet_first_filter.json",
    "api_nonstream_outlet_last_filter.json",
    "chat_completed_outlet.json",
    "query_generation_task_inlet.json",
    "saved_chat_inlet.json",
    "saved_chat_outlet.json",
    "with_files_inlet.json",
    "tool_flow/001_inlet.json",
    "tool_flow/005_inlet.json",
    "tool_flow/008_outlet.json",
]
CHAT_CALLS = [
    "022_chat_stub_pipe.json",
    "api_nonstream_pipe_chat_completions.json",
    "tool_flow/002_chat.json",
]


@pytest.mark.parametrize("name", FILTER_CALLS)
def test_open_webui_attaches_the_user_to_every_filter_call_and_the_body_agrees(name: str) -> None:
    call = load_fixture(name)["body"]
    user = call["user"]
    assert isinstance(user, dict)
    assert user["id"]
    assert bodies.turn_ids(call["body"], user).user_id == user["id"]
    assert bodies.foreign_claims(call["body"], user["id"]) == ()  # real traffic is never counted


@pytest.mark.parametrize("name", FILTER_CALLS)
def test_a_captured_call_with_a_forged_metadata_user_keeps_the_attached_user(name: str) -> None:
    call = copy.deepcopy(load_fixture(name)["body"])
    body = call["body"]
    body.setdefault("metadata", {})["user_id"] = "bob"  # an outlet has no metadata: a browser adds one
    ids = bodies.turn_ids(body, call["user"])
    assert ids.user_id == call["user"]["id"] != "bob"
    assert [c.field for c in bodies.foreign_claims(body, ids.user_id)] == ["metadata.user_id"]
    assert shadow.from_inlet(body, call["user"]).user_id == call["user"]["id"]


@pytest.mark.parametrize("name", CHAT_CALLS)
def test_the_pipes_chat_call_carries_open_webuis_user_and_no_other(name: str) -> None:
    payload = load_fixture(name)["body"]
    assert payload["user"]["id"]
    assert bodies.user_claims(payload, payload_user=False) == ()


def test_the_fixture_folder_is_where_the_tests_look() -> None:
    assert all((FIXTURES / name).is_file() for name in FILTER_CALLS + CHAT_CALLS)
