"""A real `echoctl serve` process: embedded state under its data dir, readiness, keep-alive."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _idle_connection_lifetime(port: int) -> tuple[bool, bool]:
    """Whether one keep-alive connection still serves a request after 0.5 s idle, then after 3 s more."""
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    answers = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request)
        assert connection.recv(65536).startswith(b"HTTP/1.1 200")
        for idle in (0.5, 3.0):
            time.sleep(idle)
            try:
                connection.sendall(request)
                answers.append(connection.recv(65536).startswith(b"HTTP/1.1 200"))
            except OSError:  # reset: closed
                answers.append(False)
    return answers[0], answers[1]


def test_serve_runs_embedded_with_state_under_data_dir(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    env["ECHO_KEEP_ALIVE_SECONDS"] = "2"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "echo.cli",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "state"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "echoctl serve did not answer in 30 s"
            time.sleep(0.1)
        listing = httpx.get(f"http://127.0.0.1:{port}/models").json()  # no key set: no auth
        assert {m["id"] for m in listing["data"]} == {"echo_context", "echo_compression", "echo_memory"}
        while (ready := httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)).status_code != 200:
            assert ready.status_code == 503  # unready while the embedder loads, never an error
            assert time.monotonic() < deadline + 60, ready.text
            time.sleep(0.2)
        checks = ready.json()["checks"]
        assert {name: check["ok"] for name, check in checks.items()} == dict.fromkeys(
            ("config", "background", "store", "embedder", "vectors"), True
        )
        assert checks["embedder"]["dimension"] == 384  # the packaged MiniLM
        assert (tmp_path / "state" / "postgres").is_dir()  # embedded PostgreSQL
        assert (tmp_path / "state" / "qdrant").is_dir()  # Qdrant local mode
        assert _idle_connection_lifetime(port) == (True, False)  # kept 0.5 s, closed by 3 s
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0]
    assert "auth_disabled" in output  # said loudly
    assert "inprocess_worker_started" in output  # embedded mode runs the job worker in-process
    assert "worker_stopped" in output or process.returncode == 0
