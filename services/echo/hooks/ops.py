"""Operational routes: liveness, readiness, Prometheus metrics (never behind auth)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from echo.config import live as live_config

__all__ = ["build_ops_router"]


def build_ops_router(config: live_config.LiveConfig) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz() -> dict[str, Any]:
        # A bad hot reload keeps serving the last good configuration: the replica stays ready
        # (taking every replica out of the Service would drop all enhancements) and says so here.
        status = config.status
        checks = {
            "config": {
                "ok": status.ok,
                "error": status.error,
                "sources": list(status.sources),
                "loaded_at": status.loaded_at,
            }
        }
        return {"status": "ready" if status.ok else "degraded", "checks": checks}

    @router.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router
