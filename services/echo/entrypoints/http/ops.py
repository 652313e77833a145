"""Operational routes: liveness, readiness, Prometheus metrics (never behind auth)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from echo.config import live as live_config

__all__ = ["build_ops_router"]


class Readiness(BaseModel):
    status: str = Field(
        description="ready, degraded (a bad hot reload; the last good one serves) or unready."
    )
    checks: dict[str, dict[str, Any]] = Field(
        description="Each check by name, with its `ok`: `config`, `background` (the supervised tasks), "
        "and with the backends `store`, `embedder`, `vectors` and `jobs`. `jobs` is always ok (the "
        "distiller may run elsewhere) and says who runs the jobs: `in_process`, `pending` (jobs ready "
        "to run now) and, when no worker runs in this process (ECHO_DATABASE_URL set and "
        "ECHO_INPROCESS_WORKER not true), a `note` saying that nothing is summarised or distilled "
        "until `echoctl worker` runs or ECHO_INPROCESS_WORKER=true."
    )


DEGRADING = ("config", "vectors")
"""Checks whose failure leaves the replica ready but `degraded`: it still serves every filter."""


def build_ops_router(config: live_config.LiveConfig) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get(
        "/readyz",
        responses={
            200: {
                "model": Readiness,
                "description": "Ready (`ready`, or `degraded`: a bad reload, the vector store silent).",
            },
            503: {"model": Readiness, "description": "Unready: a backend or a background task fails."},
        },
    )
    async def readyz(request: Request) -> JSONResponse:
        # A bad hot reload keeps serving the last good configuration: the replica stays ready
        # (taking every replica out of the Service would drop all enhancements) and says so here.
        # So does a vector store that cannot answer: memory recall and file search fail open (counted)
        # while every filter still serves; unready, every replica would leave the Service at once.
        # A store or embedder that cannot answer makes it unready (503).
        status = config.status
        checks: dict[str, dict[str, Any]] = {
            "config": {
                "ok": status.ok,
                "error": status.error,
                "sources": list(status.sources),
                "loaded_at": status.loaded_at,
            }
        }
        supervisor = getattr(request.app.state, "supervisor", None)
        if supervisor is not None:  # background tasks: a failed warm-up makes the replica unready
            checks["background"] = supervisor.readiness()
        service = request.app.state.service  # what `create_app(backends=…)` opened, None without
        if service is not None:
            checks.update(await service.readiness())
        unready = [name for name, check in checks.items() if name not in DEGRADING and not check["ok"]]
        if unready:
            return JSONResponse({"status": "unready", "checks": checks}, status_code=503)
        degraded = any(not checks[name]["ok"] for name in DEGRADING if name in checks)
        return JSONResponse({"status": "degraded" if degraded else "ready", "checks": checks})

    @router.get(
        "/metrics",
        response_class=Response,
        responses={200: {"description": "Prometheus' text format.", "content": {CONTENT_TYPE_LATEST: {}}}},
    )
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router
