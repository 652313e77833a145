"""`echo_compression` (seed 002), the application: the filter, its summary jobs and their handler.

- `filter`: the thin filter (inlet: the request within budget; outlet: summaries due),
- `outlet`: the outlet's work (store the branch, enqueue its summary past the threshold),
- `reporting`: its status events, logs and metrics, and how a failure is reported (fail open),
- `caches`: what the filter remembers between calls, per process,
- `costs`: hashing and pricing a request's messages, cached per process,
- `jobs`: enqueueing summary jobs (outlet and manual compaction), `summary`: the `summary` handler,
- `references`: referenced chats on the inlet (the I/O around `echo.domain.compression.references`).

The rules themselves are in `echo.domain.compression`.
"""
