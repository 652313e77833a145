"""A real Open WebUI 0.12.4 driven as its web UI drives a saved chat, for benches and live checks.

`openwebui_env` (from `openwebui_live.py`, whose live checks start Open WebUI with it) is the offline
environment (one OpenAI connection, no Ollama, no title, tag, follow-up nor query generation, no
embedding model), plus the caller's settings; `start_openwebui` starts `open-webui serve` on
127.0.0.1 with it and waits for `/health`; `sign_up` makes the first (admin) user and an API key.

`SavedChat` plays turns of one saved chat as the web UI does (each turn names the chat, its user
message with its `parentId` and the assistant message id to fill), but without a socket session:
Open WebUI then runs the turn synchronously and answers the completion itself, after saving it, its
outlets and its background tasks started (observed with 0.12.4: `main.chat_completion` runs
`process_chat` inline when the body has no `session_id`). Open WebUI loads the branch from its
database, so the body carries only the system prompt and the new user message. `edit` replaces an
earlier user message as the web UI's "edit" does: a sibling user message under the same parent,
the turn answered on that new branch.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from openwebui_live import OPENWEBUI, openwebui_env, wait_for

__all__ = ["SavedChat", "Turn", "openwebui_env", "sign_up", "start_openwebui"]


def start_openwebui(
    work: Path, port: int, env: dict[str, str], within: float = 300
) -> subprocess.Popen[bytes]:
    """`open-webui serve` on 127.0.0.1:``port``, its log in ``work``/webui.log, once `/health` answers."""
    log = (work / "webui.log").open("wb")
    process = subprocess.Popen(
        [str(OPENWEBUI), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/health", within, "true")
    except BaseException:
        process.terminate()
        process.wait(timeout=30)
        raise
    return process


def sign_up(webui: str) -> tuple[str, str, str]:
    """The first user (an admin): its token, its id and an API key of it."""
    signup = httpx.post(
        f"{webui}/api/v1/auths/signup",
        json={"name": "Bench", "email": "bench@example.com", "password": "bench-check-123"},
        timeout=60,
    ).json()
    api_key = httpx.post(
        f"{webui}/api/v1/auths/api_key", headers={"Authorization": f"Bearer {signup['token']}"}, timeout=60
    ).json()["api_key"]
    return signup["token"], signup["id"], api_key


@dataclass
class Turn:
    """One turn played: its user message id and text, the assistant id, the answer and the seconds
    from sending to Open WebUI's answer."""

    user_id: str
    text: str
    answer_id: str
    answer: str
    started: float
    seconds: float


@dataclass
class SavedChat:
    """A saved chat of ``http``'s user (a client with the user's bearer token and Open WebUI's base URL)."""

    http: httpx.Client
    model: str
    system: str
    features: dict[str, Any] = field(default_factory=dict)
    chat_id: str = ""
    turns: list[Turn] = field(default_factory=list)  # the main branch, in order
    parents: dict[str, str | None] = field(default_factory=dict)  # user message id -> its parent

    def create(self) -> str:
        created = self.http.post(
            "/api/v1/chats/new",
            json={
                "chat": {
                    "title": "bench",
                    "models": [self.model],
                    "history": {"messages": {}},
                    "messages": [],
                }
            },
        )
        created.raise_for_status()
        self.chat_id = created.json()["id"]
        return self.chat_id

    def send(self, text: str) -> Turn:
        """The next turn of the main branch."""
        parent = self.turns[-1].answer_id if self.turns else None
        turn = self._turn(text, parent)
        self.turns.append(turn)
        return turn

    def edit(self, index: int, text: str) -> Turn:
        """The main branch's user message ``index`` replaced by ``text``: a new branch, answered."""
        return self._turn(text, self.parents[self.turns[index].user_id])

    def _turn(self, text: str, parent: str | None) -> Turn:
        user_id, answer_id = str(uuid.uuid4()), str(uuid.uuid4())
        self.parents[user_id] = parent
        body = {
            "model": self.model,
            "stream": False,
            "chat_id": self.chat_id,
            "id": answer_id,
            "parent_id": parent,
            "user_message": {
                "id": user_id,
                "parentId": parent,
                "childrenIds": [answer_id],
                "role": "user",
                "content": text,
                "timestamp": int(time.time()),
                "models": [self.model],
            },
            "messages": [{"role": "system", "content": self.system}, {"role": "user", "content": text}],
            "features": self.features,
        }
        started = time.monotonic()
        answered = self.http.post("/api/chat/completions", json=body)
        seconds = time.monotonic() - started
        answered.raise_for_status()
        choices = answered.json().get("choices") or [{}]
        answer = (choices[0].get("message") or {}).get("content") or ""
        return Turn(user_id, text, answer_id, answer, started, seconds)
