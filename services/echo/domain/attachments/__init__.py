"""Attachments of the context filter (seed 000, filter 1): pure, no I/O.

`mime` (the type Gemini should see, from names and sniffed bytes), `parts` (ordered multimodal parts
and `data:` URLs), `routing` (inline, native part or ephemeral RAG; source ids), `extraction` (text
from bytes: text files, PDFs through pypdf), `chunking` (token-aware chunks with overlap),
`mapreduce` (the summary plan and prompts), `blocks` (the `<smart_context>` block).
"""
