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


def _response(connection: socket.socket) -> bytes:
    """One whole HTTP response (headers and its content-length body: they may come in two segments)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length and (chunk := connection.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


def _idle_connection_lifetime(port: int) -> tuple[bool, bool]:
    """Whether one keep-alive connection still serves a request after 0.5 s idle, then after 3 s more."""
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    answers = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request)
        assert _response(connection).startswith(b"HTTP/1.1 200")
        for idle in (0.5, 3.0):
            time.sleep(idle)
            try:
                connection.sendall(request)
                answers.append(_response(connection).startswith(b"HTTP/1.1 200"))
            except OSError:  # reset: closed
                answers.append(False)
    return answers[0], answers[1]


def test_serve_runs_embedded_with_state_under_data_dir(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    env["ECHO_KEEP_ALIVE_SECONDS"] = "2"
    env["ECHO_ALLOW_UNAUTHENTICATED"] = "true"  # no key: said in so many words, and loopback only
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "echo.entrypoints.cli",
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
        listing = httpx.get(f"http://127.0.0.1:{port}/models").json()  # no auth, as asked
        assert {m["id"] for m in listing["data"]} == {"echo_context", "echo_compression", "echo_memory"}
        while (ready := httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)).status_code != 200:
            assert ready.status_code == 503  # unready while the embedder loads, never an error
            assert time.monotonic() < deadline + 60, ready.text
            time.sleep(0.2)
        checks = ready.json()["checks"]
        assert {name: check["ok"] for name, check in checks.items()} == dict.fromkeys(
            ("config", "background", "store", "jobs", "embedder", "vectors"), True
        )
        assert checks["jobs"]["in_process"] is True  # embedded: the job worker runs in this process
        assert checks["embedder"]["dimension"] == 384  # the packaged MiniLM
        assert (tmp_path / "state" / "postgres").is_dir()  # embedded PostgreSQL
        assert (tmp_path / "state" / "qdrant").is_dir()  # Qdrant local mode
        assert _idle_connection_lifetime(port) == (True, False)  # kept 0.5 s, closed by 3 s
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0]
    assert "auth_disabled" in output  # said loudly
    assert "inprocess_worker_started" in output  # embedded mode runs the job worker in-process
    assert output.count('"event": "ready"') == 1  # once ready, said once, with the URL to give Open WebUI
    assert f'"url": "http://127.0.0.1:{port}"' in output
    assert "worker_stopped" in output or process.returncode == 0


def test_serve_without_a_key_or_the_explicit_setting_exits_at_once(tmp_path: Path) -> None:
    """No ECHO_API_KEY and no ECHO_ALLOW_UNAUTHENTICATED=true: nothing is served (issue 18 item 4)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "echo.entrypoints.cli",
            "serve",
            "--port",
            str(_free_port()),
            "--data-dir",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "ECHO_API_KEY is not set" in done.stderr
    assert "ECHO_ALLOW_UNAUTHENTICATED=true" in done.stderr
