"""Long-term memory (seed 000, filter 2: conversation_memory_filter v4.0), the pure domain.

Pure, no I/O (import-linter's pure-domain contract): plain data in, decisions and texts out.

- ``windows``: the deterministic sliding window (every ``WINDOW_SIZE`` new messages of a branch, one
  window of ``WINDOW_SIZE + WINDOW_OVERLAP``), keyed by the cumulative hash of its last message.
- ``cleaning``: ``_clean_messages`` of the seed: role, content and attached file names only.
- ``worth``: windows with nothing worth remembering (greetings, small talk) are not distilled.
- ``distillation``: the distillation prompt (facts, not a narrative), its response schema and the
  validation of an answer: one memory per fact, each the size of a fact.
- ``facts``: the heuristic distiller, the offline provider's answer to a distillation.
- ``collisions``: exact match (touch), similar (merge, importance = max), or new (insert).
- ``merging``: the merge prompt, and the offline merge that keeps every sentence of both.
- ``recall``: the floor, ranking by similarity, importance and recency, the token budget, the fenced
  block, and leaving out what the request already holds.
- ``context``: what a request holds (its messages, the summary echo_compression names in metadata).
- ``records``: the values (memories, versions, provenance).
"""
