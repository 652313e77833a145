"""The attached files of one `echo_context` inlet: read, routed, registered, blocks rendered.

For each `files` item of type `file`: what the body says of it (name, declared type, size, text when
the Function shim sent it), completed from Open WebUI's files API when it is configured
(`ECHO_OPENWEBUI_URL` + an admin API key: `GET /api/v1/files/{id}` gives the metadata and Open WebUI's
extracted text; `/content` the bytes of a native part), then routed (`echo.domain.attachments.routing`):

- inline: the text goes into the turn in a `<smart_context mode="inline">` block, fenced as data;
- native: the bytes become a part of the user message (`image_url` for images, a `file` part for
  audio and video, `echo.*` pipe models only), re-sniffed from the bytes; media larger than
  `MAX_DIRECT_TEXT_SIZE` are also registered for the ephemeral RAG, and the `map_reduce` job has the
  multimodal model transcribe them (offline, the job says it cannot and the block tells the model);
- rag_ephemeral: the file is registered as pending and one `map_reduce` job is enqueued in the same
  transaction (idempotent per source id); the block says the summary is pending until the job is done,
  then carries the summary; the same content in the same chat is one row, ingested once;
- refused (empty, over `MAX_FILE_SIZE`, unreadable): a block tells the model why;
- left to Open WebUI (no files API, a 403, an unreachable API, a type ECHO does not read, the store
  down): the item stays in `files` and a status line says why.

Files ECHO handles (or refuses) are taken out of `files`, so Open WebUI does not inject a second,
unreduced copy after the inlets.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from echo.adapters.openwebui import client as openwebui_client
from echo.capabilities.context import metrics as context_metrics
from echo.capabilities.context import payloads as context_payloads
from echo.config import valves as valves_module
from echo.domain import kinds
from echo.domain.attachments import blocks, parts, routing
from echo.domain.attachments import mime as mime_module
from echo.ports import backends as backends_port
from echo.ports import store as store_port
from echo.support import metrics

__all__ = ["FileOutcome", "Files", "Turn", "file_items", "map_reduce_job_key"]

log = structlog.get_logger("echo.filters.context")

_MIN_CALL_S = 0.05  # below this much time left, no Open WebUI call is started
_SHA = "sha256"
_MEDIA = frozenset({mime_module.Kind.IMAGE, mime_module.Kind.AUDIO, mime_module.Kind.VIDEO})


def map_reduce_job_key(user_id: str, source_id: str) -> str:
    return f"map_reduce:{user_id}:{source_id}"


def file_items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The body's uploaded files (`type: file`; chat references are echo_compression's)."""
    found = body.get("files")
    return [
        item
        for item in (found if isinstance(found, list) else ())
        if isinstance(item, dict) and item.get("type", "file") == "file" and isinstance(item.get("id"), str)
    ]


@dataclass(frozen=True)
class Turn:
    """Whose turn and where, for which model, under which valves and deadline (`time.monotonic()`)."""

    user_id: str
    chat_id: str
    pipe_model: bool
    settings: valves_module.ContextValves
    deadline: float | None


@dataclass(frozen=True)
class FileOutcome:
    """What became of one file: `taken` out of `files` or not, the block and native part for the turn,
    the registry row, and a status line for the user when there is something to say."""

    file_id: str
    filename: str
    taken: bool
    mode: str  # a CONTEXT_FILES label
    block: str | None = None
    part: dict[str, Any] | None = None
    note: str | None = None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _facts(item: Mapping[str, Any], record: Mapping[str, Any] | None) -> routing.FileFacts:
    """What the body's item and Open WebUI's file record (when fetched) say of the file."""
    file = _mapping(item.get("file"))
    sources = [_mapping(record), file, item]
    name = next(
        (str(s[k]) for s in sources for k in ("filename", "name") if isinstance(s.get(k), str) and s.get(k)),
        "file",
    )
    meta = [_mapping(s.get("meta")) for s in sources]
    declared = next((m["content_type"] for m in meta if isinstance(m.get("content_type"), str)), None)
    declared = declared or next(
        (s["content_type"] for s in sources if isinstance(s.get("content_type"), str)), None
    )
    size = next((m["size"] for m in meta if isinstance(m.get("size"), int)), None)
    if size is None:
        size = next((s["size"] for s in sources if isinstance(s.get("size"), int)), None)
    text = next(
        (
            d["content"]
            for d in (_mapping(s.get("data")) for s in sources)
            if isinstance(d.get("content"), str)
        ),
        None,
    )
    return routing.FileFacts(str(item["id"]), name, declared, size, text)


