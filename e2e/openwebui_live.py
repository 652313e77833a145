"""ECHO behind a real Open WebUI 0.12.4, on this machine, offline (`make openwebui-live`).

Two passes, each with its own Open WebUI (from its own venv, `.venv-openwebui`), `echoctl serve`
(embedded) with the Gemini pipe pointed at the fake Gemini server, and fresh data: `function`, where
Open WebUI reaches ECHO only through the Function `echoctl openwebui connect` installs (ECHO's pipe
model is a plain OpenAI connection with its model listed, so Open WebUI reads no Pipelines filter of
it), and `pipelines`, where ECHO is the Pipelines connection (filters and pipe models) and its tool
server is registered at Open WebUI's start. `--connection function|pipelines` runs one.

Each pass, through Open WebUI's own API and in its default function calling mode (native, checked):
signs up an admin; the function pass runs `echoctl openwebui connect` as a user types it
(`connect_checks`: --dry-run changes nothing, a wrong admin key is refused, the first run installs
ECHO's Function (global, active, its valves) and registers ECHO's tool server, a second run and a
second --dry-run change nothing, the checks of native function calling, Open WebUI's context
compaction and memory review read Open WebUI's real settings, no key is printed), the pipelines
pass checks the admin Pipelines page and edits a valve there. Then: chats (plain and streamed) with
a Google key and a GitHub token in the answer arrive masked, each ECHO filter runs once per turn;
a fact told in one chat is distilled into a memory and recalled (fenced) in a later chat and found
by the tool server; two turns with `echo.<model>` where the model calls ECHO's own search_memories
(run in the pipe) get the call, its result and both thought signatures back from the rich shadow; a
user Tool runs through Open WebUI's own native tool calling for `echo.<model>` in the web UI's chat
flow (`live_pipe_tools`); a long chat reaches the model compressed; a large file reaches the model
as an ephemeral-RAG block (summary pending, then written by the map_reduce job) and is found by
search_session_context, which the model then calls through ECHO's tool server; and a user asks
"what do you remember about me?" and "forget that …" (`live_memory_tools`: list_memories, then
search_memories and forget_memory, run by Open WebUI against ECHO's tool server). Prints a line per
check and exits non-zero on the first failure. Needs about 3 GB for the venv.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import live_memory_tools  # noqa: E402
import live_pipe_tools  # noqa: E402
from fakes.gemini_server import FakeGemini, signature_bytes  # noqa: E402
from fakes.memory_llm import memory_answer  # noqa: E402

OPENWEBUI = ROOT / ".venv-openwebui" / "bin" / "open-webui"
ECHO_KEY = "live-check-key"
ECHO_ADMIN_KEY = "live-check-admin-key"  # the memory-management API's own key (`/memories`)
GOOGLE_KEY = "AIza" + "Sy" + "Q7x" * 11
GITHUB_TOKEN = "ghp_" + "Ab1" * 12
MODEL = "echo.gemini-2.5-flash"
EVERY_USER = {"principal_type": "user", "principal_id": "*", "permission": "read"}  # a tool server's grant


def openwebui_env(data_dir: Path, base_url: str, key: str, **settings: str) -> dict[str, str]:
    """Open WebUI's environment: offline, one OpenAI connection at ``base_url``, ``settings`` over it
    (variables of this process named ECHO_* or GEMINI_* are left out)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    return {
        **base,
        "DATA_DIR": str(data_dir),
        "WEBUI_SECRET_KEY": "echo-e2e",
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "ENABLE_OLLAMA_API": "false",
        "ENABLE_OPENAI_API": "true",
        "OPENAI_API_BASE_URLS": base_url,
        "OPENAI_API_KEYS": key,
        "RAG_EMBEDDING_ENGINE": "openai",
        "BYPASS_EMBEDDING_AND_RETRIEVAL": "true",
        "ENABLE_TITLE_GENERATION": "false",
        "ENABLE_TAGS_GENERATION": "false",
        "ENABLE_FOLLOW_UP_GENERATION": "false",
        "ENABLE_RETRIEVAL_QUERY_GENERATION": "false",
        "BYPASS_MODEL_ACCESS_CONTROL": "true",
        "ENABLE_API_KEYS": "true",  # ECHO reads uploaded files with an admin's API key
        **settings,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, seconds: float, ok: str = "") -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(url, timeout=2)
            if answer.status_code == 200 and ok in answer.text:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer in {seconds} s")


