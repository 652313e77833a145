"""What `echo_compression` remembers between hook calls, per process.

Each memo is bounded; a full one is cleared (cheaper than LRU bookkeeping per hit, and each is only
a shortcut: forgetting costs one more statement or one more computation, never a wrong answer).
Keys carry the tenant (``Repositories.tenant``) wherever a store answer is remembered, so several
tenants served by one process never share an entry.

- ``locale``: the conversation's language (`locales.detect_locale`), by its latest user texts;
- ``models``: the chat's model and its base model (custom models inherit thresholds): the inlet's
  metadata names the base model; the outlet has none, so the inlet's answer is remembered;
- ``stored`` / ``remember``: the messages this process stored for a user (the outlet sends each
  once);
- ``head`` / ``record_head``: the chat head this process recorded last (Open WebUI sends a turn's
  outlet twice);
- ``outlet_done`` / ``mark_outlet``: the branch and valves an outlet of the chat handled last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.compression import jobs as compression_jobs
from echo.domain.compression import locales

__all__ = ["LOCALE_ENTRIES", "MODEL_ENTRIES", "Caches", "ChatKey", "OutletDone"]

LOCALE_ENTRIES = 10_000  # distinct latest-user-texts remembered with their language
MODEL_ENTRIES = 10_000  # custom models remembered with their base model

ChatKey = tuple[str, str, str]
"""(tenant, user id, chat id)."""
OutletDone = tuple[str, str, str | None, str | None]
"""(the branch's last cumulative hash, the valves as JSON, the model, the base model)."""


class Caches:
    """The per-process memos of one `CompressionFilter` (see the module docstring)."""

    def __init__(self, entries: int = compression_costs.CACHE_ENTRIES) -> None:
        self.entries = entries
        self._locales: dict[tuple[str, ...], str] = {}
        self._base_models: dict[str, str] = {}
        self._remembered: dict[tuple[str, str, str], None] = {}
        self._heads: dict[ChatKey, str] = {}
        self._outlets: dict[ChatKey, OutletDone] = {}

    def locale(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """`locales.detect_locale` of the latest user texts, cached by those texts."""
        texts = tuple(compression_jobs.latest_user_texts(messages))
        found = self._locales.get(texts)
        if found is None:
            if len(self._locales) >= LOCALE_ENTRIES:
                self._locales.clear()
            found = self._locales[texts] = locales.detect_locale(list(texts))
        return found

    def models(self, body: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """The chat's model and its base model (None: unknown), the base model remembered from the
        inlet for the outlet."""
        model = body.get("model") if isinstance(body.get("model"), str) else None
        metadata = body.get("metadata")
        info = metadata.get("model") if isinstance(metadata, Mapping) else None
        info = info.get("info") if isinstance(info, Mapping) else None
        base_model = info.get("base_model_id") if isinstance(info, Mapping) else None
        if model and isinstance(base_model, str) and base_model:
            if len(self._base_models) >= MODEL_ENTRIES:
                self._base_models.clear()
            self._base_models[model] = base_model
            return model, base_model
        return model, self._base_models.get(model) if model else None

    def stored(self, tenant: str, user_id: str, invariant: str) -> bool:
        """Whether this process stored the message ``invariant`` of this user."""
        return (tenant, user_id, invariant) in self._remembered

    def remember(self, tenant: str, user_id: str, invariants: Iterable[str]) -> None:
        """This process stored these messages of this user."""
        new = dict.fromkeys((tenant, user_id, invariant) for invariant in invariants)
        if len(self._remembered) + len(new) > self.entries:
            self._remembered.clear()
        self._remembered.update(new)

    def head(self, key: ChatKey) -> str | None:
        """The head hash this process recorded last for the chat."""
        return self._heads.get(key)

    def record_head(self, key: ChatKey, head: str) -> None:
        if len(self._heads) >= self.entries:
            self._heads.clear()
        self._heads[key] = head

    def outlet_done(self, key: ChatKey, done: OutletDone) -> bool:
        """Whether the chat's last outlet handled here was this branch under these valves."""
        return self._outlets.get(key) == done

    def mark_outlet(self, key: ChatKey, done: OutletDone) -> None:
        if len(self._outlets) >= self.entries:
            self._outlets.clear()
        self._outlets[key] = done
