"""Recorded conversations as plain data, from an Open WebUI export or a LoCoMo file; pure, no I/O.

Open WebUI (0.12.4): the chat menu's "Download → Export chat (.json)" writes a list with one chat row
(`[{"id", "user_id", "title", "chat": {...}, ...}]`); Settings → Data Controls → "Export Chats"
writes the list of every row. A row's `chat.history` is the message tree (`messages` by id, each
with `parentId`), and `currentId` the leaf of the branch on screen: that branch, root to leaf, is
what is replayed (`echo.domain.history.active_branch`, the reading referenced chats use too;
the other branches are not replayed). `chat.messages` is not kept up to date by the UI and is read
only when a chat has no history. The system prompt is `chat.params.system` (or
`chat.system`), the model `chat.models[0]`. Assistant messages keep their `output` items (tool calls
and results) and user messages their `files`, as the outlet receives them.

LoCoMo (`../shared/data/locomo/*.json`, or a sample of `locomo10.json` with `conversation` and
`qa`): `speaker_a` plays the user and `speaker_b` the assistant; each turn becomes
"Speaker: text" (a shared photo as its caption), each session opens with its date, and consecutive
turns of one speaker are one message. Each message keeps the dialog ids it holds (`sources`) and
the transcript maps every dialog id to its text, so a question's `evidence` can be looked up.

An exchange is what one chat turn replays: `sent` (the user's message, or whatever stands before
the next assistant answer) and `replies` (the assistant messages that follow; none for a last
unanswered message).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from echo.domain import history
from echo.errors import EchoError

__all__ = ["Exchange", "Message", "Question", "Transcript", "TranscriptError", "exchanges_of", "parse"]

Kind = Literal["openwebui", "locomo"]

# What the outlet carries of a stored Open WebUI message beside id, role and content.
_KEPT_FIELDS = ("files", "output", "timestamp")
_SESSION = re.compile(r"session_(\d+)")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


class TranscriptError(EchoError):
    """A file that is neither an Open WebUI chat export nor a LoCoMo conversation; the message names
    the place (``chats[1].chat.history``) and what is wrong there. Permanent: fix the file."""


@dataclass(frozen=True)
class Message:
    """One recorded message: ``content`` as recorded (text or content parts), ``fields`` the other
    recorded fields an outlet carries (``output``, ``files``, ``timestamp``), ``sources`` the
    LoCoMo dialog ids it holds."""

    id: str
    role: str
    content: Any
    fields: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    sources: tuple[str, ...] = ()

    def recorded(self) -> dict[str, Any]:
        """The message as Open WebUI stores it and sends it to an outlet (with its id)."""
        return {"id": self.id, "role": self.role, "content": self.content, **self.fields}


@dataclass(frozen=True)
class Exchange:
    """One chat turn: the messages sent before the answer, and the answer (may be empty)."""

    sent: tuple[Message, ...]
    replies: tuple[Message, ...]


@dataclass(frozen=True)
class Question:
    """A LoCoMo question: its answer (empty for the adversarial category 5) and evidence dialog ids."""

    text: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Transcript:
    """One conversation to replay."""

    id: str
    title: str
    kind: Kind
    model: str | None
    system: str | None
    exchanges: tuple[Exchange, ...]
    questions: tuple[Question, ...] = ()
    sources: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # LoCoMo dialog id -> its text

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every message, in order."""
        return tuple(m for exchange in self.exchanges for m in (*exchange.sent, *exchange.replies))


def exchanges_of(messages: Iterable[Message]) -> tuple[Exchange, ...]:
    """Messages cut into exchanges: each ends with the run of assistant messages that answers it."""
    exchanges: list[Exchange] = []
    sent: list[Message] = []
    replies: list[Message] = []
    for message in messages:
        if message.role == "assistant" and sent:
            replies.append(message)
            continue
        if replies:
            exchanges.append(Exchange(tuple(sent), tuple(replies)))
            sent, replies = [], []
        sent.append(message)
    if sent:
        exchanges.append(Exchange(tuple(sent), tuple(replies)))
    return tuple(exchanges)


def parse(data: object, name: str = "file") -> tuple[Transcript, ...]:
    """The conversations in a decoded JSON document (see the module docstring for the formats).

    ``name`` (the file's stem) names a LoCoMo conversation that has no ``sample_id``.
    Raises ``TranscriptError`` naming where the document is not what it should be.
    """
    if isinstance(data, list):
        if not data:
            raise TranscriptError("the file holds an empty list: no chat to replay")
        return tuple(_one(item, f"[{index}]", f"{name}-{index}") for index, item in enumerate(data))
    return (_one(data, "", name),)


def _one(item: object, where: str, name: str) -> Transcript:
    if not isinstance(item, Mapping):
        raise TranscriptError(f"{where or 'top level'}: expected a chat object, got {type(item).__name__}")
    if isinstance(item.get("conversation"), Mapping):  # a locomo10.json sample
        conversation = item["conversation"]
        return _locomo(
            conversation, item.get("qa"), f"{where}.conversation", str(item.get("sample_id") or name)
        )
    if "speaker_a" in item and any(_SESSION.fullmatch(key) for key in item):
        return _locomo(item, item.get("qa"), where, name)
    if isinstance(item.get("chat"), Mapping):  # a chat row, as exported
        return _openwebui(item["chat"], f"{where}.chat", row=item, name=name)
    if isinstance(item.get("history"), Mapping) or isinstance(item.get("messages"), list):
        return _openwebui(item, where, row=item, name=name)
    raise TranscriptError(
        f"{where or 'top level'}: neither an Open WebUI chat (a `chat` with `history`) nor a LoCoMo "
        "conversation (`speaker_a`, `session_1`, …)"
    )


