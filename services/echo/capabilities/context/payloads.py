"""The payload of a `map_reduce` job: one file to index into the ephemeral RAG and summarise.

The `echo_context` inlet builds it with the file registry's source id and the context valves in
force (`files.py`) and stores it (`to_payload`); the worker validates the stored JSON into it once
(`echo.queue.payloads`) and hands it to `map_reduce.MapReduceHandler`.

Version 1: the keys as stored since the map_reduce job exists (rows written before versions existed
have no `"v"` and read as version 1); see `echo.queue.payloads` for the rule that adds a field or a
version.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from echo.domain import kinds
from echo.queue import payloads

__all__ = ["MapReducePayload"]


class MapReducePayload(payloads.Payload):
    """One file (see the module docstring); sizes in tokens, words and bytes as the valves give them."""

    KIND: ClassVar[str] = kinds.MAP_REDUCE
    VERSION: ClassVar[int] = 1

    user_id: str = Field(min_length=1)
    chat_id: str
    source_id: str = Field(min_length=1)  # the file registry's key (`echo.adapters.store.attachments`)
    file_id: str | None  # Open WebUI's, None when only the text the inlet kept is known
    filename: str
    mime_type: str
    max_words: int = Field(default=300, ge=1)  # ECHO_MR_SUMMARY_MAX_WORDS
    chunk_tokens: int = 256  # RAG_CHUNK_TOKENS
    overlap_tokens: int = 32  # RAG_CHUNK_OVERLAP_TOKENS
    max_file_bytes: int = 64 * 1024 * 1024  # MAX_FILE_SIZE
    model: str = "gemini-2.5-flash"  # MAP_REDUCE_MODEL

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> MapReducePayload:
        if self.chunk_tokens <= self.overlap_tokens:
            raise ValueError(
                f"overlap_tokens: {self.overlap_tokens} must be below chunk_tokens ({self.chunk_tokens})"
            )
        return self
