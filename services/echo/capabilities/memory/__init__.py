"""`echo_memory` (seed 000, filter 2), the application: recall on the inlet, distillation after.

- `filter`: the thin filter (recall before the turn, windows due after it),
- `distill`: the `distill` job handler (a window into long-term memories, merged on collision),
- `forgetting`: forgetting a user (the right to be forgotten), `backends`: where job handlers and
  the hook service find the embedder and the vector store (`echo.ports.backends.Index`).

The rules themselves are in `echo.domain.memory`.
"""