# -- Open WebUI ---------------------------------------------------------------------------------


def _openwebui(chat: Mapping[str, Any], where: str, *, row: Mapping[str, Any], name: str) -> Transcript:
    listed = chat.get("messages")
    if not isinstance(chat.get("history"), Mapping) and listed is not None and not isinstance(listed, list):
        raise TranscriptError(f"{where}.messages: expected a list, got {type(listed).__name__}")
    nodes = history.active_branch({"chat": chat})
    if nodes and nodes[0].get("parentId") is not None:  # the walk from currentId stopped early
        raise TranscriptError(
            f"{where}.history: the branch to currentId breaks at {nodes[0].get('id')!r}: its parentId "
            f"{nodes[0]['parentId']!r} is not among the messages, or leads back into the branch"
        )
    messages = [_owui_message(node, f"{where} message {i}", f"m{i}") for i, node in enumerate(nodes)]
    params = chat.get("params")
    system = params.get("system") if isinstance(params, Mapping) else None
    system = system if isinstance(system, str) and system.strip() else chat.get("system")
    models = chat.get("models")
    model = models[0] if isinstance(models, list) and models and isinstance(models[0], str) else None
    chat_id = row.get("id") or chat.get("id") or name
    title = row.get("title") or chat.get("title") or str(chat_id)
    return Transcript(
        id=str(chat_id),
        title=str(title),
        kind="openwebui",
        model=model or None,
        system=system if isinstance(system, str) and system.strip() else None,
        exchanges=exchanges_of(messages),
    )


def _owui_message(node: object, where: str, default_id: str = "") -> Message:
    if not isinstance(node, Mapping):
        raise TranscriptError(f"{where}: expected a message object, got {type(node).__name__}")
    role = node.get("role")
    if not isinstance(role, str) or not role:
        raise TranscriptError(f"{where}.role: expected a role (user, assistant, …)")
    content = node.get("content")
    kept = {key: node[key] for key in _KEPT_FIELDS if node.get(key) is not None}
    return Message(
        id=str(node.get("id") or default_id),
        role=role,
        content="" if content is None else content,
        fields=MappingProxyType(kept),
    )


# -- LoCoMo -------------------------------------------------------------------------------------


def _locomo(conversation: Mapping[str, Any], qa: object, where: str, name: str) -> Transcript:
    user, assistant = conversation.get("speaker_a"), conversation.get("speaker_b")
    if not isinstance(user, str) or not isinstance(assistant, str):
        raise TranscriptError(f"{where}: speaker_a and speaker_b must be names")
    sessions = sorted(
        (int(found.group(1)), key)
        for key in conversation
        if (found := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
    )
    runs: list[tuple[str, list[str], list[str]]] = []  # role, lines, dialog ids
    sources: dict[str, str] = {}
    for number, key in sessions:
        date = conversation.get(f"{key}_date_time")
        header = (
            f"[session {number}, {date}]\n" if isinstance(date, str) and date else f"[session {number}]\n"
        )
        for index, turn in enumerate(conversation[key]):
            spot = f"{where}.{key}[{index}]"
            speaker, text, dia_id = _turn(turn, spot)
            if speaker not in (user, assistant):
                raise TranscriptError(f"{spot}.speaker: {speaker!r} is neither {user!r} nor {assistant!r}")
            role = "user" if speaker == user else "assistant"
            caption = turn.get("blip_caption")
            line = f"{speaker}: {text}" + (
                f" [shares {caption}]" if isinstance(caption, str) and caption else ""
            )
            if index == 0:
                line = header + line
            sources[dia_id] = text
            if runs and runs[-1][0] == role:
                runs[-1][1].append(line)
                runs[-1][2].append(dia_id)
            else:
                runs.append((role, [line], [dia_id]))
    messages = [
        Message(id=f"{name}-{index}", role=role, content="\n".join(lines), sources=tuple(ids))
        for index, (role, lines, ids) in enumerate(runs)
    ]
    return Transcript(
        id=name,
        title=f"LoCoMo {name}: {user} and {assistant}",
        kind="locomo",
        model=None,
        system=None,
        exchanges=exchanges_of(messages),
        questions=_questions(qa, f"{where}.qa"),
        sources=MappingProxyType(sources),
    )


def _turn(turn: object, where: str) -> tuple[str, str, str]:
    if not isinstance(turn, Mapping):
        raise TranscriptError(f"{where}: expected a dialog turn object")
    values = []
    for key in ("speaker", "text", "dia_id"):
        value = turn.get(key)
        if not isinstance(value, str):
            raise TranscriptError(f"{where}.{key}: expected a string")
        values.append(value)
    return values[0], values[1], values[2]


def _questions(qa: object, where: str) -> tuple[Question, ...]:
    if qa is None:
        return ()
    if not isinstance(qa, list):
        raise TranscriptError(f"{where}: expected a list of questions")
    out = []
    for index, item in enumerate(qa):
        if not isinstance(item, Mapping) or not isinstance(item.get("question"), str):
            raise TranscriptError(f"{where}[{index}].question: expected a string")
        answer = item.get("answer")
        evidence = item.get("evidence") or []
        out.append(
            Question(
                text=item["question"],
                answer="" if answer is None else str(answer),
                evidence=tuple(_dialog_ids(evidence if isinstance(evidence, list) else [evidence])),
                category=item["category"] if isinstance(item.get("category"), int) else 0,
            )
        )
    return tuple(out)


def _dialog_ids(entries: Sequence[object]) -> list[str]:
    """Evidence ids; a few LoCoMo entries hold several (``"D8:6; D9:17"``)."""
    return [part for entry in entries for part in re.split(r"[;,\s]+", str(entry)) if part]
