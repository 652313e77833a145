"""A whole conversation driven into an ECHO hooks service the way Open WebUI 0.12.4 drives it.

Over HTTP only (what a test behind a `kubectl port-forward` has): the Pipelines protocol with the
bodies of `../shared/fixtures/owui-0.12.4/` — `POST /{filter}/filter/inlet` with `{"body", "user"}`
(the chat request with `metadata`: chat, message and session ids, the `user_message`, `files` as
references `{type, id, name}`), every filter in ascending priority and a pipe's own inlet last; the
model's answer (the `echo.<model>` pipe's `/chat/completions`, or an answer the test gives for a
model of another connection); then the flat outlet body (`chat_id`, `id`, messages with ids,
`output` items) through the pipe's outlet first and every filter's. The tool server gets the bearer
key and Open WebUI's `x-openwebui-user-*`, `x-openwebui-chat-id` and `x-openwebui-message-id`
headers. What Open WebUI stores after the outlets (the outlet's text) is the next turn's history.

Each step asserts one capability with a message that says what was expected and what was seen, and
returns what it observed:

- `check_service`: `/healthz`, `/readyz` ready, `/models` lists the filters (with priorities) and the
  pipes, a call without the key is refused.
- `configure`: makes the given valves the ones in force — already in force (a mounted valves file,
  the ConfigMap of an `EchoDeployment`'s `spec.valves.inline`), else `POST /{id}/valves/update`
  with the whole object; a file-managed service (409) is waited for (`within`, after the test
  applied `spec_patch` to its EchoDeployment), then fails naming what to set. `quick_valves` is
  the mapping that makes the long conversation summarise within a minute.
- `turn`: one full turn; returns the body the model would see (`Turn.sent`). `peek`: the inlets
  only, recording nothing (what the steps poll with).
- `long_conversation`: turns until the chat is well past the compression threshold, then waits until
  the next inlet carries the `<echo_summary>` that a background `summary` job wrote.
- `memory_across_chats`: facts told in one chat become a memory (distilled in the background) that a
  later chat of the same user gets in an `<echo_memories>` block; another user gets nothing.
- `large_attachment`: a file many times `MAX_DIRECT_TEXT_SIZE` goes to the per-chat RAG (a
  `rag_ephemeral` block instead of its text) and `search_session_context` finds a passage of it.
  Open WebUI sends files to a Pipelines filter as references only, so ECHO reads them from Open
  WebUI's files API: the service needs `ECHO_OPENWEBUI_URL`/`ECHO_OPENWEBUI_API_KEY` pointing at a
  file server the test can put a file on (`FileHost`; `tests/fakes/openwebui_files.py` is one).
- `masking`: a fake Google key in an assistant answer comes back masked from the outlets (content
  and `output` items), is not in the next turn's history, and `/metrics` counts it.

Everything works with the `offline` LLM provider (extractive summaries, heuristic distillation).
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx

__all__ = [
    "GOOGLE_LABEL",
    "OTHER_MODEL",
    "Chat",
    "FileHost",
    "Hooks",
    "Ingested",
    "Masked",
    "Metrics",
    "Models",
    "Recalled",
    "Service",
    "StepFailed",
    "Summarised",
    "Turn",
    "User",
    "check_service",
    "configure",
    "fake_google_key",
    "large_attachment",
    "long_conversation",
    "masking",
    "memory_across_chats",
    "peek",
    "quick_valves",
    "spec_patch",
    "turn",
]

T = TypeVar("T")

OTHER_MODEL = "e2e-offline-model"
"""A model of another Open WebUI connection: no `model_thresholds` entry, so the valves' thresholds hold."""
GOOGLE_LABEL = "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]"
SUMMARY_OPEN = "<echo_summary"
MEMORIES_OPEN = "<echo_memories"
PENDING_NOTE = "en cours de génération"  # the pending rag_ephemeral block (echo.domain.attachments.blocks)
_SUMMARY_BLOCK = re.compile(
    r'\A\s*<echo_summary\b[^>]*\bcovers="(\d+)"[^>]*>(.*)</echo_summary\s*>\s*\Z', re.S
)
_MEMORIES_BLOCK = re.compile(r"<echo_memories\b.*?</echo_memories\s*>", re.S)
_SMART_CONTEXT = re.compile(r"<smart_context\b([^>]*)>(.*?)</smart_context\s*>", re.S)
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
# What Open WebUI removes from the body before it calls the model (notes/openwebui.md).
_NOT_SENT_TO_THE_MODEL = ("metadata", "features", "tool_ids", "files", "folder_id", "skill_ids")


class StepFailed(AssertionError):
    """A capability did not behave as Open WebUI's user would expect; the message says how."""


def _fail(what: str, seen: object = "") -> StepFailed:
    shown = seen if isinstance(seen, str) else json.dumps(seen, ensure_ascii=False, default=str)
    return StepFailed(f"{what}\n  seen: {shown[:1500]}" if shown else what)


def _poll(what: str, probe: Callable[[], T | None], within: float, every: float = 1.0) -> tuple[T, float]:
    """`probe()` until it returns something (not None); (that value, seconds waited). `what` says what
    was awaited; the last observation goes in the failure (a probe may raise StepFailed to say it)."""
    started = time.monotonic()
    last: object = "nothing"
    while True:
        try:
            found = probe()
        except (StepFailed, httpx.TransportError) as error:
            found, last = None, error
        if found is not None:
            return found, time.monotonic() - started
        if time.monotonic() - started > within:
            raise _fail(f"{what}: not within {within:.0f} s", str(last))
        time.sleep(every)


def fake_google_key(tag: str = "E2E") -> str:
    """A syntactically valid Google API key (AIza + 35 characters) that is no one's, assembled at run
    time so that no secret scanner flags this file."""
    body = (tag + "k9" * 20)[:35]
    return "AIza" + body


