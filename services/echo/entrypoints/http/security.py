"""The two bearer keys of the hook service, checked in constant time (DESIGN §3, §7).

- `HOOKS`, the key `ECHO_API_KEY` that Open WebUI holds: the Pipelines protocol, the Function's
  filter calls, the `echo.*` pipe and the tool server.
- `ADMIN`, the key `ECHO_ADMIN_KEY` that operators hold: the memory-management API (`/memories…`,
  `/users/…`) and `POST /chats/{chat_id}/compact`. The hooks' key cannot list or forget users; the
  admin key opens nothing else. Without an admin key that API is off (403), unless the service runs
  without any auth (no `ECHO_API_KEY`: an explicit trial mode, `ECHO_ALLOW_UNAUTHENTICATED`), where
  every route is open as before. A key that is set is always required.

The check itself runs in `echo.entrypoints.http.edge`, before a byte of the body is read. `Keys.dependencies`
gives the routers the same check again (defence in depth: it passes at once when the edge already
granted this credential) and, where a key is required, the security scheme of the OpenAPI document
(`bearer` or `admin`), so `/openapi.json` says which key each route takes.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import HTTPBearer

__all__ = ["ADMIN", "GRANTED", "HOOKS", "Credential", "Keys", "Refusal"]

Credential = Literal["hooks", "admin"]
HOOKS: Credential = "hooks"
ADMIN: Credential = "admin"

# Where the edge writes, in the ASGI scope, the credential it checked for this request.
GRANTED = "echo.granted"

_VARIABLE = {HOOKS: "ECHO_API_KEY", ADMIN: "ECHO_ADMIN_KEY"}
# Declare the schemes in the OpenAPI document (`bearer` as `/tools/openapi.json` names it, and `admin`);
# the check itself is `Keys.refusal`'s.
_SCHEMES = {
    HOOKS: HTTPBearer(
        auto_error=False,
        scheme_name="bearer",
        description="ECHO_API_KEY, the key Open WebUI holds: hooks, pipe and tool server.",
    ),
    ADMIN: HTTPBearer(
        auto_error=False,
        scheme_name="admin",
        description="ECHO_ADMIN_KEY, the operators' key: the memory-management API and compaction.",
    ),
}
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: 401 (no or a wrong key; with a `WWW-Authenticate` challenge) or 403
    (a right key for another part of the API, or a part that is off)."""

    status: int
    detail: str

    @property
    def headers(self) -> dict[str, str]:
        return dict(_CHALLENGE) if self.status == 401 else {}

    def exception(self) -> HTTPException:
        return HTTPException(status_code=self.status, detail=self.detail, headers=self.headers or None)


def _digest(key: str | None) -> bytes | None:
    # Compared as SHA-256 digests: equal lengths, so the comparison says nothing of the key's length.
    return hashlib.sha256(key.encode()).digest() if key else None


class Keys:
    """The hooks' key and the admin key (either may be unset); `refusal` checks a request's."""

    def __init__(self, hooks: str | None, admin: str | None = None) -> None:
        self._digests: dict[Credential, bytes | None] = {HOOKS: _digest(hooks), ADMIN: _digest(admin)}

    @property
    def enabled(self) -> bool:
        """Whether any key is checked (False: the explicit no-auth mode, every route open)."""
        return any(digest is not None for digest in self._digests.values())

    def required(self, credential: Credential) -> bool:
        """Whether a route of `credential` needs a key (and the OpenAPI document says so)."""
        if credential == ADMIN:
            return self._digests[HOOKS] is not None or self._digests[ADMIN] is not None
        return self._digests[HOOKS] is not None

    def refusal(self, credential: Credential, authorization: Sequence[bytes]) -> Refusal | None:
        """None when the `Authorization` header values grant `credential`, else why not."""
        own = self._digests[credential]
        if own is None:
            if credential == ADMIN and self._digests[HOOKS] is not None:
                return Refusal(
                    403,
                    "the memory-management API is off: set ECHO_ADMIN_KEY to enable the memory-management"
                    " API (the hooks' key ECHO_API_KEY cannot list or forget users)",
                )
            return None  # no key for this part: open (the no-auth mode)
        variable = _VARIABLE[credential]
        if len(authorization) > 1:
            return Refusal(401, "bearer key sent twice: send one Authorization header")
        scheme, _, token = (authorization[0] if authorization else b"").partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return Refusal(401, f"missing bearer key: send 'Authorization: Bearer <{variable}>'")
        presented = hashlib.sha256(token).digest()
        other = self._digests[HOOKS if credential == ADMIN else ADMIN]
        matches_own = hmac.compare_digest(presented, own)
        matches_other = other is not None and hmac.compare_digest(presented, other)
        if matches_own:
            return None
        if matches_other and credential == ADMIN:
            return Refusal(
                403,
                "the hooks' key (ECHO_API_KEY) cannot use the memory-management API: send the admin key,"
                " 'Authorization: Bearer <ECHO_ADMIN_KEY>'",
            )
        if matches_other:
            return Refusal(
                403,
                "the admin key (ECHO_ADMIN_KEY) opens the memory-management API only: this route takes"
                " 'Authorization: Bearer <ECHO_API_KEY>'",
            )
        return Refusal(401, f"wrong bearer key: this route takes {variable}")

    def dependencies(self, credential: Credential) -> list[Any]:
        """The `dependencies=` of a router of `credential`: the check (passing at once when the edge
        granted it) and, when a key is required, the scheme in the OpenAPI document."""

        async def check(request: Request) -> None:
            if request.scope.get(GRANTED) == credential:
                return
            sent = [value.encode("latin-1") for value in request.headers.getlist("authorization")]
            refused = self.refusal(credential, sent)
            if refused is not None:
                raise refused.exception()

        return (
            [Depends(check), Security(_SCHEMES[credential])]
            if self.required(credential)
            else [Depends(check)]
        )
