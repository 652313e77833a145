"""Open WebUI's files API over real HTTP, as 0.12.4 answers it (`../shared/notes/openwebui.md`):
`GET /api/v1/files/{id}` → the file record (user_id of its uploader, filename, meta.content_type,
meta.size, data.content: Open WebUI's extracted text), `GET /api/v1/files/{id}/content` → the bytes. A
wrong key gets 403 (API keys disabled), an unknown id 404; `broken` answers 500."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fakes.live_server import LiveServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

__all__ = ["OWUI_FILES_KEY", "BytesFiles", "FakeFiles", "fake_files"]

OWUI_FILES_KEY = "sk-owui-admin-key"


@dataclass
class StoredFile:
    name: str
    content_type: str
    data: bytes
    text: str | None  # what Open WebUI's loaders extracted (None: nothing)
    owner: str  # the uploading user's id (the record's `user_id`)


@dataclass
class FakeFiles:
    files: dict[str, StoredFile] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""

    def add(
        self,
        file_id: str,
        name: str,
        content_type: str,
        data: bytes,
        text: str | None = None,
        *,
        owner: str = "u1",
    ) -> dict[str, Any]:
        """Store a file of `owner`; returns the `files` item the web UI sends for it."""
        self.files[file_id] = StoredFile(name, content_type, data, text, owner)
        return {"type": "file", "id": file_id, "name": name}

    def app(self) -> Starlette:
        def allowed(request: Request) -> bool:
            return request.headers.get("authorization") == f"Bearer {OWUI_FILES_KEY}"

        async def record(request: Request) -> Response:
            file_id = request.path_params["file_id"]
            self.requests.append(f"record:{file_id}")
            if not allowed(request):
                return JSONResponse({"detail": "403: Forbidden"}, status_code=403)
            if file_id == "broken":
                return PlainTextResponse("Internal Server Error", status_code=500)
            found = self.files.get(file_id)
            if found is None:
                return JSONResponse({"detail": "Not found"}, status_code=404)
            return JSONResponse(
                {
                    "id": file_id,
                    "user_id": found.owner,
                    "filename": found.name,
                    "meta": {"name": found.name, "content_type": found.content_type, "size": len(found.data)},
                    "data": {"content": found.text} if found.text is not None else {},
                }
            )

        async def content(request: Request) -> Response:
            file_id = request.path_params["file_id"]
            self.requests.append(f"content:{file_id}")
            if not allowed(request):
                return JSONResponse({"detail": "403: Forbidden"}, status_code=403)
            found = self.files.get(file_id)
            if found is None:
                return JSONResponse({"detail": "Not found"}, status_code=404)
            return Response(found.data, media_type=found.content_type)

        return Starlette(
            routes=[
                Route("/api/v1/files/{file_id}", record),
                Route("/api/v1/files/{file_id}/content", content),
            ]
        )


class BytesFiles:
    """The files API as the map_reduce handler calls it, in process: one file's bytes, no record."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def file_bytes(self, file_id: str, *, max_bytes: int, timeout_s: float | None = None) -> bytes:
        return self.data

    async def file(self, file_id: str, *, timeout_s: float | None = None) -> None:
        return None

    async def aclose(self) -> None:
        return None


@contextmanager
def fake_files(host: str = "127.0.0.1") -> Iterator[FakeFiles]:
    fake = FakeFiles()
    with LiveServer(fake.app(), name="open-webui-files", lifespan="off", host=host) as live:
        fake.url = live.url
        yield fake
