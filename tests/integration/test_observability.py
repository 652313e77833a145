"""Traces per hook with chat and user ids, and structured logs that carry them."""

from __future__ import annotations

import json

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from echo.support import logs, tracing


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    tracing.configure_tracing("echo-hooks-test", None, extra_processor=SimpleSpanProcessor(exporter))
    return exporter


def test_each_hook_is_a_span_with_chat_and_user(client: httpx.Client, spans: InMemorySpanExporter) -> None:
    spans.clear()
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"chat_id": "chat-9", "user_id": "someone-else"},  # a body claim: not the user
    }
    call = {"body": body, "user": {"id": "u-9"}}
    assert client.post("/echo_memory/filter/inlet", json=call).status_code == 200
    (span,) = [s for s in spans.get_finished_spans() if s.name == "echo.inlet"]
    assert span.attributes is not None
    assert span.attributes["echo.filter"] == "echo_memory"
    assert span.attributes["echo.chat_id"] == "chat-9"
    assert span.attributes["echo.user_id"] == "u-9"  # the user Open WebUI attached


def test_a_traceparent_header_continues_the_callers_trace(
    client: httpx.Client, spans: InMemorySpanExporter
) -> None:
    spans.clear()
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    client.post("/echo_context/filter/outlet", json={"body": {"messages": []}}, headers=headers)
    (span,) = [s for s in spans.get_finished_spans() if s.name == "echo.outlet"]
    assert f"{span.context.trace_id:032x}" == trace_id


def test_logs_are_json_lines_with_chat_and_user(
    client: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure_logging("INFO", "json")
    leaked = "AIza" + "SyB" + "z1" * 16
    body = {"chat_id": "chat-7", "messages": [{"role": "assistant", "content": leaked}]}
    client.post("/echo_context/filter/outlet", json={"body": body, "user": {"id": "u-7"}})
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    masked = next(line for line in lines if line["event"] == "secrets_masked")
    assert (masked["chat_id"], masked["user_id"], masked["filter"]) == ("chat-7", "u-7", "echo_context")
    assert leaked not in json.dumps(lines)


def test_metrics_expose_hook_latency(client: httpx.Client) -> None:
    client.post("/echo_context/filter/inlet", json={"body": {"messages": []}})
    text = client.get("/metrics").text
    assert 'echo_hook_latency_seconds_bucket{filter="echo_context",le="0.001",phase="inlet"}' in text
    assert 'echo_hook_requests_total{filter="echo_context",outcome="ok",phase="inlet"}' in text
