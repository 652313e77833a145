"""`echo_compression` (seed 002), the application: the filter, its summary jobs and their handler.

- `filter`: the thin filter (inlet: the request within budget; outlet: summaries due),
- `costs`: hashing and pricing a request's messages, cached per process,
- `jobs`: enqueueing summary jobs (outlet and manual compaction), `summary`: the `summary` handler,
- `references`: referenced chats on the inlet (the I/O around `echo.domain.compression.references`).

The rules themselves are in `echo.domain.compression`.
"""
