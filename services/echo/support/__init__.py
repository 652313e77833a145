"""Cross-cutting support any layer may use: structured logs, Prometheus metrics, OpenTelemetry
tracing, supervised background tasks and CPU-bound work off the event loop.

Rule: nothing here imports a layer (contract `cross-cutting`); the pure core does not import it.
"""
