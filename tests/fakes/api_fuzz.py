"""Property-based fuzzing of echo-hooks' whole HTTP API with schemathesis (issues 12 and 18).

`fuzz_service` runs the service as `echoctl serve` does, with its backends (`memory_service`: the test
PostgreSQL, Qdrant local mode, the offline LLM, the in-process worker), its embeddings from an OpenAI-
style `/embeddings` server as in a cluster (the scripted stub of the embedder contract: the API, not the
model, is under test) and the `echo.*` pipe on the fake Gemini. `fuzz` loads the service's own
`/openapi.json` and runs schemathesis' engine over it as `schemathesis run --checks all` does: its
coverage phase (each schema's boundaries, every wrong type, methods the path does not document), the
fuzzing phase (Hypothesis: schema-valid and schema-breaking requests) and the stateful one, each
response checked by every schemathesis check (`max_response_time` included) and by
`four_xx_names_the_field`: no 500,
statuses, content types, headers (`Allow` on a 405) and bodies as documented, schema-valid requests
accepted, schema-breaking ones refused, auth not ignored. Each request carries the key its operation's
`security` names (`bearer`: ECHO_API_KEY, `admin`: ECHO_ADMIN_KEY), and the tool calls Open WebUI's
user and chat headers. Failures are collected, not raised, so one run reports all of them.

The one refusal of a schema-valid request that is no failure: a valves body that breaks a rule across
valves, which JSON Schema cannot say and the body's schema lists (`x-echo-rules`, also in words in its
description); the 422 must name that rule's valves (`documented_rule`). Those are counted apart
(`FuzzReport.ruled`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import schemathesis
from contract.embedding_server import StubEmbeddingServer
from fakes.gemini_server import FakeGemini
from fakes.live_server import LiveServer
from fakes.memory_service import MemoryService, memory_service
from fakes.shared_data import ADMIN_KEY, API_KEY
from schemathesis.engine import Status, events, from_schema

__all__ = [
    "CHAT_ID",
    "PHASES",
    "RESPONSE_TIME_LIMIT_S",
    "TOOL_CALL_HEADERS",
    "USER_ID",
    "FuzzReport",
    "documented_rule",
    "four_xx_names_the_field",
    "fuzz",
    "fuzz_service",
]

# Open WebUI sends these with every tool-server call (DESIGN §3); the fuzz sends them as it does.
USER_ID = "fuzz-user"
CHAT_ID = "fuzz-chat"
TOOL_CALL_HEADERS = {"x-openwebui-user-id": USER_ID, "x-openwebui-chat-id": CHAT_ID}
# The longest a request may take: the outlet's deadline (5 s by default) and some slack for a busy
# 2-core machine. Past it `max_response_time` fails.
RESPONSE_TIME_LIMIT_S = 10.0
PIPE_MODEL = "gemini-2.5-flash"
PHASES = ("examples", "coverage", "fuzzing", "stateful")
_REJECTED = "Schema-valid request rejected"


@dataclass
class FuzzReport:
    """What one run did: requests sent per operation, failures per operation and check, and the
    refusals of schema-valid bodies by a documented rule across valves (not failures)."""

    examples: Counter[str] = field(default_factory=Counter)
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)  # (operation, check title)
    ruled: Counter[tuple[str, str]] = field(default_factory=Counter)  # (operation, the rule)
    samples: dict[tuple[str, str], str] = field(default_factory=dict)
    phases: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def operations(self) -> int:
        return len(self.examples)

    def by_check(self, counts: Counter[tuple[str, str]]) -> Counter[str]:
        """`counts` (`failures` or `ruled`) summed by check (or rule)."""
        found: Counter[str] = Counter()
        for (_, title), count in counts.items():
            found[title] += count
        return found

    def describe(self) -> str:
        """Each failure with its first sample, then the documented rules that refused a body."""
        lines = [f"{operation}: {title} ×{count}\n    {self.samples[operation, title]}"
                 for (operation, title), count in sorted(self.failures.items())]  # fmt: skip
        lines += [f"refused by a documented rule: {operation}: {rule} ×{count}"
                  for (operation, rule), count in sorted(self.ruled.items())]  # fmt: skip
        return "\n".join(lines)


@schemathesis.check
def four_xx_names_the_field(
    ctx: Any, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """A 4xx says what it refuses: a 422 lists each bad field's location (FastAPI's `detail` list or
    `wire.unprocessable`'s `{"message", "errors"}`), any other 4xx carries a non-empty `detail`."""
    if not 400 <= response.status_code < 500:
        return None
    try:
        body = response.json()
    except ValueError as error:
        raise AssertionError(
            f"{response.status_code} without a JSON body: {response.text[:200]!r}"
        ) from error
    detail = body.get("detail") if isinstance(body, dict) else None
    if response.status_code == 422:
        errors = detail if isinstance(detail, list) else (detail or {}).get("errors", [])
        if isinstance(detail, dict) and not errors and detail.get("message"):
            return True  # a configuration refused as a whole (valves, summary window), said in words
        assert errors, f"422 without the fields it refuses: {body!r}"
        for error in errors:
            assert error.get("loc"), f"422 error without its location: {error!r}"
            assert error.get("msg"), f"422 error without a message: {error!r}"
        return True
    assert detail, f"{response.status_code} without a detail saying why: {body!r}"
    return True