class Files:
    """Handles the files of inlets with the running service's backends (`echo.ports.backends`, asked
    per file: its store and Open WebUI's API, each None when absent)."""

    def __init__(self, backends: Callable[[], backends_port.Backends]) -> None:
        self._backends = backends

    async def handle_all(self, items: list[dict[str, Any]], turn: Turn) -> list[FileOutcome]:
        outcomes = list(await asyncio.gather(*(self._handle(item, turn) for item in items)))
        for outcome in outcomes:
            context_metrics.CONTEXT_FILES.labels(outcome.mode).inc()
        return outcomes

    async def _handle(self, item: dict[str, Any], turn: Turn) -> FileOutcome:
        file_id = str(item["id"])
        facts = _facts(item, None)
        backends = self._backends()
        store = backends.store
        try:
            if store is not None:
                known = await store.attachments.by_file(turn.user_id, turn.chat_id, file_id)
                textual = known is not None and mime_module.kind_of(known.mime_type) not in _MEDIA
                if known is not None and textual and known.mode == routing.Mode.RAG.value:
                    return FileOutcome(
                        file_id, known.filename, True, "reused", block=_registered_block(known)
                    )
            api = backends.openwebui
            if facts.text is None and api is not None:
                record = await api.file(file_id, timeout_s=_left(turn.deadline))
                if record is None:
                    return _left_out(facts, "Open WebUI has no such file")
                if not _owned_by(record, turn.user_id):
                    return _not_the_users(facts, record)
                facts = _facts(item, record)
                return await self._route(facts, store, api, turn, owner_checked=True)
            elif facts.text is None:
                return _left_out(facts, "ECHO_OPENWEBUI_URL and ECHO_OPENWEBUI_API_KEY are not set")
            return await self._route(facts, store, api, turn, owner_checked=False)
        except openwebui_client.OpenWebUIError as error:
            log.warning("file_unreadable", file_id=file_id, error=str(error), returned="left to Open WebUI")
            return _left_out(facts, f"Open WebUI's files API failed ({error})")
        except store_port.StoreError as error:
            reason = store_port.describe(error)
            log.warning(
                "file_store_failed",
                file_id=file_id,
                error=str(error),
                reason=reason,
                returned="left to Open WebUI",
            )
            return _left_out(facts, reason)

    async def _route(
        self,
        facts: routing.FileFacts,
        store: backends_port.Repositories | None,
        api: backends_port.OpenWebUI | None,
        turn: Turn,
        *,
        owner_checked: bool,
    ) -> FileOutcome:
        user_id, chat_id, settings = turn.user_id, turn.chat_id, turn.settings
        pipe_model, deadline = turn.pipe_model, turn.deadline
        verdict = mime_module.gemini_mime(facts.filename, facts.declared_mime)
        limits = routing.Limits(
            settings.MAX_DIRECT_TEXT_SIZE, settings.MAX_NATIVE_FILE_SIZE, settings.MAX_FILE_SIZE
        )
        decision = routing.route(facts, verdict, limits, pipe_model=pipe_model)
        data: bytes | None = None
        if decision.mode is routing.Mode.NATIVE:
            if api is None:
                return _left_out(facts, "a native part needs the file's bytes from Open WebUI's files API")
            if not owner_checked:
                record = await api.file(facts.file_id or "", timeout_s=_left(deadline))
                if record is None:
                    return _left_out(facts, "Open WebUI has no such file")
                if not _owned_by(record, user_id):
                    return _not_the_users(facts, record)
            data = await api.file_bytes(
                facts.file_id or "", max_bytes=settings.MAX_NATIVE_FILE_SIZE, timeout_s=_left(deadline)
            )
            if data is None:
                return _left_out(facts, "Open WebUI has no content for this file")
            verdict = mime_module.gemini_mime(facts.filename, facts.declared_mime, data[:8192])
            if verdict.kind in (mime_module.Kind.TEXT, mime_module.Kind.PDF, mime_module.Kind.OTHER):
                text = (
                    data.decode("utf-8", errors="replace") if verdict.kind is mime_module.Kind.TEXT else None
                )
                facts = routing.FileFacts(facts.file_id, facts.filename, verdict.mime, len(data), text)
                decision = routing.route(facts, verdict, limits, pipe_model=pipe_model)
            else:
                facts = routing.FileFacts(facts.file_id, facts.filename, verdict.mime, len(data), None)
                decision = routing.route(facts, verdict, limits, pipe_model=pipe_model)
        if decision.mode is None:
            if decision.refused:
                block = blocks.failed_block(facts.filename, verdict.mime, "refused", "", decision.reason)
                return FileOutcome(
                    facts.file_id or "", facts.filename, True, "refused", block=block, note=decision.reason
                )
            return _left_out(facts, decision.reason)
        if store is None:
            if decision.mode is routing.Mode.RAG:
                return _left_out(facts, "the ephemeral RAG needs the store, which is not ready")
            return _rendered(facts, verdict, decision.mode, "", data)
        content = (
            data
            if data is not None
            else (facts.text or "").encode("utf-8")
            if facts.text is not None
            else None
        )
        ingest = decision.mode is routing.Mode.RAG or decision.transcribe  # a map_reduce job to run
        new = store_port.NewAttachment(
            chat_id=chat_id,
            file_id=facts.file_id,
            filename=facts.filename,
            mime_type=verdict.mime,
            mode=routing.Mode.RAG if ingest else decision.mode,
            status="pending" if ingest else "ready",
            content_sha256=hashlib.new(_SHA, content).hexdigest() if content is not None else None,
            size_bytes=len(content) if content is not None else facts.size_bytes or 0,
            pending_text=facts.text if decision.mode is routing.Mode.RAG and api is None else None,
        )
        registry = store.attachments
        async with store.transactions.transaction() as connection:
            source_id, created = await registry.register(
                connection,
                user_id,
                new,
                now=time.time(),
                retention_seconds=settings.EPHEMERAL_RETENTION_HOURS * 3600.0,
            )
            if ingest and created:
                await store.jobs.enqueue(
                    kinds.MAP_REDUCE,
                    _job_payload(user_id, chat_id, source_id, facts, verdict.mime, settings),
                    idempotency_key=map_reduce_job_key(user_id, source_id),
                    connection=connection,
                )
        if decision.mode is routing.Mode.RAG:
            known = await registry.get(user_id, source_id)
            if known is not None and not created:
                return FileOutcome(
                    facts.file_id or "", facts.filename, True, "reused", block=_registered_block(known)
                )
            block = blocks.pending_block(facts.filename, verdict.mime, source_id)
            return FileOutcome(facts.file_id or "", facts.filename, True, decision.mode.value, block=block)
        rendered = _rendered(facts, verdict, decision.mode, source_id, data)
        if not ingest:
            return rendered
        known = await registry.get(user_id, source_id)  # the media's transcript: pending, ready or failed
        block = _registered_block(known) if known is not None else (rendered.block or "")
        return FileOutcome(
            rendered.file_id, rendered.filename, True, rendered.mode, block=block, part=rendered.part
        )