class Checks:
    """Prints a line per check; the first failure ends the run, unless ``keep_going`` (then every
    failure is printed with its detail and counted, and the run exits non-zero at the end)."""

    def __init__(self, *, keep_going: bool = False) -> None:
        self.rows: list[tuple[str, str]] = []
        self.prefix = ""  # the pass: [function] or [pipelines]
        self.keep_going = keep_going

    @property
    def failed(self) -> int:
        return sum(1 for _, outcome in self.rows if outcome == "FAILED")

    def __call__(self, what: str, passed: bool, detail: Any = "") -> None:
        what = self.prefix + what
        self.rows.append((what, "ok" if passed else "FAILED"))
        print(f"{'ok' if passed else 'FAILED':7} {what}", flush=True)
        if not passed:
            if not self.keep_going:
                raise SystemExit(f"failed: {what}: {str(detail)[:500]}")
            print(f"        {str(detail)[:500]}", flush=True)


CONNECTIONS = ("function", "pipelines")


def main(argv: list[str]) -> int:
    """Every check once per way of connecting (`--connection function|pipelines`, default both): each
    pass starts its own Open WebUI and ECHO, on fresh data directories."""
    if not OPENWEBUI.exists():
        print(f"{OPENWEBUI} is missing: run `make openwebui-venv` first", file=sys.stderr)
        return 2
    chosen: tuple[str, ...] = CONNECTIONS
    keep_going = "--keep-going" in argv
    argv = [arg for arg in argv if arg != "--keep-going"]
    if argv[:1] == ["--connection"] and len(argv) == 2 and argv[1] in CONNECTIONS:
        chosen = (argv[1],)
    elif argv:
        usage = f"usage: openwebui_live.py [--connection {'|'.join(CONNECTIONS)}] [--keep-going]"
        print(usage, file=sys.stderr)
        return 2
    check = Checks(keep_going=keep_going)
    for connection in chosen:
        print(f"\n== Open WebUI connected through {PASSES[connection]}", flush=True)
        check.prefix = f"[{connection}] "
        one_pass(check, connection)
    if check.failed:
        print(f"\n{check.failed} of {len(check.rows)} checks FAILED against Open WebUI ({', '.join(chosen)})")
        return 1
    print(f"\n{len(check.rows)} checks passed against Open WebUI ({', '.join(chosen)})")
    return 0


PASSES = {
    "function": "the Function that `echoctl openwebui connect` installs (the pipe model as a plain"
    " OpenAI connection: no Pipelines filters)",
    "pipelines": "the Pipelines connection (filters and pipe models), the tool server registered at start",
}


def one_pass(check: Checks, connection: str) -> None:
    work = Path(tempfile.mkdtemp(prefix=f"echo-openwebui-{connection}-"))
    echo_port, webui_port = free_port(), free_port()
    echo = f"http://127.0.0.1:{echo_port}"
    processes: list[subprocess.Popen[bytes]] = []
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
    if connection == "function":
        # Only the pipe model from ECHO's connection (a model list of its own: Open WebUI then reads no
        # `/models`, so it knows no Pipelines filter); ECHO's filters run through the Function only.
        connection_env = {"OPENAI_API_CONFIGS": json.dumps({"0": {"enable": True, "model_ids": [MODEL]}})}
    else:
        tool_server = {
            "url": echo,
            "path": "tools/openapi.json",
            "type": "openapi",
            "auth_type": "bearer",
            "key": ECHO_KEY,
            "config": {"enable": True, "access_grants": [EVERY_USER]},
            "info": {"id": "echo", "name": "ECHO"},
        }
        connection_env = {"TOOL_SERVER_CONNECTIONS": json.dumps([tool_server])}
    with FakeGemini() as gemini:
        gemini.responder = model_answer
        try:
            webui_env = openwebui_env(
                work / "webui",
                echo,
                ECHO_KEY,
                WEBUI_SECRET_KEY="live-check",
                ENABLE_FORWARD_USER_INFO_HEADERS="true",  # tool calls say which user calls
                **connection_env,
            )
            webui_log = (work / "webui.log").open("wb")
            processes.append(
                subprocess.Popen(
                    [str(OPENWEBUI), "serve", "--host", "127.0.0.1", "--port", str(webui_port)],
                    env=webui_env,
                    cwd=work,
                    stdout=webui_log,
                    stderr=subprocess.STDOUT,
                )
            )
            wait_for(f"http://127.0.0.1:{webui_port}/health", 300, "true")
            webui = f"http://127.0.0.1:{webui_port}"
            signup = httpx.post(
                f"{webui}/api/v1/auths/signup",
                json={"name": "Admin", "email": "admin@example.com", "password": "live-check-123"},
                timeout=60,
            ).json()
            api_key = httpx.post(
                f"{webui}/api/v1/auths/api_key",
                headers={"Authorization": f"Bearer {signup['token']}"},
                timeout=60,
            ).json()["api_key"]
            echo_env = {
                **base_env,
                "ECHO_API_KEY": ECHO_KEY,
                "ECHO_ADMIN_KEY": ECHO_ADMIN_KEY,
                "ECHO_GEMINI_API_KEY": "fake",
                "ECHO_GEMINI_BASE_URL": gemini.base_url,
                "ECHO_DATA_DIR": str(work / "echo"),
                "ECHO_PORT": str(echo_port),
                "ECHO_OPENWEBUI_URL": webui,
                "ECHO_OPENWEBUI_API_KEY": api_key,
            }
            echo_log = (work / "echo.log").open("wb")
            processes.append(
                subprocess.Popen(
                    [str(ROOT / ".venv/bin/echoctl"), "serve"],
                    env=echo_env,
                    stdout=echo_log,
                    stderr=subprocess.STDOUT,
                )
            )
            wait_for(f"{echo}/readyz", 180, '"ready"')
            run_checks(check, connection, webui, echo, gemini, signup, api_key)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=30)
    print(f"logs of the {connection} pass in {work}", flush=True)