def documented_rule(operation: Mapping[str, Any], status: int, body: bytes) -> str | None:
    """The rule across valves (`x-echo-rules` of `operation`'s body schema) that a 422 `body` names
    (every valve of it in the message), or None."""
    if status != 422:
        return None
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    rules = content.get("schema", {}).get("x-echo-rules", [])
    try:
        message = json.loads(body)["detail"]["message"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(message, str):
        return None
    for rule in rules:
        if all(name in message for name in rule["valves"]):
            return str(rule["rule"])
    return None


def _operations(spec: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
    return {
        f"{method.upper()} {path}": operation
        for path, operations in spec.get("paths", {}).items()
        for method, operation in operations.items()
        if method in methods
    }


def _headers(label: str, operation: Mapping[str, Any], with_key: bool) -> dict[str, str]:
    headers: dict[str, str] = {}
    if with_key:
        # The key its document names: `admin` (ECHO_ADMIN_KEY, the memory-management API) or `bearer`.
        admin = {"admin": []} in operation.get("security", [])
        headers["Authorization"] = f"Bearer {ADMIN_KEY if admin else API_KEY}"
    if label.split(" ", 1)[1].startswith("/tools/"):
        headers.update(TOOL_CALL_HEADERS)
    return headers


def _config(
    operations: Mapping[str, Mapping[str, Any]],
    *,
    max_examples: int,
    with_key: bool,
    phases: Iterable[str],
    seed: int | None,
) -> schemathesis.Config:
    chosen = set(phases)
    config = schemathesis.Config.from_dict(
        {
            **({"seed": seed} if seed is not None else {}),
            "generation": {"max-examples": max_examples, "deterministic": seed is not None},
            "phases": {phase: {"enabled": phase in chosen} for phase in PHASES},
            "request-timeout": RESPONSE_TIME_LIMIT_S * 3,
            "operations": [
                {"include-name": label, "headers": headers}
                for label, operation in operations.items()
                if (headers := _headers(label, operation, with_key))
            ],
        }
    )
    config.projects.default.checks.max_response_time.enabled = True
    config.projects.default.checks.max_response_time.limit = RESPONSE_TIME_LIMIT_S
    return config


def _record(report: FuzzReport, event: events.ScenarioFinished, documented: Mapping[str, Any]) -> None:
    recorder = event.recorder
    label = recorder.label
    report.phases[str(event.phase)] += len(recorder.cases)
    for node in recorder.cases.values():
        report.examples[node.value.operation.label] += 1
    for case_id, checks in recorder.checks.items():
        for check in checks:
            if check.status != Status.FAILURE or check.failure_info is None:
                continue
            failure = check.failure_info.failure
            interaction = recorder.interactions.get(case_id)
            response = interaction.response if interaction is not None else None
            operation = recorder.cases[case_id].value.operation.label if case_id in recorder.cases else label
            if failure.title == _REJECTED and response is not None:
                rule = documented_rule(documented.get(operation, {}), response.status_code, response.content)
                if rule is not None:
                    report.ruled[operation, rule] += 1
                    continue
            key = (operation, failure.title)
            report.failures[key] += 1
            answer = f"{response.status_code} {response.content[:300]!r}" if response is not None else "-"
            message = " ".join(failure.message.splitlines())
            sample = f"{check.failure_info.code_sample} -> {answer}: {message[:300]}"
            report.samples.setdefault(key, " ".join(sample.splitlines())[:900])


def fuzz(
    base_url: str,
    *,
    max_examples: int,
    with_key: bool,
    report: FuzzReport | None = None,
    phases: Iterable[str] = PHASES,
    seed: int | None = 0,
) -> FuzzReport:
    """Fuzz every operation of `base_url`'s OpenAPI: the `phases` of schemathesis' engine, at most
    `max_examples` per operation in the fuzzing phase (the coverage phase sends what it derives)."""
    report = report or FuzzReport()
    started = time.monotonic()
    spec = requests.get(f"{base_url}/openapi.json", timeout=30).json()
    documented = _operations(spec)
    config = _config(documented, max_examples=max_examples, with_key=with_key, phases=phases, seed=seed)
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=config)
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            _record(report, event, documented)
        elif isinstance(event, events.NonFatalError):
            key = (event.label, "error")
            report.failures[key] += 1
            report.samples.setdefault(key, str(event.info.message)[:900])
        elif isinstance(event, events.FatalError):
            raise RuntimeError(f"schemathesis could not run: {event.exception!r}")
    report.seconds += time.monotonic() - started
    return report


@contextlib.asynccontextmanager
async def fuzz_service(
    dsn: str, tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[MemoryService, FakeGemini, str]]:
    """echo-hooks with its backends and the pipe on a fake Gemini; yields the service, the fake and
    the service's URL."""
    stub = StubEmbeddingServer(prefix="/v1", keep_requests=False)
    with FakeGemini() as gemini, LiveServer(stub.app, name="embeddings") as embeddings:
        options: Mapping[str, Any] = {
            "gemini_api_key": "fake",
            "gemini_base_url": gemini.base_url,
            "pipe_models": [PIPE_MODEL],
            "llm_max_retries": 1,
            "embedding_url": embeddings.url + "/v1",
            **settings,
        }
        async with memory_service(dsn, tmp_path, **options) as service:
            yield service, gemini, str(service.http.base_url).rstrip("/")
