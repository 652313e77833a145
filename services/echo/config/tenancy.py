"""Tenants and their schemas (DESIGN §7): one tenant, one PostgreSQL schema, never shared. Pure."""

from __future__ import annotations

import re

from echo.errors import ConfigError

__all__ = ["SCHEMA_PREFIX", "quote_identifier", "schema_for", "validate_tenant"]

SCHEMA_PREFIX = "echo_"
# A DNS-1123 label (what a Kubernetes EchoDeployment name is), at most 40 characters so that the
# schema name and the NOTIFY channel derived from it stay under PostgreSQL's 63-byte identifiers.
_TENANT = re.compile(r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$")
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def validate_tenant(tenant: str) -> str:
    """The tenant name if it is a safe one, else a ConfigError naming the rule."""
    if not isinstance(tenant, str) or not _TENANT.match(tenant):
        raise ConfigError(
            f"{tenant!r} is not a tenant name: lowercase letters, digits and '-', starting with a "
            "letter, ending with a letter or digit, at most 40 characters",
            field="tenant",
        )
    return tenant


def schema_for(tenant: str) -> str:
    """The schema of a tenant: `echo_` + the name with '-' as '_' (one-to-one: '_' is not allowed)."""
    return SCHEMA_PREFIX + validate_tenant(tenant).replace("-", "_")


def quote_identifier(identifier: str) -> str:
    """A double-quoted identifier; only plain lowercase identifiers are accepted."""
    if not _IDENTIFIER.match(identifier):
        raise ValueError(f"{identifier!r} is not a safe SQL identifier")
    return f'"{identifier}"'
