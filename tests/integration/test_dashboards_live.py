"""The dashboards seen, not only parsed: a real Prometheus (Debian's 2.42, fetched by `make tools`)
scrapes a live echo-hooks service with its in-process worker while traffic goes through every
capability (filters, compression and memory jobs, attachments and the map_reduce job, the tool
server, the `echo.*` pipe against the fake Gemini); then every expression of every dashboard the
chart ships is evaluated by Prometheus, and one whose series all received traffic must return data.

The series a query selects "received traffic" when the scrape holds a sample of each of them with
the labels its exact matchers name; the operator's series live in another process (its own
registry, not part of this service) and are reported as not exercised here, as are series of
failure paths this traffic does not take. The test also requires that most queries were exercised,
so it cannot pass by exercising nothing. (The chart ships no alert rules.)
"""

from __future__ import annotations

import asyncio
import base64
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import dashboards, documents
from fakes.eventually import eventually
from fakes.gemini_server import FakeGemini
from fakes.hooks_service import exchange, outlet_body
from fakes.memory_service import MemoryService, memory_service
from fakes.openwebui_files import OWUI_FILES_KEY, FakeFiles, fake_files
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "tools" / "bin" / "prometheus"
SCRAPE_SECONDS = 1
MIN_EXERCISED_SHARE = 0.6
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^{}]*)\}")
_EXACT = re.compile(r'([A-Za-z_]\w*)\s*=\s*"([^"]*)"')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def files() -> Iterator[FakeFiles]:
    with fake_files() as fake:
        yield fake


def prometheus(tmp_path: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_SECONDS}s\n  evaluation_interval: {SCRAPE_SECONDS}s\n"
        f"scrape_configs:\n  - job_name: echo-hooks\n    static_configs:\n      - targets: ['{target}']\n"
    )
    process = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("wb"),
    )
    return process, f"http://127.0.0.1:{port}"


