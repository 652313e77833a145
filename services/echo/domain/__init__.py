"""The domain of ECHO: pure, no I/O.

Rule: modules here import the standard library, pydantic and `echo.config` / `echo.errors` only — no
web framework, database driver, vector client, LLM SDK, metrics or tracing (import-linter contract
`pure-core`). Everything here is a function of its arguments, so it is tested without any server.

- `bodies`, `output_items`, `chain`, `tokens`, `text`, `masking`, `history`: Open WebUI bodies, an
  outlet's `output` items as the next inlet's messages, the hash chain, token counts, storable text,
  secret masking, a stored chat as messages.
- `compression`, `memory`, `attachments`, `shadow`, `aec`: one package per capability's rules.
- `lexical`: a text's terms as a sparse vector, and reciprocal rank fusion (hybrid retrieval).
- `jobs`: job states, transitions and retry policy; `extractive`: the offline provider's heuristics;
  `openai_to_gemini`: OpenAI bodies as Gemini contents; `transcripts`, `replay_reports`: replays.
"""
