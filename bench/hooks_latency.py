"""Round-trip latency of echo-hooks inlet and outlet over HTTP, beside a bare FastAPI floor.

A 200-message chat is built from the saved-chat fixture of Open WebUI 0.12.4 (its request shape:
metadata on the inlet, flat ids and `output` items on the outlet) with LoCoMo dialogue as text.
Both servers run as separate uvicorn processes with the same settings; requests alternate
between them so drift hits both alike. Target: echo's p50 overhead over the floor <= 2 ms
with pass-through filters and for echo_memory's outlet (which only enqueues; the same outlet sent
again finds its windows queued already, as a replay does).

    .venv/bin/python bench/hooks_latency.py [--requests 400]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import servers

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FIXTURES = SHARED / "fixtures" / "owui-0.12.4"
LOCOMO = SHARED / "data" / "locomo" / "26.json"
KEY = "bench-key"
TARGET_MS = 2.0
WINDOWS_ENQUEUED = "windows (enqueued once)"  # the same outlet again: its windows are already queued
TARGETED = frozenset({"pass-through", WINDOWS_ENQUEUED})  # the hooks the 2 ms target applies to


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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=400, help="measured requests per case and server")
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    if not FIXTURES.is_dir() or not LOCOMO.is_file():
        print(f"needs {FIXTURES} and {LOCOMO} (../shared/)", file=sys.stderr)
        return 1
    inlet, outlet = build_bodies()
    payloads = {"inlet": json.dumps(inlet).encode(), "outlet": json.dumps(outlet).encode()}
    floor_port, echo_port = servers.free_port(), servers.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    data_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"echo-bench-{os.getpid()}"
    floor = servers.start(
        [sys.executable, "-c", servers.FLOOR_APP.replace("{port}", str(floor_port))], floor_port, env
    )
    echo = servers.start(
        [
            sys.executable,
            "-m",
            "echo.entrypoints.cli",
            "serve",
            "--port",
            str(echo_port),
            "--data-dir",
            str(data_dir),
        ],
        echo_port,
        {**env, "ECHO_API_KEY": KEY, "ECHO_LOG_LEVEL": "WARNING"},
    )
    cases = [
        ("inlet", "echo_compression", "compression (no summary)"),
        ("inlet", "echo_memory", "recall (embed + search)"),
        ("outlet", "echo_memory", WINDOWS_ENQUEUED),
        ("outlet", "echo_compression", "compression (no summary)"),
        ("outlet", "echo_context", "secret masking (200 msgs)"),
    ]
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    rows = []
    try:
        with httpx.Client(headers=headers, timeout=10) as http:
            for phase, hook_id, what in cases:
                path = f"/{hook_id}/filter/{phase}"
                samples: dict[str, list[float]] = {"floor": [], "echo": []}
                for index in range(args.warmup + args.requests):
                    for name, port in (("floor", floor_port), ("echo", echo_port)):
                        started = time.perf_counter()
                        answer = http.post(f"http://127.0.0.1:{port}{path}", content=payloads[phase])
                        elapsed = (time.perf_counter() - started) * 1000
                        answer.raise_for_status()
                        if index >= args.warmup:
                            samples[name].append(elapsed)
                rows.append((phase, hook_id, what, samples))
    finally:
        for process in (floor, echo):
            process.terminate()
            process.wait(timeout=10)

    size_kib = {phase: len(body) / 1024 for phase, body in payloads.items()}
    print(
        f"hooks latency over HTTP, 200-message chat (inlet {size_kib['inlet']:.0f} KiB, "
        f"outlet {size_kib['outlet']:.0f} KiB), {args.requests} requests per cell, ms"
    )
    header = (
        f"{'phase':<7} {'filter':<17} {'work':<26} {'floor p50':>9} {'floor p99':>9} "
        f"{'echo p50':>9} {'echo p99':>9} {'overhead p50':>12} {'target':>7}"
    )
    print(header)
    print("-" * len(header))
    for phase, hook_id, what, samples in rows:
        floor_p50, echo_p50 = statistics.median(samples["floor"]), statistics.median(samples["echo"])
        overhead = echo_p50 - floor_p50
        verdict = "n/a" if what not in TARGETED else ("met" if overhead <= TARGET_MS else "MISSED")
        floor_p99, echo_p99 = (
            servers.percentile(samples["floor"], 0.99),
            servers.percentile(samples["echo"], 0.99),
        )
        print(
            f"{phase:<7} {hook_id:<17} {what:<26} {floor_p50:9.2f} {floor_p99:9.2f} "
            f"{echo_p50:9.2f} {echo_p99:9.2f} {overhead:12.2f} {verdict:>7}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
