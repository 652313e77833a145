"""Round-trip latency of echo-hooks inlet and outlet over HTTP, beside two bare FastAPI floors.

Part 1. A 200-message chat is built from the saved-chat fixture of Open WebUI 0.12.4 (its request
shape: metadata on the inlet, flat ids and `output` items on the outlet) with LoCoMo dialogue as text;
`echoctl serve` in embedded mode (Qdrant local mode, on a worker thread), its embedder Infinity in a
process of its own as in a cluster when `.venv-infinity` exists (`make infinity`; `--local-embedder`
or without it: MiniLM in the process). Each filter's own route,
the combined `POST /hooks/inlet` and `/hooks/outlet` (every filter in one call, what the Open WebUI
Function sends), and a pass-through call: `echo_memory`'s inlet with `ENABLE_RECALL` off on the 97 KiB
outlet body (every layer runs: edge, read, checks, runner, answer; the filter returns the body).

Part 2 (`--skip-summary` leaves it out). The combined inlet on a 500-message chat whose summary is
stored (replayed as `bench/compression.py` does, on ECHO_DATABASE_URL or an embedded PostgreSQL), with
the memory recall on.

The floors, as separate uvicorn processes with the same settings: FastAPI answering the request's
`body` with its own JSON (the standard library: "floor"), and the same with msgspec, as echo-hooks
reads and writes JSON ("msgspec floor"). Requests alternate between the three so drift hits all alike.
"recall" is the mean time of the memory recall (query embedding and vector search) per request in the
measured requests, read from echo-hooks' `echo_memory_recall_seconds` histogram; "over, recall apart"
subtracts it from the p50 over the floor. Targets: pass-through <= 0.5 ms over the floor, the combined
inlet of part 2 <= 5 ms over it with the recall apart, `echo_memory`'s outlet <= 2 ms over it.

    .venv/bin/python bench/hooks_latency.py [--requests 400] [--skip-summary]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import load_cluster
import servers

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FIXTURES = SHARED / "fixtures" / "owui-0.12.4"
LOCOMO = SHARED / "data" / "locomo" / "26.json"
KEY = "bench-key"
LONG_CHAT = 500
PASS_THROUGH_TARGET_MS = 0.5
COMBINED_TARGET_MS = 5.0
OUTLET_TARGET_MS = 2.0
TURN_CPU_TARGET_MS = 5.0
SERVE = [sys.executable, "-m", "echo.entrypoints.cli", "serve"]
_RECALL = re.compile(r"^echo_memory_recall_seconds_(sum|count) ([0-9.eE+-]+)$", re.MULTILINE)
_OUTCOMES = re.compile(r'^echo_memory_recalls_total\{outcome="(\w+)"\} ([0-9.eE+-]+)$', re.MULTILINE)


@contextlib.contextmanager
def embedder(workdir: Path, local: bool) -> Iterator[tuple[dict[str, str], str]]:
    """echo-hooks' embedder as in a cluster: Infinity in a process of its own (`make infinity`), its
    `/embeddings` called over HTTP; with `local` or without that venv, MiniLM in echo-hooks' process.
    The environment that says so, and a label."""
    infinity = None if local else load_cluster.start_infinity(servers.free_port(), workdir)
    if infinity is None:
        yield {}, "MiniLM in echo-hooks' process (worker threads)"
        return
    try:
        assert infinity.ready_url is not None
        yield {"ECHO_EMBEDDING_URL": infinity.ready_url.removesuffix("/health")}, "Infinity over HTTP"
    finally:
        infinity.stop()


@dataclass(frozen=True)
class Case:
    phase: str
    path: str
    work: str
    payload: bytes
    target_ms: float | None = None


@dataclass(frozen=True)
class Row:
    case: Case
    samples: dict[str, list[float]]
    recall_ms: float  # mean per measured request
    outcome: str  # the recalls' most frequent outcome in the measured requests ("-": none ran)
    cpu_ms: dict[str, float]  # CPU time (user + system) per measured request, per server process
    loop_cpu_ms: float  # echo-hooks' main thread alone (its event loop): the worker threads apart


def _dialogue() -> list[str]:
    conversation = json.loads(LOCOMO.read_text())
    turns: list[str] = []
    for index in range(1, 40):
        turns += [turn["text"] for turn in conversation.get(f"session_{index}", [])]
    return turns


def build_bodies(size: int = 200) -> tuple[dict[str, Any], dict[str, Any]]:
    inlet = json.loads((FIXTURES / "saved_chat_inlet.json").read_text())["body"]
    outlet = json.loads((FIXTURES / "saved_chat_outlet.json").read_text())["body"]
    texts = _dialogue()
    user_template = outlet["body"]["messages"][0]
    assistant_template = outlet["body"]["messages"][1]
    inlet_messages, outlet_messages = [], []
    for index in range(size):
        text = texts[index % len(texts)]
        role = "user" if index % 2 == 0 else "assistant"
        inlet_messages.append({"role": role, "content": text})
        template = copy.deepcopy(user_template if role == "user" else assistant_template)
        template["id"] = f"m-{index:04d}"
        template["content"] = text
        if role == "assistant":
            template["output"][0]["content"][0]["text"] = text
        outlet_messages.append(template)
    inlet["body"]["messages"] = inlet_messages
    outlet["body"]["messages"] = outlet_messages
    return inlet, outlet


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User and system CPU time of a process so far (Linux `/proc`); with `thread`, of that thread
    only (the process id itself: its main thread, where uvicorn's event loop runs)."""
    stat = Path(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _recall_totals(http: httpx.Client, port: int) -> tuple[float, dict[str, float]]:
    """Seconds of echo-hooks' recall histogram so far, and its recalls by outcome."""
    text = http.get(f"http://127.0.0.1:{port}/metrics").text
    seconds = dict(_RECALL.findall(text)).get("sum", "0")
    return float(seconds), {outcome: float(count) for outcome, count in _OUTCOMES.findall(text)}


def _ready(port: int, within: float = 300.0) -> None:
    """Wait until echo-hooks' `/readyz` answers 200 (the embedder loaded), so no case measures the
    recall skipped nor the model loading beside it."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"echo-hooks on port {port} not ready within {within} s")


@contextlib.contextmanager
def running(
    echo_command: list[str], echo_env: dict[str, str]
) -> Iterator[tuple[dict[str, int], dict[str, int]]]:
    """The two floors and echo-hooks, each on a port of its own: (ports, process ids) by name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    ports = {name: servers.free_port() for name in ("floor", "msgspec floor", "echo")}
    started: list[Any] = []
    try:
        for name, app in (("floor", servers.FLOOR_APP), ("msgspec floor", servers.FLOOR_MSGSPEC_APP)):
            started.append(
                servers.start(
                    [sys.executable, "-c", app.replace("{port}", str(ports[name]))], ports[name], env
                )
            )
        command = [*echo_command, "--port", str(ports["echo"])]
        # embedded mode loads MiniLM and PostgreSQL: slow to start on a busy machine
        started.append(servers.start(command, ports["echo"], {**env, **echo_env}, within=300))
        _ready(ports["echo"])
        yield ports, dict(zip(ports, (process.pid for process in started), strict=True))
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=10)


