"""Who a call is for, as Open WebUI asserts it (DESIGN §7, issue 18), and what to do with other claims.

- A filter hook (`/{id}/filter/inlet|outlet`): the `user` object of `{"body": …, "user": {…}}`.
  Open WebUI fills it server-side from the session it authenticated, on every filter call it makes
  (chats, plain API calls, background tasks alike: `../shared/fixtures/owui-0.12.4/`). The body is
  the chat request, and may come from a browser (the outlet of `/api/chat/completed`): a user id in
  it is a claim (`echo.domain.bodies.user_claims`), ignored for identity. A call without a `user` object
  has no user: the user-scoped features (memory, shadow, summaries, files) pass its body through.
- The pipe's `/chat/completions`: the `x-openwebui-user-id` header when it is there, else the
  payload's top-level `user` (the choice is explained in `echo.entrypoints.http.pipe`).
- The tool server and `compact`: the `x-openwebui-user-id` header; a request that carries it twice
  is refused (422 naming the header), never resolved by picking one.

A body (or header) naming another user is logged as `identity_mismatch` (the authenticated id, the
fields, and a 16-hex SHA-256 digest of each claimed id, never the claimed id itself) and counted in
`echo_identity_mismatch_total{route, phase}`, once per call.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from starlette.datastructures import Headers

from echo.domain import bodies
from echo.entrypoints.http import wire
from echo.support import metrics

__all__ = ["USER_HEADER", "report", "single_header"]

log = structlog.get_logger("echo.identity")

USER_HEADER = "x-openwebui-user-id"


def report(route: str, phase: str, user_id: str | None, claims: Sequence[bodies.Claim]) -> None:
    """Log and count a call whose body names someone else than `user_id` (nothing when `claims` is empty)."""
    if not claims:
        return
    metrics.IDENTITY_MISMATCHES.labels(route, phase).inc()
    log.warning(
        "identity_mismatch",
        route=route,
        phase=phase,
        user_id=user_id,
        authenticated=user_id is not None,
        claimed_fields=[claim.field for claim in claims],
        claimed_sha256=sorted({claim.digest for claim in claims}),
        used="the attached user" if user_id is not None else "no user: user-scoped features skipped",
    )


def single_header(headers: Headers, name: str, *, route: str | None) -> str | None:
    """The one value of header `name` (stripped; None when absent or blank). Sent twice: a 422 naming
    the header, counted as a mismatch on `route` when the values differ (`route=None`: a header that
    names no user, not counted)."""
    values = headers.getlist(name)
    if len(values) > 1:
        distinct = {value.strip() for value in values}
        if route is not None and len(distinct) > 1:
            metrics.IDENTITY_MISMATCHES.labels(route, "call").inc()
        log.warning(
            "identity_header_twice",
            route=route,
            header=name,
            count=len(values),
            values_sha256=sorted(bodies.Claim(name, value).digest for value in distinct),
        )
        raise wire.unprocessable(
            [
                {
                    "loc": ["header", name],
                    "msg": f"sent twice: Open WebUI sends one {name} header per call",
                    "type": "value_error",
                }
            ]
        )
    value = values[0].strip() if values else ""
    return value or None
