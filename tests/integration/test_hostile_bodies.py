"""Hostile bodies over HTTP against the real app: a crafted answer can neither stall the server nor leak.

Masking runs on a worker thread in bounded chunks under the hook's deadline (DESIGN §6); what it could
not verify in time is withheld, never passed through.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from fakes.live_server import LiveServer

from echo.capabilities.masking import filter as masking_filter
from echo.config.settings import Settings
from echo.entrypoints.http import create_app

GOOGLE_KEY = "AIza" + "SyD" + "x7" * 16
DEADLINE_S = 1.0
# Every "sk-" is a place where a token may start: masking such text costs about 1 s per MB here,
# so 12 MB cannot be verified within the deadline.
CRAFTED = "sk-" * 4_000_000


def outlet_body(answer: str) -> dict[str, Any]:
    return {
        "model": "gemini-2.5-flash",
        "chat_id": "chat-1",
        "id": "a2",
        "messages": [
            {"id": "u1", "role": "user", "content": "hello"},
            {"id": "a1", "role": "assistant", "content": f"earlier answer with {GOOGLE_KEY}"},
            {"id": "u2", "role": "user", "content": "again"},
            {"id": "a2", "role": "assistant", "content": answer},
        ],
    }


async def _probe_while(task: asyncio.Task[Any], http: httpx.AsyncClient) -> list[float]:
    latencies: list[float] = []
    while not task.done():
        started = time.perf_counter()
        answer = await http.get("/healthz")
        latencies.append(time.perf_counter() - started)
        assert answer.status_code == 200
        await asyncio.sleep(0.05)
    return latencies


def test_crafted_outlet_neither_stalls_the_server_nor_leaks(settings: Settings, auth: dict[str, str]) -> None:
    settings.data_dir.mkdir(parents=True)
    valves = {"echo_context": {"OUTLET_DEADLINE_MS": int(DEADLINE_S * 1000)}}
    (settings.data_dir / "valves.json").write_text(json.dumps(valves))
    raw = json.dumps({"body": outlet_body(f"{CRAFTED} {GOOGLE_KEY} fin")}).encode()

    async def scenario(url: str) -> tuple[httpx.Response, float, list[float]]:
        async with httpx.AsyncClient(base_url=url, headers=auth, timeout=60) as http:
            assert (await http.get("/healthz")).status_code == 200

            async def hostile() -> tuple[httpx.Response, float]:
                started = time.perf_counter()
                answer = await http.post(
                    "/echo_context/filter/outlet", content=raw, headers={"content-type": "application/json"}
                )
                return answer, time.perf_counter() - started

            task = asyncio.create_task(hostile())
            latencies = await _probe_while(task, http)
            answer, elapsed = await task
            return answer, elapsed, latencies

    with LiveServer(create_app(settings)) as server:
        answer, elapsed, latencies = asyncio.run(scenario(server.url))
        after = httpx.post(
            f"{server.url}/echo_context/filter/outlet", json={"body": outlet_body(GOOGLE_KEY)}, headers=auth
        )
    print(f"hostile outlet: {elapsed:.2f} s; /healthz: {len(latencies)} probes, max {max(latencies):.3f} s")
    assert answer.status_code == 200
    assert len(latencies) >= 3  # the probes ran while the hostile request was in flight
    assert max(latencies) < 1.0
    assert elapsed < DEADLINE_S + 2.0  # parsing, reading and answering 12 MB come on top of the hook
    text = answer.text
    assert GOOGLE_KEY not in text
    messages = answer.json()["messages"]
    assert messages[1]["content"] == "earlier answer with [CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]"
    content = messages[3]["content"]
    assert content.endswith(masking_filter.WITHHELD)  # what could not be verified in time is withheld
    verified = content.removesuffix(masking_filter.WITHHELD)
    assert verified == CRAFTED[: len(verified)]  # the masked beginning: nothing in it was a secret
    assert after.status_code == 200
    assert after.json()["messages"][3]["content"] == "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]"
