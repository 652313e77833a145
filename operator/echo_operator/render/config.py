"""Config children: the valves and model-thresholds ConfigMaps, the generated API key Secret. Pure.

The ConfigMaps are mounted whole (not by subPath) into echo-hooks and echo-distiller, so an edit
reaches the pods in about a minute and the services hot-reload it; no restart.
"""

from __future__ import annotations

from typing import Any

import yaml

from echo_operator.render import tenant as tenant_module
from echo_operator.render.tenant import Tenant

__all__ = ["api_key_secret", "render_config"]

Manifest = dict[str, Any]


def _config_map(tenant: Tenant, name: str, key: str, data: Any) -> Manifest:
    text = yaml.safe_dump(data or {}, sort_keys=True, allow_unicode=True)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": tenant.metadata(name, "config"),
        "data": {key: text},
    }


def render_config(tenant: Tenant) -> list[Manifest]:
    """A ConfigMap per config file the spec does not take from a ConfigMap of the user's."""
    spec = tenant.spec
    out = []
    if spec.valves.config_map_ref is None:
        out.append(_config_map(tenant, *tenant.valves_ref, spec.valves.inline))
    if spec.model_thresholds.config_map_ref is None:
        out.append(_config_map(tenant, *tenant.thresholds_ref, spec.model_thresholds.inline))
    return out


def api_key_secret(tenant: Tenant, token: str) -> Manifest:
    """The Secret holding a generated ECHO_API_KEY (created once by the handlers, never rewritten)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": tenant.metadata(tenant.generated_api_key_secret, "hooks"),
        "type": "Opaque",
        "stringData": {tenant_module.API_KEY_KEY: token},
    }