SHADOW_MARK = "SHADOW-CHECK"
SHADOW_QUESTION = f"{SHADOW_MARK} 1: what is my dog's name?"
FILE_QUESTION = "FILE-CHECK: what opens the vault?"  # + " (source_id=…)": the model calls the tool server
SIG_CALL, SIG_ANSWER = b"live-call-signature\x00\xff", b"live-answer-signature\x01\xfe"


def model_answer(body: dict[str, Any]) -> str | list[dict[str, Any]]:
    """The fake model: background work (a JSON answer asked for) gets a distillation or a merge,
    chats get their last user text echoed (so the masking checks see the secrets come back); the
    rich-shadow check's first question gets a signed call of ECHO's search_memories, then a signed
    answer."""
    if body.get("generationConfig", {}).get("responseMimeType") == "application/json":
        return memory_answer(body)
    tool_flow = live_pipe_tools.model_answer(body)
    if tool_flow is not None:
        return tool_flow
    memory_tools = live_memory_tools.model_answer(body)
    if memory_tools is not None:
        return memory_tools
    contents = body.get("contents", [])
    asked = [i for i, c in enumerate(contents) if c.get("role", "user") == "user" and _texts(c)]
    text = _texts(contents[asked[-1]]) if asked else ""
    if FILE_QUESTION in text:  # Open WebUI declares search_session_context (its tool server): it runs it
        results = [
            p["functionResponse"] for c in contents for p in c.get("parts", []) if "functionResponse" in p
        ]
        if not results:
            source = re.search(r"source_id=(U_[A-Za-z0-9_-]+)", text)
            args = {"source_id": source.group(1) if source else "", "query": "vault code"}
            return [{"functionCall": {"name": "search_session_context", "args": args}}]
        found = re.search(r"code (\d{4}-[A-Z]+)", json.dumps(results))
        return (
            f"The vault opens with {found.group(1)}."
            if found
            else f"Not found in {json.dumps(results)[:300]}"
        )
    if text.rstrip().endswith(SHADOW_QUESTION):  # the user's text ends the content (recalled memories lead)
        answered = any("functionResponse" in p for c in contents[asked[-1] + 1 :] for p in c.get("parts", []))
        if not answered:
            call = {"functionCall": {"name": "search_memories", "args": {"query": "my dog"}}}
            return [{**call, "thoughtSignature": base64.b64encode(SIG_CALL).decode()}]
        return [
            {"text": "Your memories say: Pixel.", "thoughtSignature": base64.b64encode(SIG_ANSWER).decode()}
        ]
    return "echo: " + text


def _texts(content: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in content.get("parts", []) if isinstance(p, dict))


