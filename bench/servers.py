"""What the HTTP latency benchmarks share: the bare FastAPI floor, free ports, starting a server."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx

__all__ = ["FLOOR_APP", "FLOOR_MSGSPEC_APP", "free_port", "percentile", "start"]

# The floor: a FastAPI endpoint that answers a hook's body unchanged (the per-filter and the combined
# paths alike), run as `python -c`; FastAPI's own JSON (the standard library's `json`).
FLOOR_APP = """
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

app = FastAPI()

@app.post("/{hook_id}/filter/{phase}")
async def echo_body(hook_id: str, phase: str, request: Request) -> JSONResponse:
    return JSONResponse((await request.json())["body"])

@app.post("/hooks/{phase}")
async def echo_combined(phase: str, request: Request) -> JSONResponse:
    return JSONResponse((await request.json())["body"])

uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning", access_log=False)
"""

# The same floor reading and writing JSON with msgspec, as echo-hooks does: what is left over it is
# echo-hooks' own work (edge, checks, filters), not JSON.
FLOOR_MSGSPEC_APP = """
import msgspec
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

app = FastAPI()

@app.post("/{hook_id}/filter/{phase}")
async def echo_body(hook_id: str, phase: str, request: Request) -> Response:
    body = msgspec.json.decode(await request.body())["body"]
    return Response(msgspec.json.encode(body), media_type="application/json")

@app.post("/hooks/{phase}")
async def echo_combined(phase: str, request: Request) -> Response:
    body = msgspec.json.decode(await request.body())["body"]
    return Response(msgspec.json.encode(body), media_type="application/json")

uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning", access_log=False)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(command: list[str], port: int, env: dict[str, str], within: float = 60) -> subprocess.Popen[bytes]:
    """Run `command` and wait until it answers on `port` (its `/docs`), at most `within` seconds."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/docs", timeout=1)
            return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server on port {port} did not start within {within} s")


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]
