"""The README says only what the code does: its "not active / not built yet" rows are checked here.

When a capability lands, these tests fail until the README's table says it works.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from echo.filters.pipe import PipeFilter

README = Path(__file__).resolve().parents[2] / "README.md"


def capability_rows() -> dict[str, str]:
    """The "What works in this version" table: capability cell -> state cell."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## What works in this version", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and not set(cells[1]) <= {"-"} and cells[0] != "capability":
            rows[cells[0]] = cells[1]
    return rows


def row_about(fragment: str) -> str:
    matches = [state for capability, state in capability_rows().items() if fragment in capability]
    assert len(matches) == 1, f"README's capability table has no single row about {fragment!r}"
    return matches[0]


def test_the_opening_does_not_claim_inactive_capabilities() -> None:
    opening = " ".join(README.read_text(encoding="utf-8").split("## ", 1)[0].split())
    assert re.search(
        r"the foundation, secret masking, context compression, long-term memory, attachments and the rich"
        r" shadow are active",
        opening,
    )
    assert "not built yet" not in opening


def test_the_rich_shadow_is_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    assert row_about("Rich shadow (seed 001)").startswith("working")
    assert row_about("`echo.<model>` Gemini pipe models").startswith("working")
    assert "come later" not in row_about("`echo.<model>` Gemini pipe models")
    assert "rich shadow" in PipeFilter("gemini-2.5-flash", lambda counts: None).description


def test_attachments_are_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    assert row_about("Attachments (`echo_context` inlet").startswith("working")
    listing = {model["id"]: model for model in client.get("/models").json()["data"]}
    assert "ephemeral RAG" in listing["echo_context"]["description"]
    assert "pass-through" not in listing["echo_context"]["description"]


def test_memory_is_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    assert row_about("`echo_memory`").startswith("working")
    assert row_about("`/memories`").startswith("working")
    listing = {model["id"]: model for model in client.get("/models").json()["data"]}
    assert "distillation" in listing["echo_memory"]["description"]
    assert client.get("/tools/openapi.json").status_code == 200


def test_compression_is_said_to_work_in_readme_and_in_models(client: httpx.Client) -> None:
    state = row_about("`echo_compression`")
    assert state.startswith("working")
    assert "not active" not in state
    listing = {model["id"]: model for model in client.get("/models").json()["data"]}
    description = listing["echo_compression"]["description"]
    assert "return the body unchanged" not in description
    assert "summary" in description
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"chat_id": "c1"}}
    answer = client.post("/echo_compression/filter/inlet", json={"body": body, "user": {"id": "u"}})
    assert answer.json() == body  # a short chat has nothing to compress


def test_search_session_context_is_said_to_be_served(client: httpx.Client) -> None:
    assert row_about("`search_session_context`").startswith("working")
    answer = client.post("/tools/search_session_context", json={"source_id": "s", "query": "q"})
    assert answer.status_code == 422  # served: it names the missing x-openwebui-user-id header
    assert "x-openwebui-user-id" in answer.text
    paths = client.get("/tools/openapi.json").json()["paths"]
    assert "/tools/search_session_context" in paths


def test_manual_compaction_is_said_to_be_served(client: httpx.Client, admin: dict[str, str]) -> None:
    text = README.read_text(encoding="utf-8")
    assert "manual compaction" not in row_about("`echo_compression`")  # not among what "comes later"
    compression = text.split("## Context compression", 1)[1].split("\n## ", 1)[0]
    assert "compact" not in compression.split("Not yet:", 1)[-1].split("\n\n", 1)[0]
    http_section = text.split("## HTTP interface", 1)[1].split("\n## ", 1)[0]
    assert "POST /chats/{chat_id}/compact" in http_section
    assert "`compact CHAT_ID" in text.split("`echoctl` commands:", 1)[1].split("\n\n", 1)[0]
    answer = client.post("/chats/c1/compact", json={"user_id": "u1"}, headers=admin)
    assert answer.status_code == 503  # served; this app has no store behind it
    assert "no store" in answer.json()["detail"]