def pipe_checks(check: Checks, http: httpx.Client, echo_http: httpx.Client, gemini: FakeGemini) -> None:
    """Several turns of echo.<model> through Open WebUI with ECHO's own tool: the call runs in the pipe,
    and the next turn gets the call, its result and both thought signatures back from the shadow
    (Open WebUI only kept the answer text)."""
    first = {"role": "user", "content": SHADOW_QUESTION}
    chat = {"model": "echo.gemini-2.5-flash", "stream": True, "messages": [first]}
    streamed = http.post("/api/chat/completions", json=chat)
    answer = "".join(
        json.loads(line[6:])["choices"][0]["delta"].get("content", "")
        for line in streamed.text.splitlines()
        if line.startswith("data: {") and '"choices"' in line
    )
    tool_calls = [
        line for line in echo_http.get("/metrics").text.splitlines()
        if line.startswith('echo_pipe_tool_calls_total{executor="echo",outcome="ok"}')
    ]  # fmt: skip
    check(
        "a streamed pipe answer through Open WebUI ran ECHO's search_memories in the pipe",
        answer == "Your memories say: Pixel." and bool(tool_calls),
        {"answer": answer, "metrics": tool_calls, "raw": streamed.text[:400]},
    )
    second = {"role": "user", "content": f"{SHADOW_MARK} 2: and what breed?"}
    history = [first, {"role": "assistant", "content": answer}, second]
    http.post("/api/chat/completions", json={**chat, "stream": False, "messages": history}).raise_for_status()
    sent = next(
        r.body
        for r in reversed(gemini.requests)
        if f"{SHADOW_MARK} 2" in json.dumps(r.body, ensure_ascii=False)
    )
    models = [c for c in sent["contents"] if c.get("role") == "model"]
    results = [p for c in sent["contents"] for p in c.get("parts", []) if "functionResponse" in p]

    def signature(part: dict[str, Any]) -> bytes:
        return signature_bytes(part.get("thoughtSignature", ""))

    check(
        "the next turn gets the tool call, its result and both signatures back (bytes exact)",
        len(models) >= 2
        and models[0]["parts"][0].get("functionCall", {}).get("name") == "search_memories"
        and signature(models[0]["parts"][0]) == SIG_CALL
        and bool(results)
        and results[0]["functionResponse"]["name"] == "search_memories"
        and models[1]["parts"][0].get("text") == answer
        and signature(models[1]["parts"][0]) == SIG_ANSWER,
        json.dumps(sent, ensure_ascii=False)[:1500],
    )


FILTERS = ("echo_context", "echo_compression", "echo_memory")


