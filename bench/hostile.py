"""Hostile requests against a live `echoctl serve`: does the event loop stay free for everyone else?

Starts one `echoctl serve` on loopback (PostgreSQL at ECHO_DATABASE_URL, else 127.0.0.1:5432, on a
throwaway tenant schema dropped at the end; the in-process job worker on, the offline LLM, the
packaged embedder), measures `/healthz` alone, then sends each hostile request of issue 18 in turn
while a prober thread asks `/healthz` every `--interval` ms on a connection of its own:

- the 32 MB body of 1.08 M tiny messages, to each filter's inlet and outlet;
- 1 GiB without a key to `/tools/search_memories`, streamed (chunked, no Content-Length);
- a 40 MB query to `/tools/search_memories` (with the key);
- the first memory outlet of a new 20,000-message chat, then the distill jobs it queued (embedded
  worker, until they are done);
- the compression outlet of a 20,000-message chat (it queues a summary), then the chat's inlet while
  that summary job runs in the embedded worker (probed until the job is done);
- a 12 MB crafted answer to the masking outlet (`echo_context`; every `sk-` a possible key start).

Prints: hostile request | its duration | /healthz p50 | p99 | max | goal p99 <= 50 ms MET / NOT MET.
Loopback only.

    .venv/bin/python bench/hostile.py [--only memory_outlet,summary] [--interval 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import servers

from echo.adapters.store import testing
from echo.config import tenancy

KEY = "hostile-bench-key"
GOAL_MS = 50.0
FILTERS = ("echo_compression", "echo_memory", "echo_context")
TINY_MESSAGES = 1_080_000
CHAT_MESSAGES = 20_000
GIB = 1024**3
# The first outlet of a 20,000-message chat stores every message (seconds of PostgreSQL work): before
# it, the deadline is raised so that it always gets to queue the summary whose run the next row measures.
SUMMARY_VALVES = {"outlet_deadline_ms": 60_000}
_T = TypeVar("_T")
_WORDS = [
    "river",
    "lantern",
    "orbit",
    "copper",
    "meadow",
    "signal",
    "harbor",
    "velvet",
    "quartz",
    "ember",
    "prairie",
    "canyon",
    "willow",
    "atlas",
    "beacon",
    "cedar",
    "delta",
    "falcon",
    "garnet",
    "island",
    "jasmine",
    "kettle",
    "lagoon",
    "marble",
    "nectar",
]


# -- the prober ----------------------------------------------------------------------------------


class Prober:
    """`GET /healthz` every `interval` s from a thread, on its own keep-alive connection."""

    def __init__(self, port: int, interval: float) -> None:
        self.port = port
        self.interval = interval
        self.samples: list[tuple[float, float]] = []  # (started, latency s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                connection.request("GET", "/healthz")
                answer = connection.getresponse()
                answer.read()
                ok = answer.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
            latency = time.perf_counter() - started
            if not ok:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            self.samples.append((started, latency))
            self._stop.wait(max(0.0, self.interval - latency))
        connection.close()

    @contextlib.contextmanager
    def running(self) -> Iterator[Prober]:
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="healthz-prober", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=120)

    def latencies_ms(self) -> list[float]:
        return [latency * 1000 for _, latency in self.samples]


# -- requests ------------------------------------------------------------------------------------


def _headers(user: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    if user is not None:
        headers["x-openwebui-user-id"] = user
    return headers


def post(port: int, path: str, body: bytes, headers: dict[str, str], timeout: float = 300) -> tuple[int, int]:
    """POST `body`, read the whole answer: (status, answer bytes)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, len(answer.read())
    finally:
        connection.close()


