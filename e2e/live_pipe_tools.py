"""`make openwebui-live`'s check of Open WebUI running its own tool for `echo.<model>` (the rich shadow).

The web UI's chat flow, as Open WebUI 0.12.4's web UI sends it (`../shared/notes/openwebui.md`): a user
Tool `weather`, Open WebUI's default function calling mode (native: no `params.function_calling` in the
request), two turns. The fake model calls `get_weather` with a thought
signature; Open WebUI runs the tool and calls the pipe again with the call but without the signature
(the fake refuses a follow-up without it, as Gemini does), so the answer only arrives when the rich
shadow put it back. The second turn is rebuilt by Open WebUI from its database: the call, its result
and the answer must reach the model with both signatures, bytes exact.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from fakes.gemini_server import FakeGemini, signature_bytes

__all__ = ["model_answer", "tool_flow_checks"]

QUESTION = "TOOL-FLOW: what is the weather in Paris?"
FOLLOW_UP = "TOOL-FLOW: and what should I wear?"
SIG_CALL, SIG_ANSWER = b"webui-call-signature\x00\xff", b"webui-answer-signature\x01\xfe"
TOOL = '''
class Tools:
    def get_weather(self, city: str) -> str:
        """
        Get the current weather of a city.
        :param city: the name of the city
        """
        return f"sunny in {city}, 21 C"
'''
MODEL = "echo.gemini-2.5-flash"


def _text(content: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in content.get("parts", []) if isinstance(p, dict))


def model_answer(body: dict[str, Any]) -> list[dict[str, Any]] | str | None:
    """The fake model's answers for this check (None: not a request of this check)."""
    contents = body.get("contents", [])
    asked = [i for i, c in enumerate(contents) if c.get("role", "user") == "user" and _text(c)]
    text = _text(contents[asked[-1]]).rstrip() if asked else ""
    if text.endswith(QUESTION):
        answered = any("functionResponse" in p for c in contents[asked[-1] + 1 :] for p in c.get("parts", []))
        if not answered:
            call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris", "unit": "celsius"}}}
            return [{**call, "thoughtSignature": base64.b64encode(SIG_CALL).decode()}]
        return [{"text": "It is sunny in Paris.", "thoughtSignature": base64.b64encode(SIG_ANSWER).decode()}]
    if text.endswith(FOLLOW_UP):
        return "A light jacket."
    return None


def _turn(http: httpx.Client, question: str, chat_id: str | None, parent: str | None) -> tuple[str, str]:
    """One web UI turn: the chat's id and the assistant message's id, once Open WebUI stored it done."""
    assistant, user = str(uuid.uuid4()), str(uuid.uuid4())
    body: dict[str, Any] = {
        "model": MODEL,
        "stream": True,
        "tool_ids": ["weather"],
        "messages": [{"role": "user", "content": question}],
        "session_id": "live-pipe-tools",
        "id": assistant,
        "parent_id": parent,
        "user_message": {
            "id": user,
            "parentId": parent,
            "childrenIds": [assistant],
            "role": "user",
            "content": question,
            "timestamp": int(time.time()),
            "models": [MODEL],
        },
    }
    if chat_id is not None:
        body["chat_id"] = chat_id
    started = http.post("/api/chat/completions", json=body)
    started.raise_for_status()
    chat_id = started.json()["chat_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.5)
        stored = http.get(f"/api/v1/chats/{chat_id}").json()
        if stored["chat"]["history"]["messages"].get(assistant, {}).get("done"):
            return chat_id, assistant
    raise TimeoutError(f"Open WebUI did not finish the turn of chat {chat_id} within 60 s")


def tool_flow_checks(check: Callable[[str, bool, Any], None], http: httpx.Client, gemini: FakeGemini) -> None:
    made = http.post(
        "/api/v1/tools/create",
        json={"id": "weather", "name": "weather", "content": TOOL, "meta": {"description": "The weather."}},
    )
    check("a user Tool is created in Open WebUI", made.status_code == 200, made.text[:300])
    chat_id, first = _turn(http, QUESTION, None, None)
    stored = http.get(f"/api/v1/chats/{chat_id}").json()["chat"]["history"]["messages"][first]
    kinds = [item.get("type") for item in stored.get("output", [])]
    follow_up = next(
        r.body
        for r in reversed(gemini.requests)
        if '"functionResponse": {"name": "get_weather"' in json.dumps(r.body["contents"])
    )
    call = next(p for c in follow_up["contents"] for p in c.get("parts", []) if "functionCall" in p)
    check(
        "Open WebUI runs its tool for echo.<model>; the follow-up reaches Gemini with the call's signature",
        stored.get("content") == "It is sunny in Paris."
        and kinds == ["function_call", "function_call_output", "message"]
        and signature_bytes(call.get("thoughtSignature", "")) == SIG_CALL
        and call["functionCall"]["args"] == {"city": "Paris", "unit": "celsius"},
        {"stored": stored, "follow_up": json.dumps(follow_up, ensure_ascii=False)[:1500]},
    )
    _turn(http, FOLLOW_UP, chat_id, first)
    sent = next(
        r.body for r in reversed(gemini.requests) if FOLLOW_UP in json.dumps(r.body, ensure_ascii=False)
    )
    models = [c for c in sent["contents"] if c.get("role") == "model"]
    check(
        "the next turn, rebuilt by Open WebUI from its database, gets both signatures back (bytes exact)",
        len(models) == 2
        and signature_bytes(models[0]["parts"][0].get("thoughtSignature", "")) == SIG_CALL
        and models[1]["parts"][0].get("text") == "It is sunny in Paris."
        and signature_bytes(models[1]["parts"][0].get("thoughtSignature", "")) == SIG_ANSWER,
        json.dumps(sent, ensure_ascii=False)[:1500],
    )
