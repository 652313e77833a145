"""`echo_context` (seed 000, filter 1), the application: the AEC block and attachments.

- `filter`: the inlet (AEC block, attached files) and outlet (masking),
- `files`: one inlet's attached files: read, routed, registered, blocks rendered,
- `map_reduce`: the `map_reduce` job handler (a big file into the ephemeral RAG and its summary),
- `search`: `search_session_context`, the best chunks of one ingested file for its own user.

The rules themselves are in `echo.domain.attachments` and `echo.domain.aec`.
"""
