"""The chat file registry in memory: ``echo.adapters.store.attachments`` over ``Tables``.

A row is keyed by (user, source id) and unique by (user, chat, content sha256) where the digest is
known, as migration 0011's primary key and unique index are: ``register`` takes the next second's
source id while one is taken and answers the row holding the same content instead of a new one.
A row expires ``retention_seconds`` after the ``Tables`` clock's now (the database's ``now()``).
"""

from __future__ import annotations

from echo.adapters.in_memory_store import tables as tables_module
from echo.domain.attachments import routing
from echo.ports import store as store_port

__all__ = ["Attachments"]

storable_arguments = tables_module.storable_arguments
_MAX_ID_ATTEMPTS = 60


def _row(record: tables_module.AttachmentRecord) -> store_port.Attachment:
    return store_port.Attachment(
        source_id=record.source_id,
        chat_id=record.chat_id,
        file_id=record.file_id,
        filename=record.filename,
        mime_type=record.mime_type,
        mode=record.mode,
        status=record.status,
        content_sha256=record.content_sha256,
        size_bytes=record.size_bytes,
        summary=record.summary,
        summary_mode=record.summary_mode,
        chunks=record.chunks,
        error=record.error,
        created_at=record.created_at,
    )


class Attachments(store_port.AttachmentStore):
    """The file registry of one tenant (``Tables``). Every write is applied at once; ``register``
    given a ``Transaction`` (``connection``) is undone if its block raises."""

    def __init__(self, tables: tables_module.Tables) -> None:
        self.tables = tables

    def _of_chat(self, user_id: str, chat_id: str) -> list[tables_module.AttachmentRecord]:
        rows = [
            record
            for (owner, _), record in self.tables.attachments.items()
            if owner == user_id and record.chat_id == chat_id
        ]
        return sorted(rows, key=lambda record: (record.created_at, record.source_id))

    def _by_content(self, user_id: str, chat_id: str, sha256: str) -> tables_module.AttachmentRecord | None:
        for record in self._of_chat(user_id, chat_id):
            if record.content_sha256 == sha256:
                return record
        return None

    @storable_arguments
    async def by_file(self, user_id: str, chat_id: str, file_id: str) -> store_port.Attachment | None:
        for record in self._of_chat(user_id, chat_id):
            if record.file_id == file_id:
                return _row(record)
        return None

    @storable_arguments
    async def get(self, user_id: str, source_id: str) -> store_port.Attachment | None:
        record = self.tables.attachments.get((user_id, source_id))
        return None if record is None else _row(record)

    @storable_arguments
    async def of_chat(
        self, user_id: str, chat_id: str, *, limit: int = store_port.FILE_LIST_LIMIT
    ) -> list[store_port.Attachment]:
        return [_row(record) for record in self._of_chat(user_id, chat_id)[:limit]]

    @storable_arguments
    async def register(
        self,
        connection: store_port.Connection,
        user_id: str,
        new: store_port.NewAttachment,
        *,
        now: float,
        retention_seconds: float,
    ) -> tuple[str, bool]:
        for attempt in range(_MAX_ID_ATTEMPTS):
            candidate = routing.source_id(user_id, new.chat_id, int(now) + attempt)
            existing = None
            if new.content_sha256 is not None:
                existing = self._by_content(user_id, new.chat_id, new.content_sha256)
            if (user_id, candidate) not in self.tables.attachments and existing is None:
                tables_module.saving(connection, self.tables.attachments, [(user_id, candidate)])
                instant = self.tables.now()
                self.tables.attachments[(user_id, candidate)] = tables_module.AttachmentRecord(
                    source_id=candidate,
                    chat_id=new.chat_id,
                    file_id=new.file_id,
                    filename=new.filename,
                    mime_type=new.mime_type,
                    mode=routing.Mode(new.mode).value,
                    status=new.status,
                    content_sha256=new.content_sha256,
                    size_bytes=new.size_bytes,
                    pending_text=new.pending_text,
                    summary=new.summary,
                    summary_mode=None,
                    chunks=0,
                    error=None,
                    created_at=instant,
                    updated_at=instant,
                    expires_at=instant + float(retention_seconds),
                )
                return candidate, True
            if existing is not None:
                return existing.source_id, False
        raise RuntimeError(f"no free source id for chat {new.chat_id!r} in {_MAX_ID_ATTEMPTS} seconds")

    @storable_arguments
    async def pending_text(self, user_id: str, source_id: str) -> str | None:
        record = self.tables.attachments.get((user_id, source_id))
        return None if record is None else record.pending_text

    @storable_arguments
    async def mark_indexed(self, user_id: str, source_id: str, chunks: int) -> None:
        record = self.tables.attachments.get((user_id, source_id))
        if record is not None:
            record.chunks, record.updated_at = chunks, self.tables.now()

    @storable_arguments
    async def mark_ready(self, user_id: str, source_id: str, summary: str, summary_mode: str) -> bool:
        record = self.tables.attachments.get((user_id, source_id))
        if record is None:
            return False
        record.status, record.summary, record.summary_mode = "ready", summary, summary_mode
        record.pending_text, record.error, record.updated_at = None, None, self.tables.now()
        return True

    @storable_arguments
    async def mark_failed(self, user_id: str, source_id: str, error: str) -> bool:
        record = self.tables.attachments.get((user_id, source_id))
        if record is None:
            return False
        record.status, record.error = "failed", error
        record.pending_text, record.updated_at = None, self.tables.now()
        return True

    async def expired(self, limit: int = 500) -> list[tuple[str, str]]:
        now = self.tables.now()
        past = [
            (record.expires_at, owner, record.source_id)
            for (owner, _), record in self.tables.attachments.items()
            if record.expires_at < now
        ]
        return [(owner, source_id) for _, owner, source_id in sorted(past)[:limit]]

    @storable_arguments
    async def delete(self, user_id: str, source_id: str) -> None:
        self.tables.attachments.pop((user_id, source_id), None)

    @storable_arguments
    async def forget(self, user_id: str) -> int:
        return tables_module.forget_rows(self.tables.attachments, user_id)
