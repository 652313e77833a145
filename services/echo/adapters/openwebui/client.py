"""`OpenWebUI`: a small httpx client of Open WebUI's REST API (the chats and files endpoints ECHO needs).

`chat(chat_id)` is `GET {base}/api/v1/chats/{chat_id}` with the admin API key. Open WebUI answers a
chat the key's user may read (an admin reads any chat while `ENABLE_ADMIN_CHAT_ACCESS` is on, its
default) and 401 with "not found" otherwise; both 401/403/404 read as None here. The caller checks
the chat's `user_id`: ECHO only uses a chat of the user it serves. One attempt, no retries: the
callers are an inlet under its deadline (`timeout` per call; a failed call falls back to the store)
and the map_reduce job (the queue retries it).

Files: `file(file_id)` is `GET /api/v1/files/{id}` (name, `meta.content_type`, `meta.size`, and
Open WebUI's extracted text in `data.content`); `file_bytes(file_id)` is `GET …/{id}/content`. Open
WebUI answers 403 when API keys are not enabled (`ENABLE_API_KEYS`): that is `FilesForbidden`, so
the caller can say why it left the files to Open WebUI.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from echo.errors import EchoError

__all__ = ["FilesForbidden", "OpenWebUI", "OpenWebUIError"]

_MISSING = frozenset({401, 403, 404})


class OpenWebUIError(EchoError):
    """Open WebUI's API failed (unreachable, timed out, an error status, a malformed answer)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class FilesForbidden(OpenWebUIError):
    """Open WebUI refused the key (401/403): API keys disabled, or the key is not an admin's."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class OpenWebUI:
    """Open WebUI at ``base_url`` (its root, as the browser reaches it). Pass ``client`` to inject a
    transport (tests); it is then not closed by ``aclose``."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout_s: float = 5.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._own = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout_s)
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self.timeout_s = timeout_s

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def chat(self, chat_id: str, *, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The stored chat (`ChatResponse`: id, user_id, title, chat.history…), None when Open WebUI
        has no chat of that id the key may read."""
        url = f"{self.base_url}/api/v1/chats/{quote(chat_id, safe='')}"
        try:
            answer = await self._client.get(
                url, headers=self._headers, timeout=timeout_s if timeout_s is not None else self.timeout_s
            )
        except httpx.TimeoutException as error:
            raise OpenWebUIError(f"GET {url}: timed out", retryable=True) from error
        except httpx.HTTPError as error:
            raise OpenWebUIError(f"GET {url}: {type(error).__name__}: {error}", retryable=True) from error
        if answer.status_code in _MISSING:
            return None
        if answer.status_code != 200:
            raise OpenWebUIError(
                f"GET {url}: HTTP {answer.status_code}",
                retryable=answer.status_code >= 500 or answer.status_code == 429,
            )
        try:
            body = answer.json()
        except ValueError as error:
            raise OpenWebUIError(f"GET {url}: the answer is not JSON", retryable=False) from error
        if body is None:  # `response_model=ChatResponse | None`
            return None
        if not isinstance(body, dict):
            raise OpenWebUIError(
                f"GET {url}: a chat is a JSON object, got {type(body).__name__}", retryable=False
            )
        return body

    async def _get(
        self, url: str, timeout_s: float | None, *, max_bytes: int | None = None
    ) -> httpx.Response | None:
        try:
            request = self._client.build_request(
                "GET",
                url,
                headers=self._headers,
                timeout=timeout_s if timeout_s is not None else self.timeout_s,
            )
            answer = await self._client.send(request, stream=True)
        except httpx.TimeoutException as error:
            raise OpenWebUIError(f"GET {url}: timed out", retryable=True) from error
        except httpx.HTTPError as error:
            raise OpenWebUIError(f"GET {url}: {type(error).__name__}: {error}", retryable=True) from error
        try:
            if answer.status_code in (401, 403):
                raise FilesForbidden(
                    f"GET {url}: HTTP {answer.status_code} (Open WebUI refused the key: enable API keys"
                    " (ENABLE_API_KEYS) and use an admin's key as ECHO_OPENWEBUI_API_KEY)"
                )
            if answer.status_code == 404:
                return None
            if answer.status_code != 200:
                raise OpenWebUIError(
                    f"GET {url}: HTTP {answer.status_code}",
                    retryable=answer.status_code >= 500 or answer.status_code == 429,
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in answer.aiter_bytes():
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise OpenWebUIError(f"GET {url}: more than {max_bytes} bytes", retryable=False)
                chunks.append(chunk)
            answer._content = b"".join(chunks)
            return answer
        except httpx.HTTPError as error:
            raise OpenWebUIError(f"GET {url}: {type(error).__name__}: {error}", retryable=True) from error
        finally:
            await answer.aclose()

    async def file(self, file_id: str, *, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The file's record (`FileModelResponse`: filename, meta, data.content), None if there is none."""
        url = f"{self.base_url}/api/v1/files/{quote(file_id, safe='')}"
        answer = await self._get(url, timeout_s)
        if answer is None:
            return None
        try:
            body = answer.json()
        except ValueError as error:
            raise OpenWebUIError(f"GET {url}: the answer is not JSON", retryable=False) from error
        if not isinstance(body, dict):
            raise OpenWebUIError(
                f"GET {url}: a file is a JSON object, got {type(body).__name__}", retryable=False
            )
        return body

    async def file_bytes(
        self, file_id: str, *, max_bytes: int, timeout_s: float | None = None
    ) -> bytes | None:
        """The file's bytes (at most `max_bytes`, else `OpenWebUIError`), None if there is no such file."""
        url = f"{self.base_url}/api/v1/files/{quote(file_id, safe='')}/content"
        answer = await self._get(url, timeout_s, max_bytes=max_bytes)
        return None if answer is None else answer.content
