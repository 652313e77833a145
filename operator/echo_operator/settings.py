"""The operator's own settings, and how they are applied to kopf in `on.startup`.

`OperatorConfig` is built once at the entrypoint (`echoctl operator`) and travels in kopf's memo;
nothing here reads the environment.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import kopf

from echo_operator.render import tenant

__all__ = ["FINALIZER", "STORAGE_PREFIX", "OperatorConfig", "configure", "load_dashboards"]

FINALIZER = "echo.dev/finalizer"
STORAGE_PREFIX = "echo.dev"


@dataclass(frozen=True)
class OperatorConfig:
    """Tunables of the operator; every duration in seconds."""

    kubeconfig: str | None = None
    """kubeconfig of the operator's own API client outside a cluster; in a pod, the service account."""
    finalizer: str = FINALIZER
    """Finalizer kopf puts on EchoDeployments so that deletion runs the cleanup handler first."""
    storage_prefix: str = STORAGE_PREFIX
    """Prefix of kopf's annotations (progress, last handled spec); kept out of the pruned status."""
    posting_level: int = logging.INFO
    """Lowest log level posted as a Kubernetes Event on the EchoDeployment (kubectl describe)."""
    backoff: float = 10.0
    """Retry delay after an unexpected error (API outage, conflict); kopf's default 60 s is slow."""
    request_timeout: float = 60.0
    """Timeout of one API request (s); apply and list calls answer in well under a second."""
    watch_server_timeout: int = 300
    """The API server ends each watch after this long and kopf reconnects: no silently dead stream.
    Whole seconds: kopf sends it as `timeoutSeconds`, which the API server parses as an integer."""
    watch_client_timeout: float = 330.0
    """Client-side watch timeout, a little above the server's so the server closes first."""
    watch_connect_timeout: float = 30.0
    """Connect timeout of a watch request."""
    dashboards: Mapping[str, str] = field(default_factory=dict)
    """Grafana dashboards (file name -> JSON) rendered for tenants with monitoring.dashboards."""
    drift_seconds: float = 300.0
    """How often each EchoDeployment's children are applied again although nothing changed (drift
    repair: a child deleted or edited by hand is put back); 5 min costs one server-side apply of a few
    objects per tenant, and bounds how long a hand edit survives."""

    def __post_init__(self) -> None:
        if not self.drift_seconds > 0:
            raise ValueError(
                f"drift_seconds must be a positive number of seconds, not {self.drift_seconds!r}"
            )
        server = self.watch_server_timeout
        # bool is an int, and 300.0 would go out as "300.0": both are refused, not converted.
        if type(server) is not int or server <= 0:
            raise ValueError(
                f"watch_server_timeout must be a positive whole number of seconds, not {server!r}"
            )
        if self.watch_client_timeout <= server:
            raise ValueError(
                f"watch_client_timeout ({self.watch_client_timeout}) must exceed watch_server_timeout "
                f"({server}) so that the server ends each watch first"
            )


def configure(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """Apply `config` to kopf's settings (called from on.startup)."""
    settings.persistence.finalizer = config.finalizer
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=config.storage_prefix)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=config.storage_prefix, key="last-handled-configuration"
    )
    settings.posting.level = config.posting_level
    settings.posting.loggers = True  # kopf >= 1.45 posts no log message as an Event unless told to
    settings.execution.default_backoff = config.backoff
    settings.networking.request_timeout = config.request_timeout
    settings.watching.server_timeout = config.watch_server_timeout
    settings.watching.client_timeout = config.watch_client_timeout
    settings.watching.connect_timeout = config.watch_connect_timeout
    # Watch only our own children among all Deployments and StatefulSets of the cluster.
    selector = f"{tenant.MANAGED_BY}={tenant.OPERATOR}"
    settings.watching.label_selectors["apps", "deployments"] = selector
    settings.watching.label_selectors["apps", "statefulsets"] = selector


def load_dashboards(directory: Path | None) -> dict[str, str]:
    """The `*.json` dashboards of `directory` (none when it is None or absent); bad JSON is an error."""
    if directory is None or not directory.is_dir():
        return {}
    out = {}
    for path in sorted(directory.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        try:
            json.loads(text)
        except ValueError as error:
            raise ValueError(f"dashboard {path} is not JSON: {error}") from error
        out[path.name] = text
    return out
