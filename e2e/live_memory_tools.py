"""`make openwebui-live`'s check that a user sees and removes what ECHO remembers, from Open WebUI.

Two web UI turns with ECHO's tool server selected (`server:echo`), in Open WebUI's default function
calling mode (native): "what do you remember about me?" makes the fake model call `list_memories`,
which Open WebUI runs against ECHO's tool server with the user's id, and the answer shows what it
returned; "forget that …" makes it call `search_memories`, then `forget_memory` with the id the
search gave, and the memory is gone from ECHO (its row and its vector).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["FORGET", "RECALL", "memory_tool_checks", "model_answer"]

RECALL = "MEMORY-TOOLS: what do you remember about me?"
FORGET = "MEMORY-TOOLS: forget that my daughter takes cello lessons."
_ID = re.compile(r'id\\*"\s*:\s*\\*"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})')
_SUMMARY = re.compile(r'summary\\*"\s*:\s*\\*"((?:[^"\\]|\\[^"])*)')


def _text(content: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in content.get("parts", []) if isinstance(p, dict))


def _results(contents: list[dict[str, Any]], after: int) -> list[dict[str, Any]]:
    return [
        p["functionResponse"]
        for c in contents[after + 1 :]
        for p in c.get("parts", [])
        if "functionResponse" in p
    ]


def model_answer(body: dict[str, Any]) -> list[dict[str, Any]] | str | None:
    """The fake model's answers for this check (None: not a request of this check)."""
    contents = body.get("contents", [])
    asked = [i for i, c in enumerate(contents) if c.get("role", "user") == "user" and _text(c)]
    if not asked:
        return None
    text = _text(contents[asked[-1]]).rstrip()
    results = _results(contents, asked[-1])
    if text.endswith(RECALL):
        if not results:
            return [{"functionCall": {"name": "list_memories", "args": {}}}]
        summaries = _SUMMARY.findall(json.dumps(results, ensure_ascii=False))
        return (
            "I remember: " + " | ".join(summaries) if summaries else f"Nothing: {json.dumps(results)[:300]}"
        )
    if text.endswith(FORGET):
        if not results:
            return [
                {"functionCall": {"name": "search_memories", "args": {"query": "daughter cello lessons"}}}
            ]
        if len(results) == 1:
            found = _ID.search(json.dumps(results))
            if found is None:
                return f"No memory to forget: {json.dumps(results)[:300]}"
            return [{"functionCall": {"name": "forget_memory", "args": {"id": found.group(1)}}}]
        return f"Forgotten: {json.dumps(results[-1])[:300]}"
    return None


def memory_tool_checks(
    check: Callable[[str, bool, Any], None],
    echo_http: httpx.Client,
    user_id: str,
    turn: Callable[[str], str],
    admin_key: str,
) -> None:
    """`turn(question)`: one web UI turn with ECHO's tool server selected, the stored answer's text."""
    admin = {"Authorization": f"Bearer {admin_key}"}
    stored = echo_http.get("/memories", params={"user_id": user_id, "limit": 1000}, headers=admin).json()
    cello = [m for m in stored["data"] if "cello" in m["summary"].lower()]
    answer = turn(RECALL)
    check(
        "'what do you remember about me?': the model calls list_memories, the answer lists the memories",
        bool(cello) and answer.startswith("I remember: ") and cello[0]["summary"][:40] in answer,
        {"answer": answer[:800], "stored": [m["summary"] for m in stored["data"]]},
    )
    answer = turn(FORGET)
    forgotten = re.search(r'forgotten\\*"\s*:\s*\\*"([0-9a-f-]{36})', answer)
    memory_id = forgotten.group(1) if forgotten else ""
    gone = echo_http.get(f"/memories/{memory_id}", params={"user_id": user_id}, headers=admin)
    search = {"user_id": user_id, "query": "daughter cello lessons", "k": 20}
    found = echo_http.post("/memories/search", json=search, headers=admin).json()["data"]
    check(
        "'forget that …': search_memories then forget_memory by its id; the memory and its vector are gone",
        answer.startswith("Forgotten: ")
        and memory_id in {m["id"] for m in cello}
        and gone.status_code == 404
        and memory_id not in {hit["id"] for hit in found},
        {"answer": answer[:800], "status": gone.status_code},
    )
