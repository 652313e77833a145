"""The live configuration: mounted files loaded at start and hot-reloaded, saved valves overrides.

A bad file at start is a ConfigError (the process refuses to start); a bad file at reload keeps
the last good snapshot and is reported through `status` and the `on_reload` callback.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import yaml

from echo.config import settings as settings_module
from echo.config import snapshot as snapshot_module
from echo.config import valves as valves_module
from echo.errors import ConfigError

__all__ = ["ConfigStatus", "LiveConfig", "ValvesManagedByFile", "read_mapping"]

log = structlog.get_logger("echo.config")

SAVED_VALVES_NAME = "valves.json"


class ValvesManagedByFile(ConfigError):
    """Valves come from a mounted file: the API may not change them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"valves are managed by the mounted file {path}; edit that file (or its ConfigMap)")


@dataclass(frozen=True)
class ConfigStatus:
    """What /readyz reports about configuration."""

    ok: bool
    error: str | None
    loaded_at: float
    sources: tuple[str, ...]


def read_mapping(path: Path) -> Mapping[str, Any]:
    """Parse a YAML or JSON file (JSON is YAML) into a mapping; ConfigError names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read: {error.strerror or error}", source=str(path)) from error
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as error:
        raise ConfigError(f"not valid YAML/JSON: {error}", source=str(path)) from error
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"top level must be a mapping, got {type(data).__name__}", source=str(path))
    return data


def _digest(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


class LiveConfig:
    """Holds the current snapshot; `reload_if_changed` swaps it when the mounted files change."""

    def __init__(
        self,
        settings: settings_module.Settings,
        *,
        on_reload: Callable[[bool, str | None], None] | None = None,
    ) -> None:
        self._valves_file = settings.valves_file
        self._thresholds_file = settings.model_thresholds_file
        self._saved_path = settings.data_dir / SAVED_VALVES_NAME
        self._interval = settings.config_reload_seconds
        self._on_reload = on_reload
        self._digests = ("", "")
        self._snapshot: snapshot_module.ConfigSnapshot | None = None
        self._status = ConfigStatus(ok=True, error=None, loaded_at=0.0, sources=())

    @property
    def snapshot(self) -> snapshot_module.ConfigSnapshot:
        if self._snapshot is None:
            raise RuntimeError("LiveConfig.load() was not called")
        return self._snapshot

    @property
    def status(self) -> ConfigStatus:
        return self._status

    def valves(self, filter_id: str) -> valves_module.Valves:
        return self.snapshot.of(filter_id)

    def load(self) -> snapshot_module.ConfigSnapshot:
        """First load; raises ConfigError so a bad configuration stops the start."""
        self._digests = (_digest(self._valves_file), _digest(self._thresholds_file))
        self._snapshot = self._build()
        self._status = ConfigStatus(ok=True, error=None, loaded_at=time.time(), sources=self._sources())
        return self._snapshot

    def reload_if_changed(self) -> bool:
        """Reload when a mounted file's content changed; True when a new snapshot is in place."""
        digests = (_digest(self._valves_file), _digest(self._thresholds_file))
        if digests == self._digests:
            return False
        try:
            snapshot = self._build()
        except ConfigError as error:
            self._digests = digests  # a refused file is not retried until its content changes
            self._status = ConfigStatus(
                ok=False, error=str(error), loaded_at=self._status.loaded_at, sources=self._sources()
            )
            log.error("config_reload_failed", error=str(error), kept="last good configuration")
            self._notify(False, str(error))
            return False
        # any other error leaves the digests as they were, so the restarted watcher tries again
        self._digests = digests
        self._snapshot = snapshot
        self._status = ConfigStatus(ok=True, error=None, loaded_at=time.time(), sources=self._sources())
        log.info("config_reloaded", sources=list(self._sources()))
        self._notify(True, None)
        return True

    async def watch(self) -> None:
        """Poll the mounted files until cancelled (ConfigMap updates swap symlinks, so poll content)."""
        if self._valves_file is None and self._thresholds_file is None:
            return
        while True:
            await asyncio.sleep(self._interval)
            await asyncio.to_thread(self.reload_if_changed)

    def managed_by_file(self) -> Path | None:
        return self._valves_file

    def replace_valves(self, filter_id: str, data: Mapping[str, Any]) -> valves_module.Valves:
        """Replace one filter's valves (Pipelines `valves/update` semantics) and save them."""
        if self._valves_file is not None:
            raise ValvesManagedByFile(self._valves_file)
        saved = dict(self._read_saved())
        saved[filter_id] = snapshot_module.parse_mapping_valves(filter_id, data)
        snapshot = self._build(saved_valves=saved)
        self._write_saved(saved)
        self._snapshot = snapshot
        return snapshot.of(filter_id)

    def _build(self, saved_valves: Mapping[str, Any] | None = None) -> snapshot_module.ConfigSnapshot:
        file_valves = read_mapping(self._valves_file) if self._valves_file else None
        thresholds = read_mapping(self._thresholds_file) if self._thresholds_file else None
        return snapshot_module.build_snapshot(
            file_valves=file_valves,
            saved_valves=self._read_saved() if saved_valves is None else saved_valves,
            model_thresholds=thresholds,
            source=", ".join(self._sources()) or None,
        )

    def _sources(self) -> tuple[str, ...]:
        return tuple(str(path) for path in (self._valves_file, self._thresholds_file) if path is not None)

    def _read_saved(self) -> Mapping[str, Any]:
        if self._valves_file is not None or not self._saved_path.exists():
            return {}
        # The file is this class's own JSON, read as JSON: YAML (`read_mapping`) decodes the escaped
        # surrogate pair of a character past U+FFFF (an emoji) into two lone surrogates, which no
        # valve accepts, and one emoji in one valve then broke every later update and load.
        try:
            data = json.loads(self._saved_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ConfigError(
                f"cannot read the saved valves: {error}", source=str(self._saved_path)
            ) from error
        if not isinstance(data, dict):
            raise ConfigError("the saved valves are not a mapping", source=str(self._saved_path))
        return data

    def _write_saved(self, saved: Mapping[str, Any]) -> None:
        self._saved_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self._saved_path.parent, prefix=".valves-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(saved, handle, indent=2, sort_keys=True)
        os.replace(tmp, self._saved_path)

    def _notify(self, ok: bool, error: str | None) -> None:
        if self._on_reload is not None:
            self._on_reload(ok, error)
