"""What `echo_compression` remembers between hook calls, per process.

Each memo is bounded, the least recently used entry out first (`cachetools.LRUCache`; the locale,
a pure function of its key, `functools.lru_cache`), and each is only a shortcut: forgetting costs
one more statement or one more computation, never a wrong answer. Worker threads (a large chat's
hook) ask ``stored`` / ``unstored`` and ``locale``: the messages memo is behind a lock (cachetools
caches are not thread-safe), lru_cache is thread-safe; the others are used on the event loop only.
Keys carry the tenant (``Repositories.tenant``) wherever a store answer is remembered, so several
tenants served by one process never share an entry.

- ``locale``: the conversation's language (`locales.detect_locale`), by its latest user texts;
- ``models``: the chat's model and its base model (custom models inherit thresholds): the inlet's
  metadata names the base model; the outlet has none, so the inlet's answer is remembered;
- ``stored`` / ``unstored`` / ``remember``: the messages this process stored for a user (the outlet
  sends each once);
- ``head`` / ``record_head``: the chat head this process recorded last (Open WebUI sends a turn's
  outlet twice);
- ``outlet_done`` / ``mark_outlet``: the branch and valves an outlet of the chat handled last.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import cachetools

from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.compression import jobs as compression_jobs
from echo.domain.compression import locales

__all__ = ["LOCALE_ENTRIES", "MODEL_ENTRIES", "Caches", "ChatKey", "OutletDone"]

# Distinct latest-user-texts remembered with their language (a chat's, from one of its turns to the next).
LOCALE_ENTRIES = 10_000
MODEL_ENTRIES = 10_000  # custom models remembered with their base model (an install has tens)

ChatKey = tuple[str, str, str]
"""(tenant, user id, chat id)."""
OutletDone = tuple[str, str, str | None, str | None]
"""(the branch's last cumulative hash, the valves as JSON, the model, the base model)."""


class Caches:
    """The per-process memos of one `CompressionFilter` (see the module docstring)."""

    def __init__(self, entries: int = compression_costs.CACHE_ENTRIES) -> None:
        # ``entries`` messages (some 150 bytes a key), as many as the costs' caches hold, and chats.
        self.entries = entries
        self._locales = functools.lru_cache(maxsize=LOCALE_ENTRIES)(_detected_locale)
        self._base_models: cachetools.LRUCache[str, str] = cachetools.LRUCache(MODEL_ENTRIES)
        self._remembered: cachetools.LRUCache[tuple[str, str, str], None] = cachetools.LRUCache(entries)
        self._remembered_lock = threading.Lock()
        self._heads: cachetools.LRUCache[ChatKey, str] = cachetools.LRUCache(entries)
        self._outlets: cachetools.LRUCache[ChatKey, OutletDone] = cachetools.LRUCache(entries)

    def locale(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """`locales.detect_locale` of the latest user texts, cached by those texts."""
        return self._locales(tuple(compression_jobs.latest_user_texts(messages)))

    def models(self, body: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """The chat's model and its base model (None: unknown), the base model remembered from the
        inlet for the outlet."""
        model = body.get("model") if isinstance(body.get("model"), str) else None
        metadata = body.get("metadata")
        info = metadata.get("model") if isinstance(metadata, Mapping) else None
        info = info.get("info") if isinstance(info, Mapping) else None
        base_model = info.get("base_model_id") if isinstance(info, Mapping) else None
        if model and isinstance(base_model, str) and base_model:
            self._base_models[model] = base_model
            return model, base_model
        return model, self._base_models.get(model) if model else None

    def stored(self, tenant: str, user_id: str, invariant: str) -> bool:
        """Whether this process stored the message ``invariant`` of this user."""
        with self._remembered_lock:
            return (tenant, user_id, invariant) in self._remembered

    def unstored(self, tenant: str, user_id: str, invariants: Iterable[str]) -> set[str]:
        """Those of ``invariants`` this process has not stored for this user: ``stored`` for many, the
        lock taken once per `compression_costs.STOP_EVERY` of them (so the loop never waits long)."""
        listed, step = list(invariants), compression_costs.STOP_EVERY
        unstored: set[str] = set()
        for start in range(0, len(listed), step):
            with self._remembered_lock:
                unstored.update(
                    i for i in listed[start : start + step] if (tenant, user_id, i) not in self._remembered
                )
        return unstored

    def remember(self, tenant: str, user_id: str, invariants: Iterable[str]) -> None:
        """This process stored these messages of this user."""
        new = dict.fromkeys((tenant, user_id, invariant) for invariant in invariants)
        with self._remembered_lock:
            self._remembered.update(new)

    def head(self, key: ChatKey) -> str | None:
        """The head hash this process recorded last for the chat."""
        return self._heads.get(key)

    def record_head(self, key: ChatKey, head: str) -> None:
        self._heads[key] = head

    def outlet_done(self, key: ChatKey, done: OutletDone) -> bool:
        """Whether the chat's last outlet handled here was this branch under these valves."""
        return self._outlets.get(key) == done

    def mark_outlet(self, key: ChatKey, done: OutletDone) -> None:
        self._outlets[key] = done


def _detected_locale(texts: tuple[str, ...]) -> str:
    return locales.detect_locale(list(texts))
