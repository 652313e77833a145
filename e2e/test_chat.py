"""One chat with the `echo.<model>` pipe through any running hooks service, as Open WebUI would drive it.

Given by hand, for a service with a Gemini key (real or the fake): E2E_HOOKS_URL (e.g. a
`kubectl port-forward` of a tenant's hooks Service, http://127.0.0.1:19099) and E2E_API_KEY (its bearer
key). Skipped when they are unset: the cluster suite's tenants run the offline provider, without pipes.
The LLM behind the pipe is the fake Gemini, which answers "echo: <last user text>": a Google key in
the user's message comes back in the model's answer, and ECHO must mask it there (DESIGN section 7).
The turns are `e2e/conversation.py`'s: bodies shaped as Open WebUI 0.12.4 sends them, every inlet
in priority order (the pipe's own last), the pipe, every outlet (the pipe's first).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import conversation
import pytest
from conversation import Chat, Hooks, User

URL = os.environ.get("E2E_HOOKS_URL", "")
KEY = os.environ.get("E2E_API_KEY", "")
PIPE = "echo.gemini-2.5-flash"

pytestmark = pytest.mark.skipif(not (URL and KEY), reason="E2E_HOOKS_URL/E2E_API_KEY unset: run e2e/run.sh")


@pytest.fixture(scope="module")
def hooks() -> Iterator[Hooks]:
    with Hooks(URL, KEY) as client:
        yield client


@pytest.fixture(scope="module")
def user() -> User:
    return User.new("chat")


def test_the_service_is_ready_and_lists_the_filters_and_the_pipe(hooks: Hooks) -> None:
    service = conversation.check_service(hooks, within=60)  # also: /models refused without the key
    assert PIPE in service.models.pipes, service.models
    assert hooks.http.get("/v1/models").status_code == 200


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_pipe_turn_answers_with_the_key_masked(hooks: Hooks, user: User, stream: bool) -> None:
    key = conversation.fake_google_key()
    chat = Chat(user, model=PIPE, stream=stream)
    said = conversation.turn(hooks, chat, f"Please remember my key {key} for later.")
    assert said.answer.startswith("echo:"), said.answer
    assert "remember my key" in said.answer
    assert key not in said.answer  # the pipe masks what the model said, streamed or not
    assert key not in said.shown


def test_outlets_mask_a_key_in_the_assistant_message(hooks: Hooks, user: User) -> None:
    masked = conversation.masking(hooks, user, model=PIPE)  # the pipe's outlet first, then the filters
    assert masked.counted >= 1


def test_metrics_count_the_turns(hooks: Hooks) -> None:
    metrics = hooks.metrics()  # /metrics needs no key
    assert metrics.has("echo_hook_requests_total")
    assert metrics.total("echo_secrets_masked_total") >= 1