def measure(
    http: httpx.Client,
    servers_at: tuple[dict[str, int], dict[str, int]],
    case: Case,
    requests: int,
    warmup: int,
) -> Row:
    ports, pids = servers_at
    samples: dict[str, list[float]] = {name: [] for name in ports}
    before: tuple[float, dict[str, float]] = (0.0, {})
    cpu_before: dict[str, float] = {}
    loop_before = 0.0
    for index in range(warmup + requests):
        if index == warmup:
            before = _recall_totals(http, ports["echo"])
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            loop_before = cpu_seconds(pids["echo"], pids["echo"])
        for name, port in ports.items():
            started = time.perf_counter()
            answer = http.post(f"http://127.0.0.1:{port}{case.path}", content=case.payload)
            elapsed = (time.perf_counter() - started) * 1000
            answer.raise_for_status()
            if index >= warmup:
                samples[name].append(elapsed)
    cpu = {name: (cpu_seconds(pid) - cpu_before[name]) * 1000 / requests for name, pid in pids.items()}
    loop_cpu = (cpu_seconds(pids["echo"], pids["echo"]) - loop_before) * 1000 / requests
    after = _recall_totals(http, ports["echo"])
    recall_ms = (after[0] - before[0]) * 1000 / requests
    outcomes = {name: count - before[1].get(name, 0.0) for name, count in after[1].items()}
    ran = {name: count for name, count in outcomes.items() if count > 0}
    return Row(case, samples, recall_ms, max(ran, key=lambda name: ran[name]) if ran else "-", cpu, loop_cpu)