def stream_unauthenticated(port: int, path: str, total: int, chunk: int = 1024 * 1024) -> tuple[int, int]:
    """POST up to `total` bytes chunked (no Content-Length, no key) until the server answers:
    (status, bytes sent); status 0 when it never answered."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sent = 0
    try:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.sendall(head.encode())
        piece = b'{"query": "' + b"a" * (chunk - 11)
        framed = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        with contextlib.suppress(OSError):
            while sent < total:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break
                sock.sendall(framed)
                sent += len(piece)
            else:
                sock.sendall(b"0\r\n\r\n")
        sock.settimeout(60)
        received = b""
        with contextlib.suppress(OSError):
            while b"\r\n" not in received:
                data = sock.recv(4096)
                if not data:
                    break
                received += data
        status_line = received.split(b"\r\n", 1)[0].split()
        status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
        return status, sent
    finally:
        sock.close()


def tiny_messages_body(count: int, chat_id: str) -> bytes:
    """The 32 MB body: `count` one-character messages, compact JSON (as a hostile client sends it)."""
    message = b'{"role":"user","content":"x"}'
    head = b'{"body":{"model":"gemini-2.5-flash","chat_id":"' + chat_id.encode() + b'","messages":['
    return (
        head
        + b",".join([message] * count)
        + b'],"metadata":{"chat_id":"'
        + chat_id.encode()
        + b'"}},'
        + (b'"user":{"id":"hostile-user","name":"Hostile","role":"user"}}')
    )


def chat_messages(count: int, salt: str) -> list[dict[str, Any]]:
    """A long ordinary chat: alternating turns of some thirty words each, every one different."""
    messages: list[dict[str, Any]] = []
    for index in range(count):
        words = " ".join(_WORDS[(index * 7 + k * 3) % len(_WORDS)] for k in range(30))
        role = "user" if index % 2 == 0 else "assistant"
        messages.append({"id": f"{salt}-{index}", "role": role, "content": f"{salt} {index}: {words}."})
    return messages


def filter_body(messages: list[dict[str, Any]], chat_id: str, user: str) -> bytes:
    body = {
        "body": {
            "model": "gemini-2.5-flash",
            "chat_id": chat_id,
            "messages": messages,
            "metadata": {"chat_id": chat_id, "user_id": user},
        },
        "user": {"id": user, "name": user, "role": "user"},
    }
    return json.dumps(body, separators=(",", ":")).encode()


# -- the run -------------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    duration_s: float
    latencies_ms: list[float]
    note: str = ""

    @property
    def p50(self) -> float:
        return servers.percentile(self.latencies_ms, 0.5) if self.latencies_ms else float("nan")

    @property
    def p99(self) -> float:
        return servers.percentile(self.latencies_ms, 0.99) if self.latencies_ms else float("nan")

    @property
    def worst(self) -> float:
        return max(self.latencies_ms) if self.latencies_ms else float("nan")

    @property
    def met(self) -> bool:
        return bool(self.latencies_ms) and self.p99 <= GOAL_MS


class Database:
    """The bench's own connection to the tenant's schema, on a loop in a thread of its own."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="bench-db", daemon=True)
        self._thread.start()
        self._connection: asyncpg.Connection | None = None

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=120)

    async def _connection_for(self) -> asyncpg.Connection:
        if self._connection is None:
            self._connection = await asyncpg.connect(self.dsn)
        return self._connection

    def job_states(self, kind: str, chat_id: str | None = None) -> dict[str, int]:
        async def query() -> dict[str, int]:
            connection = await self._connection_for()
            exists = await connection.fetchval(
                "SELECT to_regclass($1)", f"{tenancy.quote_identifier(self.schema)}.jobs"
            )
            if exists is None:
                return {}
            rows = await connection.fetch(
                f"SELECT state, count(*) AS n FROM {tenancy.quote_identifier(self.schema)}.jobs"
                " WHERE kind = $1 AND ($2::text IS NULL OR payload->>'chat_id' = $2) GROUP BY state",
                kind,
                chat_id,
            )
            return {row["state"]: int(row["n"]) for row in rows}

        return self.run(query())

    def drop(self) -> None:
        async def drop() -> None:
            connection = await self._connection_for()
            await connection.execute(f"DROP SCHEMA IF EXISTS {tenancy.quote_identifier(self.schema)} CASCADE")
            await connection.close()

        self.run(drop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@dataclass
class Bench:
    port: int
    prober: Prober
    database: Database
    rows: list[Row] = field(default_factory=list)

    def measure(self, name: str, action: Callable[[], str]) -> None:
        """Run `action` (it returns a note) while probing; a row of its duration and the probes."""
        with self.prober.running():
            time.sleep(self.prober.interval * 2)  # the prober is going before the request starts
            started = time.perf_counter()
            try:
                note = action()
            except Exception as error:  # a row that says what failed, not a bench that stops
                note = f"failed: {error!r}"
            duration = time.perf_counter() - started
        probes = [latency * 1000 for at, latency in self.prober.samples if at >= started - latency]
        self.rows.append(Row(name, duration, probes, note))
        print(f"  {name}: {duration:.2f} s, {len(probes)} probes, {note}", file=sys.stderr, flush=True)

    def wait_jobs(self, kind: str, chat_id: str | None = None, within: float = 600) -> str:
        """Until no job of `kind` is pending or running; what the queue holds of it then."""
        started = time.monotonic()
        while time.monotonic() < started + within:
            states = self.database.job_states(kind, chat_id)
            if states and not states.get("pending") and not states.get("running"):
                return ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
            if not states and time.monotonic() > started + 5:
                return f"no {kind} job was queued"
            time.sleep(0.2)
        return f"{kind} jobs still running after {within:.0f} s"

    def wait_running(self, kind: str, chat_id: str | None = None, within: float = 60) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            states = self.database.job_states(kind, chat_id)
            if states.get("running"):
                return True
            if states and not states.get("pending"):
                return False
            time.sleep(0.02)
        return False


def _status(expected: tuple[int, ...], status: int, size: int) -> str:
    verdict = "" if status in expected else f" (expected {'/'.join(map(str, expected))})"
    return f"HTTP {status}, {size / 1e6:.1f} MB back{verdict}"


def scenarios(bench: Bench, only: set[str] | None) -> None:
    port = bench.port

    def wanted(name: str) -> bool:
        return only is None or name in only

    if wanted("tiny"):
        tiny = tiny_messages_body(TINY_MESSAGES, "hostile-tiny")
        print(f"tiny-messages body: {len(tiny) / 1e6:.1f} MB", file=sys.stderr)

        def send(path: str) -> Callable[[], str]:
            return lambda: _status((200,), *post(port, path, tiny, _headers()))

        for phase in ("inlet", "outlet"):
            for hook in FILTERS:
                bench.measure(f"32 MB, 1.08 M messages, {hook} {phase}", send(f"/{hook}/filter/{phase}"))
        del tiny
    if wanted("unauthenticated"):

        def unauthenticated() -> str:
            status, sent = stream_unauthenticated(port, "/tools/search_memories", GIB)
            verdict = "" if status in (401, 413) else " (expected 401/413)"
            return f"HTTP {status} after {sent / 1e6:.1f} MB sent{verdict}"

        bench.measure("1 GiB streamed, no key, /tools/search_memories", unauthenticated)
    if wanted("query"):
        query = b'{"query": "' + b"a" * (40 * 1000 * 1000) + b'", "k": 5}'
        bench.measure(
            "40 MB query, /tools/search_memories",
            lambda: _status(
                (413, 422), *post(port, "/tools/search_memories", query, _headers("hostile-user"))
            ),
        )
        del query
    if wanted("memory_outlet"):
        body = filter_body(chat_messages(CHAT_MESSAGES, "mem"), "hostile-memory", "memory-user")
        bench.measure(
            "first memory outlet, new 20,000-message chat",
            lambda: _status((200,), *post(port, "/echo_memory/filter/outlet", body, _headers())),
        )
        bench.measure(
            "its distill jobs (embedded worker)", lambda: bench.wait_jobs("distill", "hostile-memory")
        )
    if wanted("summary"):
        messages = chat_messages(CHAT_MESSAGES, "sum")
        outlet = filter_body(messages, "hostile-summary", "summary-user")
        valves = json.dumps(SUMMARY_VALVES).encode()
        status, _ = post(port, "/echo_compression/valves/update", valves, _headers())
        if status != 200:
            print(f"valves/update answered {status}: the outlet keeps its deadline", file=sys.stderr)
        bench.measure(
            "compression outlet, 20,000-message chat",
            lambda: _status((200,), *post(port, "/echo_compression/filter/outlet", outlet, _headers())),
        )
        inlet = filter_body(
            [*messages, {"role": "user", "content": "and now?"}], "hostile-summary", "summary-user"
        )

        def inlet_while_summarising() -> str:
            running = bench.wait_running("summary", "hostile-summary")
            started = time.perf_counter()
            status, size = post(port, "/echo_compression/filter/inlet", inlet, _headers())
            took = time.perf_counter() - started
            jobs = bench.wait_jobs("summary", "hostile-summary")
            when = "while the summary job ran" if running else "the summary job was not seen running"
            return f"{_status((200,), status, size)}; inlet {took * 1000:.0f} ms {when}; summary jobs: {jobs}"

        bench.measure("compression inlet, 20,000 messages, summary job running", inlet_while_summarising)
    if wanted("masking"):
        crafted = "sk-" * 4_000_000
        messages = [
            {"id": "u1", "role": "user", "content": "hello"},
            {"id": "a1", "role": "assistant", "content": f"{crafted} fin"},
        ]
        body = filter_body(messages, "hostile-masking", "masking-user")
        bench.measure(
            "masking outlet, 12 MB crafted answer",
            lambda: _status((200,), *post(port, "/echo_context/filter/outlet", body, _headers())),
        )


def print_table(alone: Row, rows: list[Row]) -> None:
    name_width = max(len(row.name) for row in [alone, *rows])
    header = (
        f"{'hostile request':<{name_width}}  {'duration':>9}  {'probes':>6}  {'p50 ms':>7}  {'p99 ms':>7}"
        f"  {'max ms':>7}  goal p99 <= {GOAL_MS:.0f} ms"
    )
    print("/healthz latency while each hostile request runs (one echoctl serve, loopback)")
    print(header)
    print("-" * len(header))
    for row in [alone, *rows]:
        duration = "-" if row is alone else f"{row.duration_s:8.2f}s"
        verdict = "MET" if row.met else "NOT MET"
        print(
            f"{row.name:<{name_width}}  {duration:>9}  {len(row.latencies_ms):>6}  {row.p50:7.1f}  "
            f"{row.p99:7.1f}  {row.worst:7.1f}  {verdict}"
        )
    notes = [row for row in rows if row.note]
    if notes:
        print()
        for row in notes:
            print(f"{row.name}: {row.note}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interval", type=float, default=10.0, help="ms between /healthz probes")
    parser.add_argument("--alone", type=int, default=300, help="/healthz probes before any hostile request")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated: tiny, unauthenticated, query, memory_outlet, summary, masking (default all)",
    )
    parser.add_argument("--settle", type=float, default=0.0, help="seconds to wait once the server is ready")
    parser.add_argument(
        "--command",
        default=None,
        help="the server to start instead of `echoctl serve` (a profiling wrapper; it reads ECHO_PORT)",
    )
    args = parser.parse_args()
    dsn = os.environ.get("ECHO_DATABASE_URL") or testing.test_dsn()
    problem = asyncio.run(testing.unreachable(dsn))
    if problem:
        print(f"PostgreSQL at {dsn} is unreachable: {problem}", file=sys.stderr)
        return 1
    tenant = f"hostile-{os.getpid()}"
    port = servers.free_port()
    with tempfile.TemporaryDirectory(prefix="echo-hostile-") as workdir:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
        env.update(
            {
                "ECHO_DATABASE_URL": dsn,
                "ECHO_TENANT": tenant,
                "ECHO_API_KEY": KEY,
                "ECHO_DATA_DIR": str(Path(workdir) / "data"),
                "ECHO_QDRANT_PATH": str(Path(workdir) / "qdrant"),
                "ECHO_INPROCESS_WORKER": "true",
                "ECHO_LLM_PROVIDER": "offline",
                "ECHO_LOG_LEVEL": "WARNING",
                "ECHO_HOST": "127.0.0.1",
                "ECHO_PORT": str(port),
            }
        )
        command = (
            args.command.split()
            if args.command
            else [str(Path(sys.executable).with_name("echoctl")), "serve"]
        )
        log_path = Path(workdir) / "serve.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        database = Database(dsn, tenancy.schema_for(tenant))
        try:
            _wait_ready(port, process, log_path)
            time.sleep(args.settle)
            prober = Prober(port, args.interval / 1000)
            bench = Bench(port, prober, database)
            with prober.running():
                while len(prober.samples) < args.alone:
                    time.sleep(0.05)
            alone = Row("/healthz alone", 0.0, prober.latencies_ms())
            only = set(args.only.split(",")) if args.only else None
            try:
                scenarios(bench, only)
            except KeyboardInterrupt:
                print("interrupted: the rows measured so far", file=sys.stderr)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except Exception:
                process.kill()
            with contextlib.suppress(Exception):
                database.drop()
    print_table(alone, bench.rows)
    return 0 if all(row.met for row in bench.rows) else 2


def _wait_ready(port: int, process: subprocess.Popen[bytes], log: Path, within: float = 300) -> None:
    """Until `/readyz` answers 200 (the embedder warmed up, the store migrated)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(
        f"the server on port {port} is not ready within {within} s:\n{log.read_text()[-3000:]}"
    )


if __name__ == "__main__":
    sys.exit(main())
