"""The whole conversation (`e2e/conversation.py`) against a real `echoctl serve` in embedded mode.

That is what a `mode: standalone` tenant's pod runs: no ECHO_DATABASE_URL or ECHO_EMBEDDING_URL, so
embedded PostgreSQL, Qdrant local mode, the packaged MiniLM and the in-process worker, all under
ECHO_DATA_DIR; the offline LLM provider for every background job (`ECHO_LLM_PROVIDER=offline`); a
valves file, as the operator mounts one. Open WebUI's files API is the fake of
`tests/fakes/openwebui_files.py` (ECHO_OPENWEBUI_URL), since Open WebUI sends a filter only file
references. One addition to the pod: a fake Gemini key and server, for the `echo.<model>` pipe
only (the last test); every other step uses a model of another connection, as an offline tenant's
users do. The cluster tier calls the same steps through a port-forward.

Slow (a minute or two: the embedder's start, the background jobs), so it is an e2e check, not part
of `make test`: `E2E_LOCAL=1 .venv/bin/pytest e2e/test_conversation_local.py -x -q`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import conversation
import pytest
from conversation import Chat, Hooks, User
from fakes.gemini_server import FakeGemini
from fakes.openwebui_files import OWUI_FILES_KEY, FakeFiles, fake_files

pytestmark = [
    pytest.mark.skipif(os.environ.get("E2E_LOCAL") != "1", reason="slow e2e check: set E2E_LOCAL=1"),
    pytest.mark.timeout(600),
]

API_KEY = "e2e-local-hooks-key"
ADMIN_KEY = "e2e-local-admin-key"
PIPE = "echo.gemini-2.5-flash"
TIMINGS: dict[str, float] = {}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Local:
    hooks: Hooks
    files: FakeFiles
    log: Path
    valves: Path
    process: subprocess.Popen[bytes]

    def log_tail(self, lines: int = 80) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    work = tmp_path_factory.mktemp("echo-standalone")
    valves = work / "valves.json"
    valves.write_text("{}")  # the defaults; the first test writes the test's valves, as a patched spec does
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    with fake_files() as files, FakeGemini() as gemini:
        env.update(
            {
                "ECHO_DATA_DIR": str(work / "data"),
                "ECHO_API_KEY": API_KEY,
                "ECHO_ADMIN_KEY": ADMIN_KEY,
                "ECHO_HOST": "127.0.0.1",
                "ECHO_PORT": str(port),
                "ECHO_LLM_PROVIDER": "offline",
                "ECHO_VALVES_FILE": str(valves),
                "ECHO_OPENWEBUI_URL": files.url,
                "ECHO_OPENWEBUI_API_KEY": OWUI_FILES_KEY,
                "ECHO_GEMINI_API_KEY": "fake-gemini-key",  # the pipe only: background jobs stay offline
                "ECHO_GEMINI_BASE_URL": gemini.base_url,
            }
        )
        log = work / "echo.log"
        started = time.monotonic()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "echo.entrypoints.cli", "serve"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        hooks = Hooks(f"http://127.0.0.1:{port}", API_KEY, ADMIN_KEY)
        running = Local(hooks, files, log, valves, process)
        try:
            _wait_listening(running, 60)
            hooks.wait_ready(180)
            TIMINGS["start to ready"] = time.monotonic() - started
            yield running
        finally:
            hooks.close()
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            print(f"\n--- echoctl serve log (last lines of {log}) ---\n{running.log_tail()}")
            print("--- timings ---\n" + "\n".join(f"{k:>22}: {v:6.1f} s" for k, v in TIMINGS.items()))


def _wait_listening(local: Local, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert local.process.poll() is None, f"echoctl serve exited:\n{local.log_tail()}"
        try:
            with socket.create_connection(("127.0.0.1", int(local.hooks.url.rsplit(":", 1)[1])), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"echoctl serve did not listen within {within} s:\n{local.log_tail()}")


def _timed(name: str, started: float) -> None:
    TIMINGS[name] = time.monotonic() - started


def test_the_service_is_ready_and_configured(local: Local) -> None:
    service = conversation.check_service(local.hooks)
    assert service.in_process_worker, service.ready  # embedded: the jobs run in this process
    assert PIPE in service.models.pipes  # the fake Gemini's; an offline tenant lists none
    wanted = conversation.quick_valves()
    with pytest.raises(conversation.StepFailed, match="managed by a file"):  # as in a tenant's pod
        conversation.configure(local.hooks, wanted)
    started = time.monotonic()
    local.valves.write_text(json.dumps(wanted))  # what the operator does with spec_patch(wanted)
    in_force = conversation.configure(local.hooks, wanted, within=30)  # waits for the hot reload
    _timed("valves reload", started)
    assert in_force["echo_compression"]["compression_threshold_tokens"] == 400
    assert in_force["echo_context"]["MAX_DIRECT_TEXT_SIZE"] == 4096


def test_a_key_in_an_answer_is_masked(local: Local) -> None:
    started = time.monotonic()
    masked = conversation.masking(local.hooks, User.new("mallory"))
    _timed("masking", started)
    assert masked.counted >= 1


def test_a_long_conversation_is_summarised(local: Local) -> None:
    started = time.monotonic()
    summarised = conversation.long_conversation(local.hooks, User.new("gardener"), within=120)
    _timed("long conversation", started)
    TIMINGS["  of which summary wait"] = summarised.waited_s
    assert summarised.summaries_created is not None  # the in-process worker's /metrics
    assert summarised.summaries_created >= 1
    print(
        f"\nsummary after {summarised.turns} turns covers {summarised.covers} messages;"
        f" the model got {summarised.sent_messages} of {summarised.history_messages + 1}"
    )


def test_a_fact_becomes_a_memory_recalled_in_a_later_chat(local: Local) -> None:
    started = time.monotonic()
    recalled = conversation.memory_across_chats(local.hooks, User.new("alice"), User.new("bob"), within=120)
    _timed("memory", started)
    TIMINGS["  of which distill wait"] = recalled.waited_s
    assert recalled.listed is not None  # the admin key was given
    assert recalled.listed["total"] >= 1


def test_a_large_file_goes_to_the_session_rag(local: Local) -> None:
    started = time.monotonic()
    ingested = conversation.large_attachment(local.hooks, User.new("reader"), local.files, within=180)
    _timed("large attachment", started)
    TIMINGS["  of which ingest wait"] = ingested.waited_s
    assert ingested.size >= 8 * ingested.inline_limit
    assert any(r.startswith("record:") for r in local.files.requests)  # read through the files API


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_pipe_turn_answers_with_the_key_masked(local: Local, stream: bool) -> None:
    """The pipe's turn: its own inlet last, `/chat/completions` (the fake Gemini answers "echo: <the
    user's text>", so the key comes back in the answer), its outlet first; the pipe masks it itself."""
    key = conversation.fake_google_key()
    before = local.hooks.metrics().total("echo_secrets_masked_total", where="pipe")
    chat = Chat(User.new("piper"), model=PIPE, stream=stream)
    said = conversation.turn(local.hooks, chat, f"Please remember my key {key} for later.")
    assert said.answer.startswith("echo:"), said.answer
    assert "remember my key" in said.answer
    assert key not in said.answer
    assert conversation.GOOGLE_LABEL in said.shown
    assert "echo_ctx" in said.sent  # what the pipe's own inlet keeps past Open WebUI's metadata strip
    assert local.hooks.metrics().total("echo_secrets_masked_total", where="pipe") > before
