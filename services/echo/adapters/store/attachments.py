"""The chat file registry (migration 0011): what the context filter did with each file of a chat.

One row per file content and chat: the inlet registers a file (``register``: a row is found by Open
WebUI's file id or by the content's sha256 before one is made, so the same file sent twice is one row
and is ingested once), the ``map_reduce`` job marks it ready with its summary or failed with the
reason, and the AEC block lists the chat's rows. Rows expire (``expires_at``): the retention sweep
deletes them with their chunks; forgetting a user deletes theirs.
"""

from __future__ import annotations

from collections.abc import Mapping

from echo.adapters.store import pool, queries
from echo.domain.attachments import routing
from echo.ports import store as store_port

__all__ = ["Attachment", "Attachments", "NewAttachment"]

_REGISTRY_ROWS = store_port.FILE_LIST_LIMIT  # files listed in one chat's AEC block
_MAX_ID_ATTEMPTS = 60


def _sql() -> Mapping[str, queries.Query]:
    return queries.load("echo.adapters.store", "attachments.sql")


# The values live in the port (re-exported here, so `attachments.Attachment` still works).
Attachment = store_port.Attachment
NewAttachment = store_port.NewAttachment


def _row(row: pool.Record) -> Attachment:
    return Attachment(
        source_id=row["source_id"],
        chat_id=row["chat_id"],
        file_id=row["file_id"],
        filename=row["filename"],
        mime_type=row["mime_type"],
        mode=row["mode"],
        status=row["status"],
        content_sha256=row["content_sha256"],
        size_bytes=int(row["size_bytes"]),
        summary=row["summary"],
        summary_mode=row["summary_mode"],
        chunks=int(row["chunks"]),
        error=row["error"],
        created_at=float(row["created_at"]),
    )


class Attachments(store_port.AttachmentStore):
    """The file registry of one tenant (the store's schema)."""

    def __init__(self, store: pool.Store) -> None:
        self.store = store

    async def by_file(self, user_id: str, chat_id: str, file_id: str) -> Attachment | None:
        row = await self.store.fetchrow(_sql()["by_file"], user_id, chat_id, file_id)
        return None if row is None else _row(row)

    async def by_content(
        self, user_id: str, chat_id: str, sha256: str, *, connection: pool.Connection | None = None
    ) -> Attachment | None:
        row = await (connection or self.store).fetchrow(_sql()["by_content"], user_id, chat_id, sha256)
        return None if row is None else _row(row)

    async def get(self, user_id: str, source_id: str) -> Attachment | None:
        row = await self.store.fetchrow(_sql()["get"], user_id, source_id)
        return None if row is None else _row(row)

    async def of_chat(self, user_id: str, chat_id: str, *, limit: int = _REGISTRY_ROWS) -> list[Attachment]:
        return [_row(r) for r in await self.store.fetch(_sql()["of_chat"], user_id, chat_id, limit)]

    async def register(
        self,
        connection: pool.Connection,
        user_id: str,
        new: NewAttachment,
        *,
        now: float,
        retention_seconds: float,
    ) -> tuple[str, bool]:
        """``(source_id, created)``: the new row's id, or the id of the row holding the same content in
        the chat already (``created`` False). Inside the caller's transaction (it enqueues the job)."""
        for attempt in range(_MAX_ID_ATTEMPTS):
            candidate = routing.source_id(user_id, new.chat_id, int(now) + attempt)
            found = await connection.fetchval(
                _sql()["insert"],
                user_id,
                candidate,
                new.chat_id,
                new.file_id,
                new.filename,
                new.mime_type,
                new.mode.value,
                new.status,
                new.content_sha256,
                new.size_bytes,
                new.pending_text,
                new.summary,
                float(retention_seconds),
            )
            if found is not None:
                return str(found), True
            if new.content_sha256 is not None:
                existing = await self.by_content(
                    user_id, new.chat_id, new.content_sha256, connection=connection
                )
                if existing is not None:
                    return existing.source_id, False
        raise RuntimeError(f"no free source id for chat {new.chat_id!r} in {_MAX_ID_ATTEMPTS} seconds")

    async def pending_text(self, user_id: str, source_id: str) -> str | None:
        return await self.store.fetchval(_sql()["pending_text"], user_id, source_id)

    async def mark_indexed(self, user_id: str, source_id: str, chunks: int) -> None:
        await self.store.execute(_sql()["mark_indexed"], user_id, source_id, chunks)

    async def mark_ready(self, user_id: str, source_id: str, summary: str, summary_mode: str) -> bool:
        return (
            await self.store.fetchval(_sql()["mark_ready"], user_id, source_id, summary, summary_mode)
            is not None
        )

    async def mark_failed(self, user_id: str, source_id: str, error: str) -> bool:
        return await self.store.fetchval(_sql()["mark_failed"], user_id, source_id, error) is not None

    async def expired(self, limit: int = 500) -> list[tuple[str, str]]:
        return [(r["user_id"], r["source_id"]) for r in await self.store.fetch(_sql()["expired"], limit)]

    async def delete(self, user_id: str, source_id: str) -> None:
        await self.store.execute(_sql()["delete"], user_id, source_id)

    async def forget(self, user_id: str) -> int:
        status = await self.store.execute(_sql()["forget"], user_id)
        tail = status.rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0