def print_rows(title: str, rows: list[Row]) -> None:
    print(title)
    header = (
        f"{'phase':<7} {'route':<31} {'work':<34} {'floor p50':>9} {'msgspec fl':>10} {'echo p50':>8} "
        f"{'echo p99':>8} {'over floor':>10} {'recall':>6} {'recalls':>8} {'over, recall apart':>18} "
        f"{'target':>7} {'verdict':>8} "
        f"{'cpu floor':>9} {'cpu msgspec':>11} {'cpu echo':>8} {'cpu loop':>8}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        floor = statistics.median(row.samples["floor"])
        fast_floor = statistics.median(row.samples["msgspec floor"])
        echo = statistics.median(row.samples["echo"])
        over = echo - floor
        apart = over - row.recall_ms
        target = row.case.target_ms
        verdict = "-" if target is None else ("met" if apart <= target else "NOT MET")
        target_cell = "-" if target is None else f"<= {target:g}"
        print(
            f"{row.case.phase:<7} {row.case.path:<31} {row.case.work:<34} {floor:9.2f} {fast_floor:10.2f} "
            f"{echo:8.2f} {servers.percentile(row.samples['echo'], 0.99):8.2f} {over:10.2f} "
            f"{row.recall_ms:6.2f} {row.outcome:>8} {apart:18.2f} {target_cell:>7} {verdict:>8} "
            f"{row.cpu_ms['floor']:9.2f} {row.cpu_ms['msgspec floor']:11.2f} {row.cpu_ms['echo']:8.2f} "
            f"{row.loop_cpu_ms:8.2f}"
        )
    print()


def part_one(args: argparse.Namespace, workdir: Path) -> None:
    inlet, outlet = build_bodies()
    payloads = {"inlet": json.dumps(inlet).encode(), "outlet": json.dumps(outlet).encode()}
    default_cases = [
        Case("inlet", "/echo_compression/filter/inlet", "compression (no summary)", payloads["inlet"]),
        Case("inlet", "/echo_memory/filter/inlet", "recall (embed + search)", payloads["inlet"]),
        Case("inlet", "/echo_context/filter/inlet", "context (no file)", payloads["inlet"]),
        Case("inlet", "/hooks/inlet", "every filter (no summary)", payloads["inlet"]),
        Case(
            "outlet", "/echo_memory/filter/outlet", "windows (enqueued once)", payloads["outlet"],
            OUTLET_TARGET_MS,
        ),
        Case("outlet", "/echo_compression/filter/outlet", "compression (no summary)", payloads["outlet"]),
        Case("outlet", "/echo_context/filter/outlet", "secret masking (200 msgs)", payloads["outlet"]),
        Case("outlet", "/hooks/outlet", "every filter", payloads["outlet"]),
    ]  # fmt: skip
    pass_through = Case(
        "inlet", "/echo_memory/filter/inlet", "pass-through (97 KiB, recall off)", payloads["outlet"],
        PASS_THROUGH_TARGET_MS,
    )  # fmt: skip
    command = [*SERVE, "--data-dir", str(workdir / "echo")]
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    rows = []
    with (
        embedder(workdir, args.local_embedder) as (embedding_env, embedding),
        running(command, {"ECHO_API_KEY": KEY, "ECHO_LOG_LEVEL": "WARNING", **embedding_env}) as at,
        httpx.Client(headers=headers, timeout=10) as http,
    ):
        for case in default_cases:
            rows.append(measure(http, at, case, args.requests, args.warmup))
        answer = http.post(
            f"http://127.0.0.1:{at[0]['echo']}/echo_memory/valves/update", json={"ENABLE_RECALL": False}
        )
        answer.raise_for_status()
        rows.append(measure(http, at, pass_through, args.requests, args.warmup))
    size = {phase: len(body) / 1024 for phase, body in payloads.items()}
    print_rows(
        f"part 1: 200-message chat (inlet {size['inlet']:.0f} KiB, outlet {size['outlet']:.0f} KiB), every "
        f"filter active, embedding by {embedding}, {args.requests} requests per cell, ms",
        rows,
    )
    print_turn_cpu(rows)


def print_turn_cpu(rows: list[Row]) -> None:
    """echo-hooks' CPU for one turn over the Function (the two combined calls). The target counts the
    CPU of its event-loop thread: the local-mode vector search runs on a worker thread here (in a
    cluster, on the Qdrant server), the query's embedding on Infinity (or on worker threads)."""
    combined = [row for row in rows if row.case.path.startswith("/hooks/")]
    if len(combined) != 2:
        return
    cpu = sum(row.cpu_ms["echo"] for row in combined)
    loop = sum(row.loop_cpu_ms for row in combined)
    floor = sum(row.cpu_ms["floor"] for row in combined)
    fast_floor = sum(row.cpu_ms["msgspec floor"] for row in combined)
    verdict = "met" if loop <= TURN_CPU_TARGET_MS else "NOT MET"
    print(
        f"echo-hooks CPU per turn (POST /hooks/inlet + /hooks/outlet): {cpu:.2f} ms in all; {loop:.2f} ms on "
        f"its event-loop thread, the embedding and vector search apart (target <= "
        f"{TURN_CPU_TARGET_MS:g} ms: {verdict}); the floors' two calls {floor:.2f} ms (stdlib), "
        f"{fast_floor:.2f} ms (msgspec)"
    )
    print()


def _over_http(
    command: list[str], env: dict[str, str], case: Case, args: argparse.Namespace
) -> tuple[dict[str, Any], Row]:
    """The body echo-hooks answers to `case`, then the case measured beside the floors."""
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    with running(command, env) as at, httpx.Client(headers=headers, timeout=10) as http:
        sent = http.post(f"http://127.0.0.1:{at[0]['echo']}{case.path}", content=case.payload).json()
        return sent, measure(http, at, case, args.requests, args.warmup)


async def part_two(args: argparse.Namespace, workdir: Path) -> None:
    import compression  # bench/compression.py: its store, long chat and replay

    from echo.config import valves as valves_module
    from echo.config.settings import Settings
    from echo.domain import transcripts
    from echo.entrypoints.replay import driver

    settings = Settings(data_dir=workdir / "replay", llm_provider="offline", log_level="WARNING")
    chat = compression.long_chat(LONG_CHAT)
    valves = driver.compression_valves(valves_module.CompressionValves(), threshold=4000, max_context=6000)
    # Measured inside the replay's session: leaving it forgets the session's user, and with it the
    # summary this part is about (before 2026-12-03, the inlet was measured with none stored).
    async with (
        compression.bench_store(workdir) as store,
        driver.session(store, settings, {"echo_compression": valves}.get) as replayer,
    ):
        replayed = await replayer.replay(chat)
        history = [
            *chat.messages,
            transcripts.Message(id="lat-question", role="user", content=compression.PROBE),
        ]
        inlet = driver.inlet_body(chat, history, user_id=replayer.user["id"], reply_id="lat-reply")
        user = {"id": replayer.user["id"], "name": "bench", "role": "user"}
        valves_file = workdir / "valves.json"
        valves_file.write_text(json.dumps({"echo_compression": valves.model_dump(mode="json")}))
        payload = json.dumps({"body": inlet, "user": user}).encode()
        case = Case(
            "inlet",
            "/hooks/inlet",
            f"every filter, summary + recall ({LONG_CHAT})",
            payload,
            COMBINED_TARGET_MS,
        )
        command = [
            sys.executable,
            "-m",
            "echo.entrypoints.cli",
            "serve",
            "--data-dir",
            str(workdir / "echo2"),
        ]
        env = {
            "ECHO_API_KEY": KEY,
            "ECHO_LOG_LEVEL": "WARNING",
            "ECHO_DATABASE_URL": store.dsn,
            "ECHO_TENANT": compression.TENANT,
            "ECHO_VALVES_FILE": str(valves_file),
            "ECHO_LLM_PROVIDER": "offline",
        }
        sent, row = await asyncio.to_thread(_over_http, command, env, case, args)
    covered = sum("<echo_summary" in str(m.get("content")) for m in sent["messages"])
    print_rows(
        f"part 2: {len(inlet['messages'])}-message chat ({len(payload) / 1024:.0f} KiB), its summary stored "
        f"(first at turn {replayed.first_summary}; the inlet answers {len(sent['messages'])} messages, "
        f"{covered} summary block), recall on, {args.requests} requests, ms",
        [row],
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=400, help="measured requests per case and server")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--skip-summary", action="store_true", help="leave part 2 out (no PostgreSQL)")
    parser.add_argument(
        "--local-embedder",
        action="store_true",
        help="part 1 embeds with MiniLM in echo-hooks' process even when .venv-infinity exists",
    )
    args = parser.parse_args()
    if not FIXTURES.is_dir() or not LOCOMO.is_file():
        print(f"needs {FIXTURES} and {LOCOMO} (../shared/)", file=sys.stderr)
        return 1
    from echo.support import logs

    logs.configure_logging("ERROR", "console")
    workdir = Path(tempfile.mkdtemp(prefix="echo-bench-hooks-"))
    started = time.perf_counter()
    try:
        part_one(args, workdir)
        if not args.skip_summary:
            asyncio.run(part_two(args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()
    print(f"(bench ran {time.perf_counter() - started:.0f} s on {os.cpu_count()} CPUs, load {load[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