async def traffic(service: MemoryService, files: FakeFiles, gemini: FakeGemini) -> None:
    """One pass through every capability, as Open WebUI would drive it."""
    http = service.http
    await http.post("/echo_memory/valves/update", json={"WINDOW_SIZE": 2, "WINDOW_OVERLAP": 0})
    await http.post("/echo_context/valves/update", json={"MAX_DIRECT_TEXT_SIZE": 2000})
    await http.post(
        "/echo_compression/valves/update",
        json={"compression_threshold_tokens": 300, "keep_last": 2, "model_thresholds": "{}"},
    )
    messages: list[dict[str, Any]] = []
    for i in range(8):
        messages += exchange(i, "the Lisbon trip")
    messages[-1]["content"] += " The key is AIza" + "Sy" + "Q7x" * 11 + "."
    long_text = documents.long_text(8000, marker="The vault code is 7741-ALPHA.")
    big = files.add("big", "handbook.txt", "text/plain", long_text.encode(), long_text)
    small = files.add("small", "note.txt", "text/plain", b"Meet at 10.", "Meet at 10.")
    image = documents.png(2, 2)
    for round_ in range(2):
        body = {
            "model": "echo.gemini-2.5-flash",
            "messages": [*messages[:-1], {"role": "user", "content": "And the vault?"}],
            "files": [big, small],
            "metadata": {"chat_id": "c1", "message_id": f"m{round_}", "files": [big, small]},
        }
        for filter_id in ("echo_context", "echo_compression", "echo_memory", "echo.gemini-2.5-flash"):
            body = await service.hook(filter_id, "inlet", body, "u1")
        pasted = [
            {"type": "text", "text": "Look:"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + _b64(image)}},
        ]
        await service.hook(
            "echo_context", "inlet", {"model": "m", "messages": [{"role": "user", "content": pasted}]}, "u1"
        )
        answer = await http.post(
            "/chat/completions",
            json={"model": "echo.gemini-2.5-flash", "stream": round_ == 1, "messages": body["messages"][-3:]},
            headers={"x-openwebui-user-id": "u1", "x-openwebui-chat-id": "c1"},
        )
        assert answer.status_code == 200, answer.text
        outlet = outlet_body(messages, chat_id="c1")
        for filter_id in ("echo.gemini-2.5-flash", "echo_context", "echo_compression", "echo_memory"):
            outlet = await service.hook(filter_id, "outlet", outlet, "u1")
        await service.drained(within=120)
    source = re.search(r'source_id="(U_[^"]+)"', str(body))
    assert source, "the large file was not routed to the ephemeral RAG"
    headers = {"x-openwebui-user-id": "u1", "x-openwebui-chat-id": "c1"}
    found = await http.post(
        "/tools/search_session_context",
        json={"source_id": source.group(1), "query": "vault code"},
        headers=headers,
    )
    assert found.status_code == 200, found.text
    await http.post("/tools/search_memories", json={"query": "Lisbon"}, headers=headers)
    await http.post("/tools/save_plan", json={"goal": "Plan the trip", "status": "todo"}, headers=headers)
    await service.admin.get("/memories", params={"user_id": "u1"})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def samples(text: str) -> list[tuple[str, dict[str, str]]]:
    return [
        (sample.name, dict(sample.labels))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def exercised(expr: str, scraped: list[tuple[str, dict[str, str]]]) -> bool:
    """Whether every series the expression selects has a sample with its exact label matchers."""
    concrete = dashboards.concrete(expr)
    wanted: dict[str, dict[str, str]] = {name: {} for name in dashboards.metric_names(expr)}
    for name, matchers in _SELECTOR.findall(concrete):
        wanted[name] = {**wanted.get(name, {}), **dict(_EXACT.findall(matchers))}
    for name, labels in wanted.items():
        if not any(
            sample == name and all(have.get(k) == v for k, v in labels.items()) for sample, have in scraped
        ):
            return False
    return True


@pytest.mark.skipif(not PROMETHEUS.exists(), reason="tools/bin/prometheus is absent: run `make tools`")
async def test_every_dashboard_query_returns_data_where_traffic_was_sent(
    dsn: str, tmp_path: Path, gemini: FakeGemini, files: FakeFiles
) -> None:
    async with memory_service(
        dsn,
        tmp_path,
        openwebui_url=files.url,
        openwebui_api_key=OWUI_FILES_KEY,
        gemini_api_key="fake",
        gemini_base_url=gemini.base_url,
        job_metrics_seconds=0.5,
    ) as service:
        target = str(service.http.base_url).removeprefix("http://").rstrip("/")
        process, url = prometheus(tmp_path, target)
        try:
            async with httpx.AsyncClient(base_url=url, timeout=10) as prom:

                async def ready() -> bool:
                    try:
                        return (await prom.get("/-/ready")).status_code == 200
                    except httpx.HTTPError:
                        return False

                await eventually(ready, within=60, what="Prometheus ready")
                await traffic(service, files, gemini)
                await asyncio.sleep(3 * SCRAPE_SECONDS)  # the worker's gauges refreshed, then scraped
                scraped = samples((await service.http.get("/metrics")).text)
                await asyncio.sleep(3 * SCRAPE_SECONDS)  # rate() wants two scrapes of every series
                rows, empty = [], []
                for path in dashboards.DASHBOARDS:
                    board = dashboards.load(path)
                    for where, expr in dashboards.expressions(board):
                        answer = await prom.get("/api/v1/query", params={"query": dashboards.concrete(expr)})
                        body = answer.json()
                        assert body["status"] == "success", (where, body)
                        has_data = bool(body["data"]["result"])
                        traffic_sent = exercised(expr, scraped)
                        rows.append((where, traffic_sent, has_data))
                        if traffic_sent and not has_data:
                            empty.append(where)
        finally:
            process.terminate()
            process.wait(timeout=20)
    exercised_share = sum(1 for _, sent, _ in rows if sent) / len(rows)
    print(f"\n{len(rows)} dashboard queries; {exercised_share:.0%} exercised by this traffic")
    for where, sent, has_data in rows:
        print(f"  {'data' if has_data else 'empty':5} {'traffic' if sent else 'no traffic':10} {where}")
    assert not empty, f"queries with traffic but no data: {empty}"
    assert exercised_share >= MIN_EXERCISED_SHARE, f"only {exercised_share:.0%} of the queries were exercised"
