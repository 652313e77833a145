"""Bearer-key check for the hook service, in constant time."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import HTTPBearer

__all__ = ["BearerAuth"]

# Declares the scheme in the OpenAPI document (named `bearer`, as `/tools/openapi.json` names it);
# the check itself is `BearerAuth`'s.
_SCHEME = HTTPBearer(auto_error=False, scheme_name="bearer")


class BearerAuth:
    """FastAPI dependency: 401 unless `Authorization: Bearer <key>` matches (no key = no auth)."""

    def __init__(self, key: str | None) -> None:
        self._key = key.encode() if key else None

    @property
    def enabled(self) -> bool:
        return self._key is not None

    def dependencies(self) -> list[Any]:
        """The `dependencies=` of a protected router: the check, and (when a key is set) the bearer
        scheme in the OpenAPI document, so it says which routes need the key."""
        return [Depends(self), Security(_SCHEME)] if self.enabled else [Depends(self)]

    async def __call__(self, request: Request) -> None:
        if self._key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(
                status_code=401,
                detail="missing bearer key: send 'Authorization: Bearer <ECHO_API_KEY>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not hmac.compare_digest(token.strip().encode(), self._key):
            raise HTTPException(
                status_code=401, detail="wrong bearer key", headers={"WWW-Authenticate": "Bearer"}
            )
