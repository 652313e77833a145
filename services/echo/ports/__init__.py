"""Ports: the Protocols the capabilities depend on, each with its values and errors. Pure, no I/O.

- `vectors.VectorStore` (adapters: Qdrant server or local mode, in-memory fake),
- `embeddings.Embedder` (adapters: HTTP/Infinity, in-process sentence-transformers, hash fake),
- `llm.LLM` (adapters: Gemini, OpenAI-compatible, offline),
- `store.ConversationStore`, `MemoryStore`, `AttachmentStore`, `RegistryStore`, `ShadowStore`,
  `Transactions` (units of work, undone whole when a block raises), `StoreError` (its `retryable`
  says whether to retry): the tenant's repositories (adapters: PostgreSQL, in memory),
- `backends.Backends`: what every filter, job handler and route receives — the repositories and
  job queue (`store`), the embedder and vector store (`index`), Open WebUI's API (`openwebui`);
  a part the service lacks is `None` in the value, never found by `getattr`.

Adapters live in `echo.adapters`; a contract suite (`tests/contract`) runs every adapter of a port.
"""
