"""Adapters: ECHO's I/O, each behind a port and translating its driver's errors into `echo.errors`.

- `store`: PostgreSQL through asyncpg (a server, or the embedded one), SQL in named `.sql` files,
- `in_memory_store`: the store port over plain dicts (tests; the same contract as `store`),
- `vectors`: Qdrant (a server or local mode) and the in-memory fake,
- `embeddings`: Infinity / OpenAI-style HTTP, in-process sentence-transformers, the hash fake,
- `llm`: Gemini (google-genai), OpenAI-compatible servers (httpx), the offline provider,
- `openwebui`: Open WebUI's own REST API (httpx).

Rule: adapters import the domain, the ports and the configuration, never each other (contract
`adapters-apart`) nor anything above them.
"""