@dataclass(frozen=True)
class User:
    """An Open WebUI user as it reaches ECHO: the hook call's `user` object, the tool call's headers."""

    id: str
    name: str
    email: str
    role: str = "user"

    @classmethod
    def new(cls, name: str) -> User:
        """A user of this run only (a persistent tenant keeps earlier runs' memories)."""
        user_id = f"e2e-{name.lower()}-{uuid.uuid4().hex[:8]}"
        return cls(user_id, name, f"{user_id}@example.com")

    def hook_user(self) -> dict[str, str]:
        return {"id": self.id, "email": self.email, "name": self.name, "role": self.role}

    def headers(self) -> dict[str, str]:
        """What Open WebUI forwards with a tool call (`ENABLE_FORWARD_USER_INFO_HEADERS`)."""
        return {
            "x-openwebui-user-id": self.id,
            "x-openwebui-user-name": self.name,
            "x-openwebui-user-email": self.email,
            "x-openwebui-user-role": self.role,
        }


@dataclass(frozen=True)
class Metrics:
    """One scrape of `/metrics`: sample name → [(labels, value)]."""

    samples: Mapping[str, Sequence[tuple[Mapping[str, str], float]]]

    @classmethod
    def parse(cls, text: str) -> Metrics:
        samples: dict[str, list[tuple[Mapping[str, str], float]]] = {}
        line_re = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
        for line in text.splitlines():
            found = line_re.match(line)
            if not found or line.startswith("#"):
                continue
            name, labels, value = found.groups()
            pairs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels or ""))
            try:
                samples.setdefault(name, []).append((pairs, float(value)))
            except ValueError:
                continue
        return cls(samples)

    def total(self, name: str, **labels: str) -> float:
        """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
        return sum(
            value
            for found, value in self.samples.get(name, ())
            if all(found.get(k) == v for k, v in labels.items())
        )

    def has(self, name: str) -> bool:
        return name in self.samples


@dataclass(frozen=True)
class Models:
    """What `GET /models` lists: filter ids in the order Open WebUI runs them, and the pipe models."""

    filters: tuple[str, ...]
    priorities: Mapping[str, int]
    pipes: tuple[str, ...]


class Hooks:
    """A client of one ECHO hooks service: `base_url` (`http://127.0.0.1:PORT`, a port-forward),
    the bearer key Open WebUI's connection carries, and the admin key of the memory API if known."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        admin_key: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = base_url.rstrip("/")
        self._timeout = timeout
        self._transport = transport
        self.http = self._client(api_key)
        self.admin = self._client(admin_key) if admin_key else None
        self.anonymous = self._client(None)
        self._models: Models | None = None

    def _client(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(
            base_url=self.url, headers=headers, timeout=self._timeout, transport=self._transport
        )

    def close(self) -> None:
        for client in (self.http, self.admin, self.anonymous):
            if client is not None:
                client.close()

    def __enter__(self) -> Hooks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def public(self, path: str) -> httpx.Response:
        """A GET without any key (what a probe, Prometheus or Open WebUI's openapi fetch send)."""
        return self.anonymous.get(path)

    def readyz(self) -> tuple[int, dict[str, Any]]:
        answer = self.public("/readyz")
        try:
            return answer.status_code, answer.json()
        except ValueError:
            return answer.status_code, {"text": answer.text[:500]}

    def wait_ready(self, within: float = 180.0, *, degraded_by: Sequence[str] = ()) -> dict[str, Any]:
        """`/readyz` until 200 `ready` (503 while the embedder loads); its checks. `degraded_by`: checks
        whose failure is expected (a tenant without a vector store: `vectors`), so 200 `degraded` with
        only those failing counts as ready."""

        def probe() -> dict[str, Any] | None:
            status, body = self.readyz()
            if status == 200 and body.get("status") == "ready":
                return body
            failing = {name for name, check in (body.get("checks") or {}).items() if not check.get("ok")}
            if status == 200 and body.get("status") == "degraded" and failing <= set(degraded_by):
                return body
            raise _fail(f"/readyz answered {status}", body)

        return _poll("the service to be ready (/readyz 200 ready)", probe, within, every=0.5)[0]

    def models(self) -> Models:
        if self._models is None:
            answer = self.http.get("/models")
            if answer.status_code != 200:
                raise _fail(f"GET /models answered {answer.status_code}", answer.text)
            data = answer.json().get("data", [])
            filters = {
                m["id"]: int(m["pipeline"].get("priority", 0))
                for m in data
                if m.get("pipeline", {}).get("type") == "filter"
            }
            pipes = tuple(m["id"] for m in data if m.get("pipeline", {}).get("type") == "pipe")
            ordered = tuple(sorted(filters, key=lambda f: (filters[f], f)))
            self._models = Models(ordered, filters, pipes)
        return self._models

    def hook(self, hook_id: str, phase: str, body: Mapping[str, Any], user: User) -> dict[str, Any]:
        """One filter call; Open WebUI fails the chat on anything but a 200 with a JSON object."""
        answer = self.http.post(f"/{hook_id}/filter/{phase}", json={"body": body, "user": user.hook_user()})
        if answer.status_code != 200:
            raise _fail(
                f"{hook_id} {phase} answered {answer.status_code} (Open WebUI fails the chat)", answer.text
            )
        try:
            new = answer.json()
        except ValueError as error:
            raise _fail(f"{hook_id} {phase} answered 200 without JSON", answer.text) from error
        if not isinstance(new, dict) or not isinstance(new.get("messages"), list):
            raise _fail(f"{hook_id} {phase} answered something that is not a chat body", new)
        return new

    def complete(self, request: Mapping[str, Any], user: User, chat_id: str) -> str:
        """The pipe's `/chat/completions` as Open WebUI calls it; the answer's text (streamed or not)."""
        headers = {**user.headers(), "x-openwebui-chat-id": chat_id}
        if not request.get("stream"):
            answer = self.http.post("/chat/completions", json=request, headers=headers)
            if answer.status_code != 200:
                raise _fail(f"the pipe answered {answer.status_code}", answer.text)
            return str(answer.json()["choices"][0]["message"].get("content") or "")
        parts: list[str] = []
        with self.http.stream("POST", "/chat/completions", json=request, headers=headers) as answer:
            if answer.status_code != 200:
                raise _fail(f"the streamed pipe answered {answer.status_code}", answer.read().decode())
            for line in answer.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[len("data: ") :]).get("choices", []):
                    parts.append(choice.get("delta", {}).get("content") or "")
        return "".join(parts)

    def tool(
        self,
        operation: str,
        payload: Mapping[str, Any],
        user: User,
        *,
        chat_id: str | None = None,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """A tool-server call as Open WebUI makes it: the key and the user's (and chat's) headers."""
        headers = user.headers()
        if chat_id:
            headers["x-openwebui-chat-id"] = chat_id
        if message_id:
            headers["x-openwebui-message-id"] = message_id
        answer = self.http.post(f"/tools/{operation}", json=payload, headers=headers)
        if answer.status_code != 200:
            raise _fail(f"tool {operation} answered {answer.status_code}", answer.text)
        found: dict[str, Any] = answer.json()
        return found

    def metrics(self) -> Metrics:
        answer = self.public("/metrics")
        if answer.status_code != 200:
            raise _fail(f"GET /metrics answered {answer.status_code}", answer.text)
        return Metrics.parse(answer.text)

    def valves(self, filter_id: str) -> dict[str, Any]:
        answer = self.http.get(f"/{filter_id}/valves")
        if answer.status_code != 200:
            raise _fail(f"GET /{filter_id}/valves answered {answer.status_code}", answer.text)
        found: dict[str, Any] = answer.json()
        return found

    def memories(self, user_id: str) -> dict[str, Any]:
        """`GET /memories?user_id=` with the admin key (None admin key: StepFailed)."""
        if self.admin is None:
            raise _fail("the memory API needs the admin key (ECHO_ADMIN_KEY)")
        answer = self.admin.get("/memories", params={"user_id": user_id})
        if answer.status_code != 200:
            raise _fail(f"GET /memories answered {answer.status_code}", answer.text)
        found: dict[str, Any] = answer.json()
        return found


class FileHost(Protocol):
    """Where a test puts a file the way Open WebUI holds an upload, for ECHO to read through Open
    WebUI's files API (`GET /api/v1/files/{id}`: owner, name, type, size, extracted text). Returns the
    `files` item the web UI then sends: `{"type": "file", "id", "name"}`.
    `tests/fakes/openwebui_files.FakeFiles` is one."""

    def add(
        self,
        file_id: str,
        name: str,
        content_type: str,
        data: bytes,
        text: str | None = None,
        *,
        owner: str = ...,
    ) -> dict[str, Any]: ...


@dataclass
class Chat:
    """One Open WebUI chat of `user` with `model`: its id and its history as Open WebUI stores it
    (the outlets' text), from which each turn's inlet body is built."""

    user: User
    model: str = OTHER_MODEL
    system: str | None = "You are a helpful assistant."
    stream: bool = False
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    session_id: str = field(default_factory=lambda: f"e2e-{uuid.uuid4().hex[:12]}")
    history: list[dict[str, Any]] = field(default_factory=list)

    def is_pipe(self, models: Models) -> bool:
        return self.model in models.pipes

    def _model_info(self, pipe: bool) -> dict[str, Any]:
        info: dict[str, Any] = {
            "id": self.model,
            "name": self.model,
            "object": "model",
            "created": 0,
            "owned_by": "openai",
            "connection_type": "external",
        }
        if pipe:
            info["pipeline"] = {"type": "pipe", "valves": False}
        return {**info, "openai": dict(info), "provider": "", "urlIdx": 0, "actions": [], "filters": []}

    def inlet_body(
        self,
        text: str,
        *,
        user_message_id: str,
        assistant_id: str,
        files: Sequence[Mapping[str, Any]] = (),
        pipe: bool = False,
    ) -> dict[str, Any]:
        """The chat request of this turn as Open WebUI 0.12.4 sends it to a filter's inlet."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.system}] if self.system else []
        messages += [{"role": m["role"], "content": m["content"]} for m in self.history]
        messages.append({"role": "user", "content": text})
        attached = [dict(item) for item in files] or None
        parent = self.history[-1]["id"] if self.history else None
        user_message: dict[str, Any] = {
            "id": user_message_id,
            "role": "user",
            "content": text,
            "parentId": parent,
            "childrenIds": [assistant_id],
            "timestamp": int(time.time()),
            "models": [self.model],
            "user_id": self.user.id,
            "user": {"id": self.user.id, "name": self.user.name},
        }
        if attached:
            user_message["files"] = attached
        body: dict[str, Any] = {"model": self.model, "stream": self.stream, "messages": messages}
        if attached:
            body["files"] = attached
        body["metadata"] = {
            "user_id": self.user.id,
            "internal": False,
            "chat_id": self.id,
            "user_message": user_message,
            "user_message_id": user_message_id,
            "assistant_message_id": None,
            "regeneration_message_id": None,
            "session_id": self.session_id,
            "folder_id": None,
            "filter_ids": [],
            "tool_ids": None,
            "tool_servers": None,
            "files": attached,
            "features": {},
            "variables": {},
            "chat_variables": {},
            "model": self._model_info(pipe),
            "direct": False,
            "params": {"function_calling": "native"},
            "message_id": assistant_id,
            "include_file_context": False,
        }
        return body

    def outlet_body(self, user_message: Mapping[str, Any], assistant: Mapping[str, Any]) -> dict[str, Any]:
        """The flat body Open WebUI sends to the outlets after the model answered."""
        messages = [
            {k: v for k, v in m.items() if k != "files"} for m in (*self.history, user_message, assistant)
        ]
        return {
            "model": self.model,
            "messages": messages,
            "filter_ids": [],
            "chat_id": self.id,
            "session_id": self.session_id,
            "id": assistant["id"],
        }


@dataclass(frozen=True)
class Turn:
    """One turn: `inlet` the body after every inlet, `sent` what the model sees (Open WebUI drops
    `metadata`, `files`… before calling it), `answer` the model's text, `outlet` the body after
    every outlet, `shown` the assistant text Open WebUI stores and shows."""

    chat_id: str
    user_message_id: str
    assistant_id: str
    inlet: dict[str, Any]
    sent: dict[str, Any]
    answer: str
    outlet: dict[str, Any]
    shown: str

    def last_user_text(self) -> str:
        return _text(self.sent["messages"][-1])


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def model_request(inlet: Mapping[str, Any], user: User, *, pipe: bool) -> dict[str, Any]:
    """What Open WebUI sends the model after the inlets: the body less what it strips; a pipe gets
    the user object in the body."""
    sent = {k: v for k, v in inlet.items() if k not in _NOT_SENT_TO_THE_MODEL}
    if pipe:
        sent["user"] = {"name": user.name, "id": user.id, "email": user.email, "role": user.role}
    return sent


def run_inlets(hooks: Hooks, chat: Chat, body: dict[str, Any]) -> dict[str, Any]:
    """Every filter's inlet in ascending priority, then the pipe's own (Open WebUI's order)."""
    models = hooks.models()
    order = [*models.filters, *([chat.model] if chat.is_pipe(models) else [])]
    for hook_id in order:
        body = hooks.hook(hook_id, "inlet", body, chat.user)
    return body


def run_outlets(hooks: Hooks, chat: Chat, body: dict[str, Any]) -> dict[str, Any]:
    """The pipe's outlet first, then every filter's in ascending priority (Open WebUI's order)."""
    models = hooks.models()
    order = [*([chat.model] if chat.is_pipe(models) else []), *models.filters]
    for hook_id in order:
        body = hooks.hook(hook_id, "outlet", body, chat.user)
    return body


def peek(hooks: Hooks, chat: Chat, text: str, *, files: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The body the model would see if the user sent `text` now (inlets only: nothing is recorded).
    Inlets are read-only for ECHO except the file registry, so a test may poll with it."""
    pipe = chat.is_pipe(hooks.models())
    body = chat.inlet_body(
        text, user_message_id=str(uuid.uuid4()), assistant_id=str(uuid.uuid4()), files=files, pipe=pipe
    )
    return model_request(run_inlets(hooks, chat, body), chat.user, pipe=pipe)


def turn(
    hooks: Hooks,
    chat: Chat,
    text: str,
    *,
    answer: str | None = None,
    files: Sequence[Mapping[str, Any]] = (),
) -> Turn:
    """One full turn of `chat`: the inlets, the model (the pipe when `answer` is None, else `answer`
    stands for a model of another connection), the outlets; the history gets what Open WebUI stores."""
    pipe = chat.is_pipe(hooks.models())
    if answer is None and not pipe:
        raise _fail(
            f"{chat.model!r} is not a pipe of this service: give the assistant's answer", hooks.models()
        )
    user_message_id, assistant_id = str(uuid.uuid4()), str(uuid.uuid4())
    body = chat.inlet_body(
        text, user_message_id=user_message_id, assistant_id=assistant_id, files=files, pipe=pipe
    )
    inlet = run_inlets(hooks, chat, body)
    last = inlet["messages"][-1] if inlet["messages"] else {}
    if last.get("role") != "user" or not _text(last).rstrip().endswith(text.rstrip()):
        raise _fail("after the inlets the last message is no longer the user's question", last)
    sent = model_request(inlet, chat.user, pipe=pipe)
    said = hooks.complete(sent, chat.user, chat.id) if answer is None else answer
    now = int(time.time())
    user_message: dict[str, Any] = {
        "id": user_message_id,
        "role": "user",
        "content": text,
        "info": None,
        "timestamp": now,
    }
    if files:
        user_message["files"] = [dict(item) for item in files]
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    assistant: dict[str, Any] = {
        "id": assistant_id,
        "role": "assistant",
        "content": said,
        "info": {"usage": usage},
        "timestamp": now,
        "output": [
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": said}],
            }
        ],
        "usage": usage,
        "finish_reason": "stop",
    }
    outlet = run_outlets(hooks, chat, chat.outlet_body(user_message, assistant))
    stored = next((m for m in outlet["messages"] if m.get("id") == assistant_id), None)
    if stored is None:
        raise _fail("the outlets lost the assistant message (matched by its id)", outlet["messages"][-2:])
    chat.history += [user_message, stored]
    return Turn(chat.id, user_message_id, assistant_id, inlet, sent, said, outlet, _text(stored))


# --- valves -----------------------------------------------------------------------------------------


def quick_valves(
    *,
    threshold_tokens: int = 400,
    max_context_tokens: int = 4000,
    keep_last: int = 2,
    max_summary_tokens: int = 200,
    max_direct_text_size: int = 4096,
    summary_words: int = 80,
) -> dict[str, dict[str, Any]]:
    """Valves under which the whole conversation runs in about a minute on the offline provider:
    a compression threshold a dozen turns reach, a summary budget within the 80% rule of its own
    window (`summary_model_max_context`, so no model's entry decides it), and a small inline limit so
    a 32 KiB file is already a large one. The chat's model must have no `model_thresholds` entry
    (`OTHER_MODEL` has none; `long_conversation` checks), or that entry's thresholds hold. As a
    valves file, an EchoDeployment's `spec.valves.inline` (`spec_patch`), or the bodies of
    `valves/update` (`configure`). Memory keeps its defaults (a window every 5 messages)."""
    return {
        "echo_compression": {
            "compression_threshold_tokens": threshold_tokens,
            "max_context_tokens": max_context_tokens,
            "keep_first": 1,
            "keep_last": keep_last,
            "max_summary_tokens": max_summary_tokens,
            "summary_model_max_context": max(max_context_tokens, math.ceil(max_summary_tokens / 0.8) + 1),
        },
        "echo_context": {
            "MAX_DIRECT_TEXT_SIZE": max_direct_text_size,
            "ECHO_MR_SUMMARY_MAX_WORDS": summary_words,
        },
    }


def _same(current: object, wanted: object) -> bool:
    if isinstance(wanted, Mapping) and isinstance(current, str):
        try:
            current = json.loads(current)
        except ValueError:
            return False
    if isinstance(wanted, bool) or isinstance(current, bool):
        return current == wanted
    if isinstance(wanted, int | float) and isinstance(current, int | float | str):
        try:
            return float(current) == float(wanted)
        except ValueError:
            return False
    return current == wanted


def _differ(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The wanted valves not in force: name → (in force, wanted)."""
    return {k: (current.get(k), v) for k, v in wanted.items() if not _same(current.get(k), v)}


def spec_patch(valves: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The merge patch of an EchoDeployment that puts `valves` in its valves file (`kubectl patch
    --type merge -p …`): the operator rewrites the ConfigMap, the kubelet refreshes the mounted file
    (within about a minute) and ECHO hot-reloads it."""
    return {"spec": {"valves": {"inline": {k: dict(v) for k, v in valves.items()}}}}


def configure(
    hooks: Hooks, valves: Mapping[str, Mapping[str, Any]], *, within: float = 0.0
) -> dict[str, dict[str, Any]]:
    """Make `valves` (filter id → valves) the ones in force; the valves in force of each filter.

    Already in force (a mounted valves file: the operator always mounts one) is fine. Otherwise the
    whole object, the current valves with these changed, is posted to `valves/update` as Open WebUI's
    admin page does (it replaces). A service whose valves a file manages answers 409: the step then
    waits up to `within` seconds for the file to say so (after the test applied `spec_patch`), and
    fails saying what to put in the file if it does not."""
    in_force: dict[str, dict[str, Any]] = {}
    for filter_id, wanted in valves.items():
        current = hooks.valves(filter_id)
        if not _differ(current, wanted):
            in_force[filter_id] = current
            continue
        answer = hooks.http.post(f"/{filter_id}/valves/update", json={**current, **wanted})
        if answer.status_code == 409:

            def reloaded(
                filter_id: str = filter_id, wanted: Mapping[str, Any] = wanted
            ) -> dict[str, Any] | None:
                now = hooks.valves(filter_id)
                if _differ(now, wanted):
                    raise _fail("not yet in force (in force, wanted)", _differ(now, wanted))
                return now

            try:
                in_force[filter_id] = _poll(f"{filter_id}'s valves file", reloaded, within)[0]
            except StepFailed as error:
                raise _fail(
                    f"{filter_id}'s valves are managed by a file ({answer.json().get('detail')}) that does "
                    f"not give what the test needs; put them in it (an EchoDeployment: spec_patch(), "
                    f"spec.valves.inline.{filter_id}): {json.dumps(dict(wanted))}",
                    str(error),
                ) from error
            continue
        if answer.status_code != 200:
            raise _fail(f"POST /{filter_id}/valves/update answered {answer.status_code}", answer.text)
        now = hooks.valves(filter_id)
        if _differ(now, wanted):
            raise _fail(
                f"{filter_id}: valves/update answered 200 but these are not in force", _differ(now, wanted)
            )
        in_force[filter_id] = now
    return in_force


# --- the steps --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Service:
    """What `check_service` saw: the listed hooks and `/readyz`'s checks."""

    models: Models
    ready: dict[str, Any]

    @property
    def in_process_worker(self) -> bool:
        """Whether this service runs the jobs itself (embedded/standalone), so its `/metrics` count them."""
        return bool(self.ready.get("checks", {}).get("jobs", {}).get("in_process"))


EXPECTED_FILTERS = ("echo_context", "echo_compression", "echo_memory")


def check_service(hooks: Hooks, *, within: float = 180.0, degraded_by: Sequence[str] = ()) -> Service:
    """Alive, ready (or degraded by `degraded_by` only), listing ECHO's filters in Open WebUI's order,
    and refusing a call without the key."""
    health = hooks.public("/healthz")
    if health.status_code != 200:
        raise _fail(f"/healthz answered {health.status_code}", health.text)
    ready = hooks.wait_ready(within, degraded_by=degraded_by)
    listed = hooks.http.get("/models").json()
    if listed.get("pipelines") is not True or listed.get("object") != "list":
        raise _fail("GET /models is not a Pipelines listing (pipelines: true, object: list)", listed)
    models = hooks.models()
    if set(EXPECTED_FILTERS) - set(models.filters):
        raise _fail(f"GET /models should list the filters {EXPECTED_FILTERS}", models)
    if [f for f in models.filters if f in EXPECTED_FILTERS] != list(EXPECTED_FILTERS):
        raise _fail("the filters' priorities should order context, compression, memory", models.priorities)
    refused = hooks.public("/models")
    if refused.status_code != 401:
        raise _fail(
            f"GET /models without the bearer key answered {refused.status_code}, not 401", refused.text
        )
    return Service(models, ready)


def _history_text(chat: Chat) -> int:
    return sum(len(str(m.get("content", ""))) for m in chat.history) + len(chat.system or "")


GARDEN_QUESTION = (
    "Step {i} of the garden plan: where do the {n} {plant} plants go, and how often do I water them?"
)
GARDEN_ANSWER = (
    "For step {i}, put the {n} {plant} plants along the {side} fence, {gap} cm apart. Water them every "
    "{days} days from the rain barrel, and mulch with straw once they reach {height} cm."
)
_PLANTS = ("tomato", "basil", "pepper", "courgette", "lettuce", "bean", "carrot", "leek", "squash", "onion")
_SIDES = ("south", "east", "west", "north")


def garden_exchange(i: int) -> tuple[str, str]:
    """Exchange `i` of a long, varied conversation (each names its step, so a summary can be traced)."""
    plant, side = _PLANTS[i % len(_PLANTS)], _SIDES[i % len(_SIDES)]
    n, gap, days, height = 3 * i + 4, 30 + 5 * i, 2 + i % 5, 15 + 2 * i
    return (
        GARDEN_QUESTION.format(i=i, n=n, plant=plant),
        GARDEN_ANSWER.format(i=i, n=n, plant=plant, side=side, gap=gap, days=days, height=height),
    )


@dataclass(frozen=True)
class Summarised:
    """What `long_conversation` saw: the chat, how many turns it took, the injected summary (`covers`
    messages), the messages the model got instead of the whole history, and how long the summary took."""

    chat: Chat
    turns: int
    threshold_tokens: int
    summary: str
    covers: int
    sent_messages: int
    history_messages: int
    waited_s: float
    summaries_created: float | None  # /metrics delta when the service runs the jobs itself


def _summary_in(sent: Mapping[str, Any]) -> tuple[int, str] | None:
    found = [m for m in sent.get("messages", []) if SUMMARY_OPEN in _text(m)]
    if len(found) > 1:
        raise _fail("more than one summary was injected", [_text(m)[:200] for m in found])
    if not found:
        return None
    block = _SUMMARY_BLOCK.match(_text(found[0]))
    if block is None:
        raise _fail("the injected summary is not one whole <echo_summary covers=…> message", _text(found[0]))
    return int(block.group(1)), block.group(2)


def long_conversation(
    hooks: Hooks,
    user: User,
    *,
    threshold_tokens: int | None = None,
    model: str = OTHER_MODEL,
    past_threshold: float = 1.5,
    within: float = 120.0,
    max_turns: int = 200,
) -> Summarised:
    """Turns until the chat is `past_threshold` × the compression threshold (read from the valves in
    force unless given: `compression_threshold_tokens`; `model` must have no `model_thresholds`
    entry of its own), then the summary: a background `summary` job (the outlet queued it) writes
    it, and the next inlet carries it fenced as history in place of the turns it covers.

    Observed over HTTP: the next turn's inlets (polled with `peek`, which writes nothing) until the
    model's messages hold one `<echo_summary covers="N">` message; then a real turn sends it; when
    the service runs the jobs itself, `/metrics` `echo_compression_summaries_total{outcome="created"}`
    grew too (a distiller pod's metrics are not on the hooks Service)."""
    service = Service(hooks.models(), hooks.readyz()[1])
    valves = hooks.valves("echo_compression")
    table = valves.get("model_thresholds") or {}
    table = json.loads(table) if isinstance(table, str) else table
    if threshold_tokens is None and model in table:
        raise _fail(
            f"{model!r} has a model_thresholds entry, which wins over compression_threshold_tokens: "
            "give threshold_tokens, or chat with a model that has none (OTHER_MODEL)",
            table[model],
        )
    threshold = threshold_tokens or int(valves["compression_threshold_tokens"])
    before = hooks.metrics().total("echo_compression_summaries_total", outcome="created")
    chat = Chat(user, model)
    turns = 0
    # Characters over 5 under-estimates tokens for this English text (about 4.3 characters a token),
    # so the chat is surely past the threshold as ECHO counts it.
    while _history_text(chat) / 5 < past_threshold * threshold:
        if turns >= max_turns:
            raise _fail(f"{max_turns} turns did not reach {past_threshold} × {threshold} tokens")
        question, answer = garden_exchange(turns)
        turn(hooks, chat, question, answer=answer)
        turns += 1
    asked = "Which steps of the garden plan are still left to do?"

    def probe() -> tuple[int, str] | None:
        return _summary_in(peek(hooks, chat, asked))

    try:
        (covers, _), waited = _poll("a summary injected on the next inlet", probe, within)
    except StepFailed as error:
        raise _fail(
            f"after {turns} turns (~{_history_text(chat) // 5}+ tokens, threshold {threshold}) no summary "
            f"reached the next inlet: {error}",
            {"readyz": hooks.readyz()[1], "valves": valves},
        ) from error
    final = turn(hooks, chat, asked, answer="Steps after the last one we planned are still open.")
    found = _summary_in(final.sent)
    if found is None:
        raise _fail("the turn after the summary was written did not send it", final.sent["messages"])
    covers, summary = found
    history = 1 + 2 * turns  # the system prompt and every exchange, before this question
    sent = len(final.sent["messages"])
    if not 0 < covers < 2 * turns:
        raise _fail(f"the summary covers {covers} messages of {2 * turns}", summary)
    if sent >= history:
        raise _fail(f"the model got {sent} messages for a {history}-message history: nothing replaced", sent)
    quoted = {int(n) for n in re.findall(r"\bstep (\d+)\b", summary, re.IGNORECASE)}
    if not quoted & set(range(turns)):
        raise _fail("the summary quotes none of the conversation's steps", summary)
    if not final.last_user_text().endswith(asked):
        raise _fail("the question is not the last thing the model reads", final.last_user_text())
    created: float | None = None
    if service.in_process_worker:
        created = hooks.metrics().total("echo_compression_summaries_total", outcome="created") - before
        if created < 1:
            raise _fail("/metrics echo_compression_summaries_total{outcome=created} did not grow", created)
    return Summarised(chat, turns, threshold, summary, covers, sent, history, waited, created)


FACTS: tuple[tuple[str, str], ...] = (
    (
        "My cat is called Zanzibar; she is a grey Maine Coon and she turns nine in March.",
        "Zanzibar is a lovely name for a grey Maine Coon. At nine she is a senior cat: a vet check every "
        "six months is a good idea.",
    ),
    (
        "Zanzibar only eats salmon kibble and she hates the vacuum cleaner.",
        "Noted: salmon kibble only, and keep the vacuum cleaner away from Zanzibar. Maine Coons often "
        "prefer quiet rooms.",
    ),
    (
        "We are moving to Rennes in June, so Zanzibar needs a new vet there.",
        "For the move to Rennes in June, ask your current vet for Zanzibar's records and book a first "
        "visit with a vet in Rennes before you move.",
    ),
)
CAT_QUESTION = "What is the name of my cat, and what food does she eat?"
CAT_KEYWORD = "Zanzibar"


@dataclass(frozen=True)
class Recalled:
    """What `memory_across_chats` saw: the memory block a later chat got, the memories the admin API
    listed (None without the admin key), the tool's hits, and how long distillation took."""

    told_in: str
    recalled_in: str
    block: str
    listed: dict[str, Any] | None
    tool_hits: list[dict[str, Any]]
    waited_s: float


def _memory_block(sent: Mapping[str, Any]) -> str | None:
    last = _text(sent["messages"][-1])
    found = _MEMORIES_BLOCK.search(last)
    return found.group(0) if found else None


def memory_across_chats(
    hooks: Hooks,
    user: User,
    other: User,
    *,
    model: str = OTHER_MODEL,
    facts: Sequence[tuple[str, str]] = FACTS,
    question: str = CAT_QUESTION,
    keyword: str = CAT_KEYWORD,
    within: float = 120.0,
) -> Recalled:
    """`facts` told in one chat of `user` (at least a `WINDOW_SIZE` of messages, so a window is due)
    become a memory, distilled by a background `distill` job; a LATER chat of `user` asking `question`
    gets it in an `<echo_memories>` block before the question (the echo_memory inlet's recall), with
    `keyword` in it; `other`, asking the same in a chat of theirs, gets no memory block at all, and
    the tool server's `search_memories` finds the memory for `user` only.

    Observed over HTTP: with the admin key, `GET /memories?user_id=` until the memory is listed,
    then the later chat's inlet; without it, that inlet is polled directly (`peek` writes nothing)."""
    window = int(hooks.valves("echo_memory")["WINDOW_SIZE"])
    told = Chat(user, model)
    needed = max(len(facts), math.ceil(window / 2))
    for i in range(needed):
        said, answered = facts[i % len(facts)]
        turn(hooks, told, said, answer=answered)
    started = time.monotonic()
    listed: dict[str, Any] | None = None
    if hooks.admin is not None:

        def stored() -> dict[str, Any] | None:
            found = hooks.memories(user.id)
            return found if found.get("total") and keyword in json.dumps(found) else None

        try:
            listed, _ = _poll(f"a memory of {user.id} mentioning {keyword!r} (GET /memories)", stored, within)
        except StepFailed as error:
            raise _fail(f"{error}", {"readyz": hooks.readyz()[1]}) from error
    later = Chat(user, model)

    def recalled() -> str | None:
        block = _memory_block(peek(hooks, later, question))
        return block if block and keyword in block else None

    _poll(
        f"the memory recalled in a later chat of {user.id}",
        recalled,
        max(5.0, within - (time.monotonic() - started)),
    )
    waited = time.monotonic() - started
    asked = turn(hooks, later, question, answer="Your cat is Zanzibar and she eats salmon kibble.")
    block = _memory_block(asked.sent)
    if block is None or keyword not in block:
        raise _fail(f"the later chat's turn did not carry the memory of {keyword!r}", asked.last_user_text())
    if not asked.last_user_text().endswith(question) or not asked.last_user_text().startswith(MEMORIES_OPEN):
        raise _fail("the memory block should come right before the user's question", asked.last_user_text())
    if any(MEMORIES_OPEN in _text(m) for m in asked.sent["messages"][:-1]):
        raise _fail("a memory block sits outside the user's question", asked.sent["messages"])
    foreign = turn(hooks, Chat(other, model), question, answer="I do not know your cat yet.")
    if MEMORIES_OPEN in json.dumps(foreign.sent) or keyword in json.dumps(foreign.sent):
        raise _fail(f"{other.id} got {user.id}'s memory", foreign.last_user_text())
    hits = hooks.tool("search_memories", {"query": question}, user, chat_id=later.id).get("memories", [])
    if not any(keyword in str(hit.get("summary")) for hit in hits):
        raise _fail(f"search_memories found no memory of {keyword!r} for {user.id}", hits)
    stranger = hooks.tool("search_memories", {"query": question}, other).get("memories", [])
    if any(keyword in json.dumps(hit) for hit in stranger):
        raise _fail(f"search_memories gave {other.id} a memory of {user.id}", stranger)
    if hooks.admin is not None and hooks.memories(other.id).get("total"):
        raise _fail(f"{other.id} has memories although they told nothing", hooks.memories(other.id))
    return Recalled(told.id, later.id, block, listed, hits, waited)


VAULT = "The vault under the old library opens with the code 7741-ALPHA."
VAULT_CODE = "7741-ALPHA"


def handbook(size: int) -> str:
    """A text of about `size` bytes with the vault's code in the middle of it."""
    paragraphs: list[str] = []
    i = 0
    while sum(len(p) + 2 for p in paragraphs) < size:
        paragraphs.append(
            f"Paragraph {i} of the facility handbook: corridor {i % 17} leads to door {i % 23}, which "
            f"stays locked after {18 + i % 5} o'clock; badge readers in wing {chr(65 + i % 6)} log entries."
        )
        i += 1
    paragraphs.insert(len(paragraphs) // 2, VAULT)
    return "\n\n".join(paragraphs)


@dataclass(frozen=True)
class Ingested:
    """What `large_attachment` saw: the file's size against the inline limit, its source id and
    block, the passages `search_session_context` found, and how long ingestion took."""

    file_id: str
    size: int
    inline_limit: int
    source_id: str
    pending_block: str
    ready_block: str
    chunks: list[dict[str, Any]]
    waited_s: float


def _smart_context(sent: Mapping[str, Any], filename: str) -> tuple[dict[str, str], str] | None:
    for found in _SMART_CONTEXT.finditer(_text(sent["messages"][-1])):
        attributes = dict(_ATTRIBUTE.findall(found.group(1)))
        if attributes.get("filename") == filename:
            return attributes, found.group(0)
    return None


def large_attachment(
    hooks: Hooks,
    user: User,
    files: FileHost,
    *,
    model: str = OTHER_MODEL,
    factor: int = 8,
    within: float = 180.0,
) -> Ingested:
    """A text file `factor` × `MAX_DIRECT_TEXT_SIZE` (the valve in force), put on `files` and attached
    to a turn as Open WebUI attaches it (a `{type, id, name}` reference in `files` and
    `metadata.files`), is not inlined: echo_context reads it from Open WebUI's files API, takes it out
    of `files` (so Open WebUI does not inject it again) and puts a `rag_ephemeral` `<smart_context>`
    block with its `source_id` before the question; a background `map_reduce` job chunks and embeds
    it; `search_session_context` (as Open WebUI's tool server call) then answers `ready` with the
    passage holding the code, and the file's next turn carries the written summary, not the pending
    note. The file's own text never reaches the model whole.

    Observed over HTTP: the turn's bodies, then `search_session_context` polled until `ready`."""
    limit = int(hooks.valves("echo_context")["MAX_DIRECT_TEXT_SIZE"])
    text = handbook(factor * limit)
    name, file_id = "handbook.txt", str(uuid.uuid4())
    item = files.add(file_id, name, "text/plain", text.encode(), text, owner=user.id)
    chat = Chat(user, model)
    question = "What does the handbook say about the vault?"
    first = turn(hooks, chat, question, answer="The handbook's summary is being prepared.", files=[item])
    left = [f for f in (first.inlet.get("files") or []) if isinstance(f, dict) and f.get("id") == file_id]
    found = _smart_context(first.sent, name)
    if left or found is None:
        raise _fail(
            "echo_context did not take the file: it was left to Open WebUI (is the service's "
            "ECHO_OPENWEBUI_URL/ECHO_OPENWEBUI_API_KEY the file server's, and does it reach it?)",
            {"files after the inlets": first.inlet.get("files"), "question": first.last_user_text()[:800]},
        )
    attributes, pending = found
    if attributes.get("mode") != "rag_ephemeral":
        raise _fail(
            f"a {len(text)}-byte file over the {limit}-byte inline limit was not routed to the RAG", pending
        )
    source_id = attributes.get("source_id", "")
    if not source_id.startswith("U_"):
        raise _fail("the rag_ephemeral block has no source_id", pending)
    if VAULT_CODE in json.dumps(first.sent, ensure_ascii=False):
        raise _fail("the large file's text reached the model whole", first.last_user_text()[:800])

    def ready() -> dict[str, Any] | None:
        answer = hooks.tool(
            "search_session_context",
            {"source_id": source_id, "query": "which code opens the vault?", "k": 3},
            user,
            chat_id=chat.id,
        )
        if answer.get("status") == "failed":
            raise _fail("the file's ingestion failed", answer)
        if answer.get("status") == "ready":
            return answer
        raise _fail(f"search_session_context says {answer.get('status')!r}", answer)

    found_answer, waited = _poll(f"{name} indexed (search_session_context ready)", ready, within)
    chunks = list(found_answer.get("chunks", []))
    if not any(VAULT_CODE in str(c.get("text")) for c in chunks):
        raise _fail(f"search_session_context did not find the passage with {VAULT_CODE}", chunks)
    stranger = User.new("stranger")
    foreign = hooks.tool("search_session_context", {"source_id": source_id, "query": "vault code"}, stranger)
    if foreign.get("status") != "unknown" or foreign.get("chunks"):
        raise _fail("another user's search_session_context saw the file", foreign)
    again = turn(
        hooks, chat, "And where exactly is the vault?", answer="Under the old library.", files=[item]
    )
    later = _smart_context(again.sent, name)
    if later is None or later[0].get("source_id") != source_id or PENDING_NOTE in later[1]:
        raise _fail("the file's next turn should carry its written summary under the same source_id", later)
    if "search_session_context" not in later[1]:
        raise _fail("the block should tell the model to use search_session_context", later[1])
    return Ingested(file_id, len(text.encode()), limit, source_id, pending, later[1], chunks, waited)


@dataclass(frozen=True)
class Masked:
    """What `masking` saw: the assistant text Open WebUI stores, and the masking counter's growth."""

    shown: str
    counted: float


def masking(hooks: Hooks, user: User, *, model: str = OTHER_MODEL) -> Masked:
    """An assistant answer with a (fake) Google key comes back from the outlets with the key masked in
    its content and its `output` items, the next turn's history does not carry it, and `/metrics`
    `echo_secrets_masked_total{kind="google_api_key",where="outlet"}` counts it."""
    key = fake_google_key()
    before = hooks.metrics().total("echo_secrets_masked_total", kind="google_api_key", where="outlet")
    chat = Chat(user, model)
    said = turn(
        hooks,
        chat,
        "Repeat the API key from my notes, please.",
        answer=f"Here it is: {key} (keep it secret).",
    )
    stored = next(m for m in said.outlet["messages"] if m.get("id") == said.assistant_id)
    if key in json.dumps(stored) or key[:20] in json.dumps(stored):
        raise _fail("the Google key came back from the outlets unmasked", stored)
    outputs = [p.get("text", "") for item in stored.get("output", []) for p in item.get("content", [])]
    if GOOGLE_LABEL not in said.shown or not all(GOOGLE_LABEL in text for text in outputs):
        raise _fail(f"the content and every output item should read {GOOGLE_LABEL}", stored)
    counted = (
        hooks.metrics().total("echo_secrets_masked_total", kind="google_api_key", where="outlet") - before
    )
    if counted < 1:
        raise _fail(
            '/metrics echo_secrets_masked_total{kind="google_api_key",where="outlet"} did not grow', counted
        )
    following = peek(hooks, chat, "Thanks. What did you just tell me?")
    if key in json.dumps(following):
        raise _fail("the next turn's history still carries the key", following["messages"])
    return Masked(said.shown, counted)
