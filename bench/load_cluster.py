"""The processes `bench/load.py` drives: the Infinity embedder, `echoctl serve` replicas and `echoctl
worker` processes on one PostgreSQL server, each started, killed and restarted as a pod would be.

Each hook replica and each worker has a Qdrant local-mode directory of its own (local mode admits one
client per path; a cluster shares a Qdrant server): memories a worker writes are not recalled by the
replicas during a run, but every replica does the recall's query embedding and search on every inlet.
CPU time is read from `/proc/<pid>/stat`, so the report can say what one turn costs each part.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = ["Cluster", "Process", "postgres_cpu_seconds", "restartable_postgres", "start_infinity"]

ROOT = Path(__file__).resolve().parents[1]
INFINITY = Path(os.environ.get("INFINITY_VENV", ROOT / ".venv-infinity")) / "bin" / "infinity_emb"
ECHOCTL = str(Path(sys.executable).with_name("echoctl"))
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def postgres_cpu_seconds() -> float:
    """CPU seconds of every `postgres` process on the machine (the server and its backends)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if text.split("(", 1)[1].startswith("postgres)"):
            fields = text.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def restartable_postgres() -> list[str] | None:
    """`pg_ctlcluster … main` for the local server's cluster when this machine can restart it."""
    tool = shutil.which("pg_ctlcluster")
    versions = sorted(Path("/etc/postgresql").glob("*/main")) if Path("/etc/postgresql").is_dir() else []
    if tool is None or not versions or os.geteuid() != 0:
        return None
    return [tool, "--skip-systemctl-redirect", versions[-1].parent.name, "main"]


@dataclass
class Process:
    """One started program: its command, environment and log; `kill` and `start` as a pod restart."""

    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    ready_url: str | None = None
    popen: subprocess.Popen[bytes] | None = None
    cpu_spent: float = 0.0  # CPU seconds of earlier lives (before a kill)

    def start(self, within: float = 120.0) -> None:
        with self.log.open("ab") as sink:
            self.popen = subprocess.Popen(
                self.command, env=self.env, stdout=sink, stderr=subprocess.STDOUT, cwd=self.log.parent
            )
        if self.ready_url is None:
            return
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.ready_url, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready within {within} s:\n{self.tail()}")

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None and self.popen.poll() is None else None

    def cpu(self) -> float:
        return self.cpu_spent + (cpu_seconds(self.pid) if self.pid else 0.0)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.cpu_spent += cpu_seconds(self.popen.pid)
        self.popen.send_signal(sig)
        self.popen.wait(timeout=60)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.kill(signal.SIGTERM)

    def tail(self, size: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""


@dataclass
class Cluster:
    """echo-hooks replicas, distillation workers and the embedder of one tenant."""

    workdir: Path
    dsn: str
    tenant: str
    api_key: str
    gemini_url: str
    valves: dict[str, object]
    replicas: int = 1
    workers: int = 1
    concurrency: int = 4
    embedder: Process | None = None
    hooks: list[Process] = field(default_factory=list)
    distillers: list[Process] = field(default_factory=list)

    def _base_env(self, name: str) -> dict[str, str]:
        valves_file = self.workdir / "valves.json"
        valves_file.write_text(json.dumps(self.valves))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_", "GEMINI_"))}
        env.update(
            {
                "ECHO_DATABASE_URL": self.dsn,
                "ECHO_TENANT": self.tenant,
                "ECHO_API_KEY": self.api_key,
                "ECHO_DATA_DIR": str(self.workdir / name),
                "ECHO_QDRANT_PATH": str(self.workdir / name / "qdrant"),
                "ECHO_VALVES_FILE": str(valves_file),
                "ECHO_LLM_PROVIDER": "gemini",
                "ECHO_GEMINI_API_KEY": "load-bench",
                "ECHO_GEMINI_BASE_URL": self.gemini_url,
                "ECHO_LOG_LEVEL": "WARNING",
                "ECHO_INPROCESS_WORKER": "false",
                "ECHO_WORKER_METRICS_PORT": "0",
            }
        )
        if self.embedder is not None and self.embedder.ready_url is not None:
            env["ECHO_EMBEDDING_URL"] = self.embedder.ready_url.removesuffix("/health")
        (self.workdir / name).mkdir(parents=True, exist_ok=True)
        return env

    def start_embedder(self, port_of: Callable[[], int]) -> None:
        """Infinity serving the packaged MiniLM, when `.venv-infinity` exists (`make infinity`);
        without it every process embeds with its own in-process MiniLM."""
        self.embedder = start_infinity(port_of(), self.workdir)

    def prepare(self, port_of: Callable[[], int]) -> None:
        """The worker and replica processes (not started: their Qdrant directories can be seeded)."""
        for n in range(self.workers):
            name = f"worker-{n}"
            self.distillers.append(
                Process(
                    name,
                    [ECHOCTL, "worker", "--concurrency", str(self.concurrency)],
                    self._base_env(name),
                    self.workdir / f"{name}.log",
                )
            )
        for n in range(self.replicas):
            name, port = f"hooks-{n}", port_of()
            env = {**self._base_env(name), "ECHO_HOST": "127.0.0.1", "ECHO_PORT": str(port)}
            self.hooks.append(
                Process(
                    name,
                    [ECHOCTL, "serve"],
                    env,
                    self.workdir / f"{name}.log",
                    f"http://127.0.0.1:{port}/healthz",
                )
            )

    def start_services(self) -> None:
        for process in [*self.distillers, *self.hooks]:
            process.start()

    @property
    def urls(self) -> list[str]:
        return [p.ready_url.removesuffix("/healthz") for p in self.hooks if p.ready_url]

    def stop(self) -> None:
        for process in [*self.hooks, *self.distillers, *([self.embedder] if self.embedder else [])]:
            process.stop()

    def cpu(self) -> dict[str, float]:
        return {
            "hooks": sum(p.cpu() for p in self.hooks),
            "workers": sum(p.cpu() for p in self.distillers),
            "embedder": self.embedder.cpu() if self.embedder else 0.0,
            "postgres": postgres_cpu_seconds(),
        }

    def rss_mib(self) -> dict[str, float]:
        """Resident memory of the live hook replicas and workers (MiB, the largest of each)."""

        def rss(process: Process) -> float:
            if not process.pid:
                return 0.0
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
            return 0.0

        return {
            "hooks": max((rss(p) for p in self.hooks), default=0.0),
            "workers": max((rss(p) for p in self.distillers), default=0.0),
        }


def start_infinity(port: int, workdir: Path) -> Process | None:
    """Infinity (`.venv-infinity`, `make infinity`) serving the packaged MiniLM on 127.0.0.1:`port`,
    started and answering `/health`, its log in `workdir`; None when that venv is not there."""
    if not INFINITY.exists():
        return None
    process = Process(
        "infinity",
        [
            str(INFINITY), "v2", "--model-id", str(_minilm()), "--host", "127.0.0.1", "--port", str(port),
            "--engine", "torch", "--device", "cpu", "--log-level", "warning",
        ],
        {**os.environ, "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"},
        workdir / "infinity.log",
        ready_url=f"http://127.0.0.1:{port}/health",
    )  # fmt: skip
    process.start()
    return process


def _minilm() -> Path:
    from echo.adapters.embeddings import factory

    return factory.packaged_model_path()
