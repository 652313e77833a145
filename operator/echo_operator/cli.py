"""`echoctl operator`: the operator's command, registered on `echoctl` through the `echoctl.commands`
entry point (pyproject.toml), so that `echo` never imports `echo_operator`."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["operator"]


@click.command()
@click.option("--namespace", "-n", "namespaces", multiple=True, help="Watch this namespace (repeatable).")
@click.option("--all-namespaces", "-A", is_flag=True, help="Watch every namespace (cluster-wide RBAC).")
@click.option(
    "--peering",
    default=None,
    help="Run with kopf peering under this KopfPeering name; default standalone (one replica, Recreate).",
)
@click.option(
    "--liveness",
    default="http://0.0.0.0:8080/healthz",
    show_default=True,
    help="kopf liveness endpoint URL ('' = none).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=9090,
    show_default=True,
    help="/metrics port (0 = none).",
)
@click.option(
    "--dashboards-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Grafana dashboards (*.json) rendered for tenants that ask for them.",
)
@click.option(
    "--drift-seconds",
    type=click.FloatRange(min=1.0),
    default=300.0,
    show_default=True,
    help="How often every tenant's children are applied again (one deleted or edited by hand comes back).",
)
@click.option("--verbose", is_flag=True, help="Debug logs.")
def operator(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    peering: str | None,
    liveness: str,
    metrics_port: int,
    dashboards_dir: Path | None,
    drift_seconds: float,
    verbose: bool,
) -> None:
    """Run the Kubernetes operator (kopf) that reconciles EchoDeployment resources.

    Outside a cluster it uses $KUBECONFIG (or ~/.kube/config); in a pod, its service account.
    """
    import os

    try:
        from echo_operator import runner, settings
    except ImportError as error:  # pragma: no cover - an install without the operator extra
        raise click.ClickException(f"the operator needs the `operator` extra: {error}") from error
    if bool(namespaces) == all_namespaces:
        raise click.UsageError("give --namespace (one or more) or --all-namespaces")
    try:
        dashboards = settings.load_dashboards(dashboards_dir)
    except ValueError as error:
        raise click.ClickException(str(error)) from error
    config = settings.OperatorConfig(
        kubeconfig=os.environ.get("KUBECONFIG"), dashboards=dashboards, drift_seconds=drift_seconds
    )
    runner.run(
        config,
        namespaces=namespaces,
        all_namespaces=all_namespaces,
        peering=peering,
        liveness=liveness or None,
        metrics_port=metrics_port,
        verbose=verbose,
    )