def run_checks(
    check: Checks,
    connection: str,
    webui: str,
    echo: str,
    gemini: FakeGemini,
    signup: dict[str, Any],
    api_key: str,
) -> None:
    token, user_id = signup["token"], signup["id"]
    http = httpx.Client(base_url=webui, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    echo_http = httpx.Client(base_url=echo, headers={"Authorization": f"Bearer {ECHO_KEY}"}, timeout=10)

    def set_valves(filter_id: str, valves: dict[str, Any]) -> None:
        """A filter's valves: through Open WebUI's Pipelines page, or (the Function has only its own
        valves) on ECHO itself, with the same call Open WebUI's page makes."""
        if connection == "pipelines":
            path = f"/api/v1/pipelines/{filter_id}/valves/update"
            http.post(path, params={"urlIdx": 0}, json=valves).raise_for_status()
        else:
            echo_http.post(f"/{filter_id}/valves/update", json=valves).raise_for_status()

    defaults = http.get("/api/v1/configs/models").json().get("DEFAULT_MODEL_PARAMS") or {}
    check(
        "Open WebUI calls functions natively by default (every check below runs in that mode)",
        (defaults.get("function_calling") or "native") == "native",
        defaults,
    )
    if connection == "function":
        connect_checks(check, http, webui, echo, api_key)
    listed = http.get("/api/models").json()["data"]
    check("Open WebUI lists the echo.* pipe models", MODEL in {m["id"] for m in listed}, listed)
    if connection == "pipelines":
        pipelines = http.get("/api/v1/pipelines/", params={"urlIdx": 0}).json()["data"]
        check(
            "admin Pipelines page lists the three filters",
            {p["id"] for p in pipelines if p["type"] == "filter"} == set(FILTERS),
            pipelines,
        )
        updated = http.post(
            "/api/v1/pipelines/echo_memory/valves/update", params={"urlIdx": 0}, json={"WINDOW_SIZE": 7}
        ).json()
        check(
            "a valve edited in Open WebUI reaches ECHO",
            updated.get("WINDOW_SIZE") == 7
            and echo_http.get("/echo_memory/valves").json()["WINDOW_SIZE"] == 7,
            updated,
        )
    else:
        check(
            "no ECHO filter reaches Open WebUI as a Pipelines filter (the Function is the only way in)",
            not [m for m in listed if "pipeline" in m],
            [m["id"] for m in listed if "pipeline" in m],
        )

    chat = {
        "model": MODEL,
        "stream": False,
        "messages": [{"role": "user", "content": f"repeat {GOOGLE_KEY} please"}],
    }
    before = hook_counts(echo_http)
    answer = http.post("/api/chat/completions", json=chat).json()
    content = answer["choices"][0]["message"]["content"]
    check(
        "a chat through Open WebUI answers, the Google key masked",
        "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]" in content and GOOGLE_KEY not in content,
        answer,
    )
    after = hook_counts(echo_http)
    once = all(
        after.get((f, p), 0) - before.get((f, p), 0) == 1 for f in FILTERS for p in ("inlet", "outlet")
    )
    check(
        "each ECHO filter's inlet and outlet ran once for the turn",
        once,
        json.dumps({str(k): v for k, v in after.items()}),
    )
    streamed = http.post(
        "/api/chat/completions",
        json={
            **chat,
            "stream": True,
            "messages": [{"role": "user", "content": f"token {GITHUB_TOKEN} here"}],
        },
    )
    check(
        "a streamed chat arrives masked",
        "[JETON GITHUB MASQUÉ PAR SÉCURITÉ]" in streamed.text and GITHUB_TOKEN[:12] not in streamed.text,
        streamed.text[:500],
    )
    if connection == "pipelines":
        counts = hook_counts(echo_http)
        check(
            "Open WebUI called the pipe's own inlet and outlet (a Pipelines pipe)",
            all(counts.get((MODEL, p), 0) >= 2 for p in ("inlet", "outlet")),
            counts,
        )

    memory_checks(check, http, echo_http, user_id, gemini, set_valves)
    pipe_checks(check, http, echo_http, gemini)
    live_pipe_tools.tool_flow_checks(check, http, gemini)
    compression_checks(check, http, gemini, set_valves)
    source_id = attachment_checks(check, http, echo_http, user_id, gemini, set_valves)

    returned = 'echo_pipe_tool_calls_total{executor="openwebui",outcome="returned"}'
    searches, handed = _count(echo_http, "echo_context_search_seconds_count"), _count(echo_http, returned)
    content = web_ui_turn(http, f"{FILE_QUESTION} (source_id={source_id})", tool_ids=["server:echo"])
    check(
        "the model's call of search_session_context runs through ECHO's tool server",
        "7741-ALPHA" in content
        and _count(echo_http, "echo_context_search_seconds_count") > searches
        and _count(echo_http, returned) > handed,  # the pipe handed the call to Open WebUI, which ran it
        content[:1200],
    )
    live_memory_tools.memory_tool_checks(
        check,
        echo_http,
        user_id,
        lambda question: web_ui_turn(http, question, tool_ids=["server:echo"]),
        ECHO_ADMIN_KEY,
    )


ECHOCTL = ROOT / ".venv" / "bin" / "echoctl"


def echoctl_connect(webui: str, echo: str, admin_key: str, *flags: str) -> tuple[int, str]:
    """`echoctl openwebui connect` as a user runs it: the URLs as flags, the keys from the environment
    (unless `flags` names them); its exit status and output, printed indented."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_")}
    env.update(ECHO_OPENWEBUI_API_KEY=admin_key, ECHO_API_KEY=ECHO_KEY)
    command = [str(ECHOCTL), "openwebui", "connect", "--url", webui, "--echo-url", echo, *flags]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    shown = [
        "***" if i and flags[i - 1] in ("--admin-key", "--echo-key") else flag for i, flag in enumerate(flags)
    ]
    print(f"  $ echoctl openwebui connect {' '.join(shown)}  (exit {done.returncode})", flush=True)
    print("".join(f"  | {line}\n" for line in output.splitlines()), end="", flush=True)
    return done.returncode, output


def connect_checks(check: Checks, http: httpx.Client, webui: str, echo: str, api_key: str) -> None:
    """`echoctl openwebui connect` against this Open WebUI: dry run, refused key, install, idempotence,
    the checks reading Open WebUI's real settings; no key ever printed."""

    def state() -> tuple[Any, Any]:
        functions = http.get("/api/v1/functions/export", params={"include_valves": "true"}).json()
        return functions, http.get("/api/v1/configs/tool_servers").json()["TOOL_SERVER_CONNECTIONS"]

    outputs: list[str] = []
    untouched = state()
    code, out = echoctl_connect(webui, echo, api_key, "--dry-run")
    outputs.append(out)
    would = [line for line in out.splitlines() if line.startswith("would change")]
    check(
        "connect --dry-run lists the Function and the tool server to install, exits 1, changes nothing",
        code == 1
        and any("Function echo: new" in line for line in would)
        and any("tool server echo: new" in line for line in would)
        and state() == untouched,
        out,
    )
    code, out = echoctl_connect(webui, echo, "sk-not-a-key-of-this-open-webui", "--dry-run")
    outputs.append(out)
    check(
        "connect with a wrong admin key exits 3: Open WebUI refused it", code == 3 and "refused" in out, out
    )

    code, out = echoctl_connect(webui, echo, api_key, "--admin-key", api_key, "--echo-key", ECHO_KEY)
    outputs.append(out)
    functions, servers = state()
    echo_function: dict[str, Any] = next((f for f in functions if f["id"] == "echo"), {})
    ours = [s for s in servers if (s.get("info") or {}).get("id") == "echo"]
    source = (ROOT / "services/echo/entrypoints/openwebui_function/echo_filter_function.py").read_text()
    check(
        "connect installs the Function (global, active filter, its valves) and the tool server, exit 0",
        code == 0
        and echo_function.get("type") == "filter"
        and echo_function.get("is_active") is True
        and echo_function.get("is_global") is True
        and echo_function.get("content") == source
        and (echo_function.get("valves") or {}).get("ECHO_URL") == echo
        and (echo_function.get("valves") or {}).get("ECHO_API_KEY") == ECHO_KEY
        and len(ours) == 1
        and ours[0]["url"] == echo
        and ours[0]["key"] == ECHO_KEY
        and ours[0]["config"]["access_grants"]
        == [{"principal_type": "user", "principal_id": "*", "permission": "read"}]
        and re.search(r"^ok +Open WebUI reads ECHO's tool server at .*\(([1-9]\d*) tools\)$", out, re.M)
        is not None,
        {
            "output": out,
            "function": {k: v for k, v in echo_function.items() if k != "content"},
            "servers": servers,
        },
    )
    check(
        "connect reads the real settings: native calling, no compaction nor memory review, headers unknown",
        all(
            re.search(pattern, out, re.M)
            for pattern in (
                r"^ok +native function calling: the default",
                r"^ok +Open WebUI's own context compaction is off$",
                r"^ok +Open WebUI's memory background review is off$",
                r"^cannot check +ENABLE_FORWARD_USER_INFO_HEADERS",
            )
        ),
        out,
    )
    installed = state()
    code, out = echoctl_connect(webui, echo, api_key)
    outputs.append(out)
    check(
        "a second connect changes nothing (exit 0, every line unchanged or ok, same Open WebUI state)",
        code == 0
        and "nothing to change" in out
        and not re.search(r"^(changed|would change|missing|failed) ", out, re.M)
        and state() == installed,
        out,
    )
    code, out = echoctl_connect(webui, echo, api_key, "--dry-run")
    outputs.append(out)
    check(
        "connect --dry-run after it: exit 0, nothing to change",
        code == 0 and "dry run: 0 changes to make" in out and state() == installed,
        out,
    )

    settings = {
        "chat.context_compaction.enable": True,
        "memories.background_review.enable": True,
        "models.default_params": {"function_calling": "legacy"},
    }
    saved = http.get("/api/v1/configs/export").json()
    http.post("/api/v1/configs/import", json={"config": settings}).raise_for_status()
    try:
        code, out = echoctl_connect(webui, echo, api_key, "--dry-run")
        outputs.append(out)
    finally:
        defaults = {"chat.context_compaction.enable": False, "memories.background_review.enable": False}
        restored = {key: saved.get(key, defaults.get(key)) for key in settings}
        restored["models.default_params"] = (
            restored["models.default_params"] or {}
        )  # the value may not be null
        http.post("/api/v1/configs/import", json={"config": restored}).raise_for_status()
    check(
        "with Open WebUI's compaction, memory review, legacy calling on: two warnings, one missing, exit 1",
        code == 1
        and re.search(r"^warning +Open WebUI's own context compaction is on", out, re.M) is not None
        and re.search(r"^warning +Open WebUI's memory background review is on", out, re.M) is not None
        and re.search(r"^missing +native function calling: .*function_calling=legacy", out, re.M) is not None,
        out,
    )
    check(
        "connect never printed a key (Open WebUI's admin key, ECHO's key)",
        not any(secret in text for text in outputs for secret in (api_key, ECHO_KEY)),
        "a key was printed",
    )


SetValves = Callable[[str, dict[str, Any]], None]


def memory_checks(
    check: Checks,
    http: httpx.Client,
    echo_http: httpx.Client,
    user_id: str,
    gemini: FakeGemini,
    set_valves: SetValves,
) -> None:
    """A fact told in one chat is distilled in the background and recalled in a later chat."""
    set_valves("echo_memory", {"WINDOW_SIZE": 2, "WINDOW_OVERLAP": 0})
    fact = "My daughter Léonie starts cello lessons at the Lyon conservatory next Monday."
    told = {
        "model": "echo.gemini-2.5-flash",
        "stream": False,
        "messages": [
            {"role": "user", "content": fact},
            {"role": "assistant", "content": "Wonderful: the Lyon conservatory has a fine cello class."},
            {"role": "user", "content": "She is seven and already reads music; her teacher is Mrs Aubert."},
        ],
    }
    http.post("/api/chat/completions", json=told).raise_for_status()
    deadline, listed = time.monotonic() + 60, {"total": 0}
    while time.monotonic() < deadline and not listed["total"]:
        time.sleep(1)
        listed = echo_http.get(
            "/memories", params={"user_id": user_id}, headers={"Authorization": f"Bearer {ECHO_ADMIN_KEY}"}
        ).json()
    check(
        "a fact told through Open WebUI becomes a memory of that user",
        listed["total"] >= 1 and "Léonie" in json.dumps(listed, ensure_ascii=False),
        listed,
    )
    asked = {
        "model": "echo.gemini-2.5-flash",
        "stream": False,
        "messages": [{"role": "user", "content": "When do Léonie's cello lessons start?"}],
    }
    http.post("/api/chat/completions", json=asked).raise_for_status()
    sent = json.dumps(gemini.last_request.body, ensure_ascii=False)
    check(
        "a later chat's question reaches the model with the memory, fenced as history",
        "<echo_memories" in sent and "conservatory" in sent,
        sent[:800],
    )
    tools = httpx.get(f"{echo_http.base_url}/tools/openapi.json").json()
    found = echo_http.post(
        "/tools/search_memories", json={"query": "cello lessons"}, headers={"x-openwebui-user-id": user_id}
    ).json()
    check(
        "the tool server (OpenAPI public) finds the memory for that user only",
        "/tools/search_memories" in tools["paths"]
        and found["memories"]
        and not echo_http.post(
            "/tools/search_memories",
            json={"query": "cello lessons"},
            headers={"x-openwebui-user-id": "nobody"},
        ).json()["memories"],
        found,
    )


def attachment_checks(
    check: Checks,
    http: httpx.Client,
    echo_http: httpx.Client,
    user_id: str,
    gemini: FakeGemini,
    set_valves: SetValves,
) -> str:
    """A large upload goes to the ephemeral RAG (not injected whole), is summarised in the background,
    and is found by search_session_context; answers the upload's source id."""
    set_valves("echo_context", {"MAX_DIRECT_TEXT_SIZE": 4096, "ECHO_MR_SUMMARY_MAX_WORDS": 80})
    marker = "The vault under the old library opens with the code 7741-ALPHA."
    filler = " ".join(
        f"Paragraph {i} of the facility handbook describes corridors and doors." for i in range(400)
    )
    text = f"{filler}\n\n{marker}\n\n{filler}"
    uploaded = http.post("/api/v1/files/", files={"file": ("handbook.txt", text.encode(), "text/plain")})
    file_id = uploaded.json().get("id")
    check(
        "a large text file uploads to Open WebUI",
        uploaded.status_code == 200 and file_id,
        uploaded.text[:300],
    )
    ask = {
        "model": "echo.gemini-2.5-flash",
        "stream": False,
        "messages": [{"role": "user", "content": "What does the handbook say about the vault?"}],
        "files": [{"type": "file", "id": file_id, "name": "handbook.txt"}],
    }
    http.post("/api/chat/completions", json=ask).raise_for_status()
    sent = json.dumps(gemini.last_request.body, ensure_ascii=False)
    check(
        "the upload reaches the model as a pending rag_ephemeral block, not as Open WebUI's whole text",
        'mode=\\"rag_ephemeral\\"' in sent and "7741-ALPHA" not in sent and "environnement_contexte" in sent,
        sent[:1200],
    )
    source_ids = [s for s in re.findall(r'source_id=\\"(U_[^"\\]+)', sent)]
    source_id = source_ids[0] if source_ids else ""
    deadline = time.monotonic() + 90
    found: dict[str, Any] = {"status": "pending"}
    while time.monotonic() < deadline and found.get("status") == "pending":
        time.sleep(1)
        found = echo_http.post(
            "/tools/search_session_context",
            json={"source_id": source_id, "query": "vault code", "k": 3},
            headers={"x-openwebui-user-id": user_id},
        ).json()
    check(
        "the map_reduce job indexes it and search_session_context finds the passage for that user",
        found.get("status") == "ready" and any("7741-ALPHA" in c["text"] for c in found.get("chunks", [])),
        found,
    )
    http.post("/api/chat/completions", json=ask).raise_for_status()
    later = json.dumps(gemini.last_request.body, ensure_ascii=False)
    check(
        "the next turn carries the summary and the directive to use search_session_context",
        "search_session_context" in later and "en cours" not in later and source_id in later,
        later[:1200],
    )
    return source_id


def web_ui_turn(http: httpx.Client, question: str, *, tool_ids: list[str], within: float = 90) -> str:
    """A first turn as the web UI sends it (Open WebUI creates the chat and runs native tool calls in the
    background, saving the answer): the stored assistant message's text, once written."""
    user_id, answer_id = str(uuid.uuid4()), str(uuid.uuid4())
    body = {
        "model": "echo.gemini-2.5-flash",
        "stream": True,
        "session_id": f"live-{uuid.uuid4().hex[:8]}",
        "id": answer_id,
        "parent_id": None,
        "user_message": {
            "id": user_id,
            "parentId": None,
            "childrenIds": [answer_id],
            "role": "user",
            "content": question,
            "timestamp": int(time.time()),
            "models": ["echo.gemini-2.5-flash"],
        },
        "messages": [{"role": "user", "content": question}],
        "tool_ids": tool_ids,
        "features": {},
    }
    started = http.post("/api/chat/completions", json=body)
    chat_id = started.json().get("chat_id") if started.status_code == 200 else None
    if not chat_id:
        return f"no chat started: {started.status_code} {started.text[:300]}"
    deadline, content = time.monotonic() + within, ""
    while time.monotonic() < deadline:
        time.sleep(1)
        stored = http.get(f"/api/v1/chats/{chat_id}").json()
        message = stored.get("chat", {}).get("history", {}).get("messages", {}).get(answer_id, {})
        content = message.get("content") or ""
        if message.get("done") and content:
            return content
    return f"no answer stored in {within} s: {content[:300]}"


def _count(echo_http: httpx.Client, sample: str) -> float:
    """The value of a sample of echo-hooks' /metrics, labels as exposed (0 when absent)."""
    for line in echo_http.get("/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


def compression_checks(check: Checks, http: httpx.Client, gemini: FakeGemini, set_valves: SetValves) -> None:
    """A long chat is summarised in the background and the next turn reaches the model compressed."""
    set_valves(
        "echo_compression",
        {
            "compression_threshold_tokens": 400,
            "max_context_tokens": 4000,
            "keep_first": 1,
            "keep_last": 2,
            "max_summary_tokens": 200,
            "summary_model_max_context": 3000,
            "model_thresholds": "{}",  # as Open WebUI's editor sends it: no per-model entry overrides these
        },
    )
    history: list[dict[str, str]] = []
    for i in range(10):
        history.append(
            {
                "role": "user",
                "content": f"Step {i} of the garden plan: where do the {i * 3} tomato plants go?",
            }
        )
        history.append(
            {
                "role": "assistant",
                "content": f"For step {i}, put the {i * 3} tomato plants along the south fence, "
                f"{i + 40} cm apart, and water them every {i + 2} days with the rain barrel.",
            }
        )
    long_chat = {"model": "echo.gemini-2.5-flash", "stream": False}
    http.post(
        "/api/chat/completions",
        json={**long_chat, "messages": [*history, {"role": "user", "content": "ok?"}]},
    )
    deadline, sent, turns = time.monotonic() + 60, "", 0
    while time.monotonic() < deadline and "<echo_summary" not in sent:
        time.sleep(1)
        question = {"role": "user", "content": "And the basil?"}
        http.post(
            "/api/chat/completions", json={**long_chat, "messages": [*history, question]}
        ).raise_for_status()
        sent = json.dumps(gemini.last_request.body, ensure_ascii=False)
        turns = len(gemini.last_request.body.get("contents", []))
    check(
        f"a long chat reaches the model compressed: the summary fenced, {turns} of {len(history) + 1} turns",
        "<echo_summary" in sent and 0 < turns < len(history) + 1 and "And the basil?" in sent,
        sent[:800],
    )


def hook_counts(echo_http: httpx.Client) -> dict[tuple[str, str], float]:
    counts: dict[tuple[str, str], float] = {}
    for line in echo_http.get("/metrics").text.splitlines():
        if line.startswith("echo_hook_requests_total{"):
            labels = dict(
                part.split("=", 1) for part in line[line.index("{") + 1 : line.index("}")].split(",")
            )
            key = (labels["filter"].strip('"'), labels["phase"].strip('"'))
            counts[key] = counts.get(key, 0) + float(line.rsplit(" ", 1)[1])
    return counts


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
