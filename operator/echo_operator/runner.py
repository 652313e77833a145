"""Run the operator process: kopf with our registry, metrics and liveness (for `echoctl operator`).

Designed for one replica (Deployment `strategy: Recreate`): standalone by default, so no peering
CRDs are needed; `peering` names a KopfPeering instead for a hand-over between replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import kopf

from echo_operator import handlers, metrics
from echo_operator.settings import OperatorConfig

__all__ = ["run"]


def run(
    config: OperatorConfig,
    *,
    namespaces: Sequence[str] = (),
    all_namespaces: bool = False,
    peering: str | None = None,
    liveness: str | None = None,
    metrics_port: int = 0,
    verbose: bool = False,
    json_logs: bool = True,
) -> None:
    """Run until SIGTERM/SIGINT. Exactly one of `namespaces` and `all_namespaces` is expected."""
    if bool(namespaces) == all_namespaces:
        raise ValueError("watch either some namespaces or all of them")
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    if metrics_port:
        metrics.serve(metrics_port)
    kopf.run(
        registry=handlers.build_registry(drift_seconds=config.drift_seconds),
        memo=kopf.Memo(config=config),
        standalone=peering is None,
        peering_name=peering,
        clusterwide=all_namespaces,
        namespaces=list(namespaces),
        liveness_endpoint=liveness,
    )