def _job_payload(
    user_id: str,
    chat_id: str,
    source_id: str,
    facts: routing.FileFacts,
    mime_type: str,
    settings: valves_module.ContextValves,
) -> dict[str, Any]:
    return context_payloads.MapReducePayload(
        user_id=user_id,
        chat_id=chat_id,
        source_id=source_id,
        file_id=facts.file_id,
        filename=facts.filename,
        mime_type=mime_type,
        max_words=settings.ECHO_MR_SUMMARY_MAX_WORDS,
        chunk_tokens=settings.RAG_CHUNK_TOKENS,
        overlap_tokens=settings.RAG_CHUNK_OVERLAP_TOKENS,
        max_file_bytes=settings.MAX_FILE_SIZE,
        model=settings.MAP_REDUCE_MODEL,
    ).to_payload()


def _left(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left < _MIN_CALL_S:
        raise openwebui_client.OpenWebUIError("no time left before the inlet's deadline", retryable=True)
    return left


def _owned_by(record: Mapping[str, Any], user_id: str) -> bool:
    """Whether Open WebUI's file record belongs to the calling user. ECHO reads files with Open WebUI's
    admin key, which reaches every user's files; a file id in a body is the caller's claim, so a file
    of another user (or a record that names no owner) is never read for this one."""
    owner = record.get("user_id")
    return isinstance(owner, str) and owner == user_id


def _not_the_users(facts: routing.FileFacts, record: Mapping[str, Any]) -> FileOutcome:
    metrics.IDENTITY_MISMATCHES.labels("file", "inlet").inc()
    log.warning("file_of_another_user", file_id=facts.file_id, returned="left to Open WebUI")
    return _left_out(facts, "the file belongs to another user")


def _left_out(facts: routing.FileFacts, reason: str) -> FileOutcome:
    note = f"{facts.filename}: left to Open WebUI ({reason})"
    return FileOutcome(facts.file_id or "", facts.filename, False, "left", note=note)


def _registered_block(known: store_port.Attachment) -> str:
    if known.status == "ready" and known.summary:
        return blocks.rag_block(known.filename, known.mime_type, known.source_id, known.summary)
    if known.status == "failed":
        return blocks.failed_block(
            known.filename, known.mime_type, known.mode, known.source_id, known.error or "unknown error"
        )
    return blocks.pending_block(known.filename, known.mime_type, known.source_id)


def _rendered(
    facts: routing.FileFacts,
    verdict: mime_module.MimeVerdict,
    mode: routing.Mode,
    source_id: str,
    data: bytes | None,
) -> FileOutcome:
    file_id = facts.file_id or ""
    if mode is routing.Mode.INLINE:
        block = blocks.inline_block(facts.filename, verdict.mime, source_id, facts.text or "")
        return FileOutcome(file_id, facts.filename, True, mode.value, block=block)
    url = parts.data_url(verdict.mime, data or b"")
    part: dict[str, Any]
    if verdict.kind is mime_module.Kind.IMAGE:
        part = {"type": "image_url", "image_url": {"url": url}}
    else:
        part = {"type": "file", "file": {"filename": facts.filename, "file_data": url}}
    block = blocks.native_block(facts.filename, verdict.mime, source_id)
    return FileOutcome(file_id, facts.filename, True, mode.value, block=block, part=part)
