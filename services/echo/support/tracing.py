"""OpenTelemetry tracing: a tracer provider, exporting over OTLP/HTTP when an endpoint is set."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import echo

__all__ = ["configure_tracing", "tracer"]

_provider: TracerProvider | None = None


def configure_tracing(
    service_name: str, otlp_endpoint: str | None, *, extra_processor: SpanProcessor | None = None
) -> TracerProvider:
    """Install the process tracer provider once; spans are exported only when an endpoint is set."""
    global _provider
    if _provider is None:
        _provider = TracerProvider(
            resource=Resource.create({"service.name": service_name, "service.version": echo.__version__})
        )
        trace.set_tracer_provider(_provider)
        if otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            endpoint = otlp_endpoint.rstrip("/")
            if not endpoint.endswith("/v1/traces"):
                endpoint += "/v1/traces"
            _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    if extra_processor is not None:
        _provider.add_span_processor(extra_processor)
    return _provider


def tracer() -> trace.Tracer:
    return trace.get_tracer("echo")
