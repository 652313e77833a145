"""A chat loop against a tenant's hooks Service while something breaks: every turn timed and kept.

A turn is what Open WebUI sends for one user message and its answer: each filter's inlet (in priority
order), then each outlet, under one chat id. The loop runs in a thread until stopped and records every
failed turn with its time and error, so a fault test can say how many turns failed and when.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

FILTERS = ("echo_context", "echo_compression", "echo_memory")
PIPE = "echo.gemini-2.5-flash"


@dataclass
class Failure:
    at: float
    error: str


@dataclass
class ChatLoop:
    url: str
    key: str
    user_id: str = "fault-user"
    pause: float = 0.05
    turns: int = 0
    failures: list[Failure] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def user(self) -> dict[str, str]:
        return {"id": self.user_id, "email": f"{self.user_id}@example.com", "name": "Fault", "role": "user"}

    def turn(self, http: httpx.Client, chat_id: str, history: list[dict[str, Any]], number: int) -> None:
        message_id = str(uuid.uuid4())
        question = f"Turn {number}: what about the weather?"
        history.append({"id": message_id, "role": "user", "content": question})
        body: dict[str, Any] = {
            "model": PIPE,
            "stream": True,
            "messages": [{"role": m["role"], "content": m["content"]} for m in history],
            "metadata": {"chat_id": chat_id, "message_id": message_id, "user_id": self.user_id, "files": []},
        }
        for filter_id in FILTERS:
            response = http.post(f"/{filter_id}/filter/inlet", json={"body": body, "user": self.user()})
            response.raise_for_status()
            body = response.json()
        answer_id = str(uuid.uuid4())
        history.append({"id": answer_id, "role": "assistant", "content": f"Sunny, for turn {number}."})
        outlet: dict[str, Any] = {"model": PIPE, "chat_id": chat_id, "id": answer_id, "messages": history}
        for filter_id in FILTERS:
            response = http.post(f"/{filter_id}/filter/outlet", json={"body": outlet, "user": self.user()})
            response.raise_for_status()
            outlet = response.json()

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as http:
            chat_id, history = f"fault-{uuid.uuid4()}", []
            while not self._stop.is_set():
                number, before = self.turns + 1, len(history)
                try:
                    self.turn(http, chat_id, history, number)
                except httpx.HTTPError as error:
                    self.failures.append(Failure(time.monotonic(), f"{type(error).__name__}: {error}"))
                    del history[before:]
                self.turns = number
                if len(history) > 40:  # a new chat now and then keeps turns small
                    chat_id, history = f"fault-{uuid.uuid4()}", []
                time.sleep(self.pause)

    def __enter__(self) -> ChatLoop:
        self._thread = threading.Thread(target=self.run, name="chat-loop", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def wait_turns(self, count: int, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        target = self.turns + count
        while self.turns < target:
            assert time.monotonic() < deadline, f"the chat loop made {self.turns} turns, not {target}"
            time.sleep(0.2)
