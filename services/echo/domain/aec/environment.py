"""Who, when and where for the AEC block, from what Open WebUI sends with a turn.

Open WebUI's inlet gets ``user`` (``{id, email, name, role}``) beside the body, and the web UI puts
its prompt variables in ``metadata.variables``: ``{{USER_NAME}}``, ``{{USER_LOCATION}}`` ("Unknown"
until the user lets the browser share a location), ``{{CURRENT_DATETIME}}`` (the browser's local
``YYYY-MM-DD HH:MM:SS``), ``{{CURRENT_TIMEZONE}}`` (the browser's IANA zone), ... API calls send
``variables: {}``. Whatever is missing, empty or unusable comes from the valves' defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from echo.config import valves as valves_module
from echo.domain.aec import entries

__all__ = ["AecDefaults", "AecEnvironment", "environment_from_request", "resolve_zone"]

USER_NAME = "{{USER_NAME}}"
USER_LOCATION = "{{USER_LOCATION}}"
CURRENT_DATETIME = "{{CURRENT_DATETIME}}"
CURRENT_TIMEZONE = "{{CURRENT_TIMEZONE}}"

# The web UI's words for "no location": it sends them rather than leaving the variable out.
_NO_LOCATION = frozenset({"", "unknown"})
# A name or a location longer than this is cut: the block is sent on every turn.
_MAX_TEXT = 200
_CLIENT_DATETIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M")
DATETIME_FORMAT = "%Y-%m-%d %H:%M"


@dataclass(frozen=True)
class AecDefaults:
    """What the block says when Open WebUI does not: the valves' defaults and ECHO's version."""

    framework_version: str
    user_name: str = "anonyme"
    location: str = ""
    timezone: str = "UTC"

    @classmethod
    def from_valves(cls, valves: valves_module.ContextValves, framework_version: str) -> AecDefaults:
        return cls(
            framework_version=framework_version,
            user_name=valves.AEC_DEFAULT_USER_NAME,
            location=valves.AEC_DEFAULT_LOCATION,
            timezone=valves.AEC_DEFAULT_TIMEZONE,
        )


@dataclass(frozen=True)
class AecEnvironment:
    """Everything one AEC block says; `datetime` is already `YYYY-MM-DD HH:MM` in `timezone`."""

    framework_version: str
    user_name: str
    datetime: str
    location: str
    timezone: str
    files: Sequence[entries.FileEntry] = field(default=())
    plans: Sequence[entries.PlanEntry] = field(default=())
    codex: Sequence[entries.CodexEntry] = field(default=())


def resolve_zone(name: object) -> tzinfo | None:
    """The time zone an IANA name names, or None (not a string, unknown, malformed, no tz database)."""
    if not isinstance(name, str) or not name.strip():
        return None
    name = name.strip()
    if name.upper() == "UTC":
        return UTC  # needs no tz database
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def _text(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    value = " ".join(value.split())  # no line breaks or runs of blanks in a one-line field
    return value[:_MAX_TEXT] or None


def _client_datetime(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    for pattern in _CLIENT_DATETIME_FORMATS:
        try:
            return datetime.strptime(value.strip(), pattern).strftime(DATETIME_FORMAT)
        except ValueError:
            continue
    return None


def environment_from_request(
    user: Mapping[str, Any] | None,
    metadata: Mapping[str, Any] | None,
    now: datetime,
    defaults: AecDefaults,
    *,
    files: Sequence[entries.FileEntry] = (),
    plans: Sequence[entries.PlanEntry] = (),
    codex: Sequence[entries.CodexEntry] = (),
) -> AecEnvironment:
    """The turn's environment. Never raises on what Open WebUI sent: bad values fall back.

    - name: ``user.name``, else ``{{USER_NAME}}``, else the default;
    - location: ``{{USER_LOCATION}}`` unless empty or "Unknown", else the default;
    - timezone: ``{{CURRENT_TIMEZONE}}`` when it is a known IANA zone, else the default (and UTC
      when the default itself cannot be resolved);
    - date and time: the browser's ``{{CURRENT_DATETIME}}`` when its zone was accepted (the two go
      together), else ``now`` (naive means UTC) in the chosen zone.
    """
    user = user if isinstance(user, Mapping) else {}
    raw_variables = metadata.get("variables") if isinstance(metadata, Mapping) else None
    variables: Mapping[str, Any] = raw_variables if isinstance(raw_variables, Mapping) else {}
    name = _text(user.get("name")) or _text(variables.get(USER_NAME)) or defaults.user_name
    location = _text(variables.get(USER_LOCATION))
    if location is None or location.lower() in _NO_LOCATION:
        location = defaults.location
    client_zone_name = variables.get(CURRENT_TIMEZONE)
    zone = resolve_zone(client_zone_name)
    stamp = None
    if zone is not None and isinstance(client_zone_name, str):
        zone_name = client_zone_name.strip()
        stamp = _client_datetime(variables.get(CURRENT_DATETIME))
    else:
        zone = resolve_zone(defaults.timezone)
        zone_name = defaults.timezone
        if zone is None:
            zone, zone_name = UTC, "UTC"
    if stamp is None:
        moment = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
        stamp = moment.astimezone(zone).strftime(DATETIME_FORMAT)
    return AecEnvironment(
        framework_version=defaults.framework_version,
        user_name=name,
        datetime=stamp,
        location=location,
        timezone=zone_name,
        files=tuple(files),
        plans=tuple(plans),
        codex=tuple(codex),
    )
