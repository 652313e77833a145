"""The store in memory: every repository of the store port over plain dicts, one ``Tables`` per tenant.

Rules of this package:
- it implements ``echo.ports.store`` with the semantics of ``echo.adapters.store`` (PostgreSQL):
  the same keys, idempotent writes, orderings and cascades, text made storable as ``pool`` makes it;
  ``tests/contract/store_contract.py`` runs both on the same behaviours;
- no I/O, nothing outside the standard library, the domain and the ports;
- transactions are units of work: ``Tables.transaction`` yields a ``Transaction`` that the
  repositories take wherever PostgreSQL takes a connection; writes apply at once (visible to every
  reader straight away: no isolation), and when the block raises, what it wrote with the
  transaction is put back as it was (a concurrent write of the same row, which PostgreSQL would
  have made wait, is lost with it). ``Memories.user_lock`` and ``Conversations.summary_lock`` are
  ``asyncio`` locks: they serialise coroutines of one process;
- the schema's CHECK constraints (hash formats, statuses, importance 1-5) are not checked: what
  PostgreSQL refuses with a ``StoreError`` is kept here.

    tables = in_memory_store.Tables()
    conversations = in_memory_store.Conversations(tables)
    async with tables.transaction() as connection:
        await conversations.remember(user_id, messages, connection=connection)
"""

from __future__ import annotations

from echo.adapters.in_memory_store.attachments import Attachments
from echo.adapters.in_memory_store.conversations import Conversations
from echo.adapters.in_memory_store.memories import Memories
from echo.adapters.in_memory_store.registries import Registries
from echo.adapters.in_memory_store.shadow import ShadowStore
from echo.adapters.in_memory_store.tables import Tables, Transaction

__all__ = ["Attachments", "Conversations", "Memories", "Registries", "ShadowStore", "Tables", "Transaction"]
