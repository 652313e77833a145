"""Token-aware chunking with overlap for the ephemeral RAG, pure.

`chunk_text` cuts a text into windows of `size` tokens that share `overlap` tokens with the previous
one, at token boundaries given by the caller (`echo.domain.tokens.token_offsets`: the character offset where
each token starts), so every chunk is an exact slice of the original text: nothing rewritten, nothing
lost between two chunks. A window's end is moved back to the last line break or sentence end in its
final quarter when there is one, so chunks tend to end where the text does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Chunk", "chunk_text", "sections"]

_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "。")


@dataclass(frozen=True)
class Chunk:
    index: int
    start: int  # character offsets in the text
    end: int
    text: str
    tokens: int


def _soft_end(text: str, offsets: Sequence[int], first: int, last: int) -> int:
    """The token index (exclusive) to end a window at: `last`, or an earlier one just after a break."""
    if last >= len(offsets):
        return last
    floor = first + (last - first) * 3 // 4
    window = text[offsets[floor] : offsets[last]]
    for mark in _BREAKS:
        at = window.rfind(mark)
        if at >= 0:
            cut = offsets[floor] + at + len(mark)
            for token in range(last, floor, -1):
                if offsets[token] <= cut:
                    return max(token, first + 1)
    return last


def chunk_text(text: str, offsets: Sequence[int], *, size: int, overlap: int) -> list[Chunk]:
    """Chunks of at most `size` tokens, consecutive ones sharing up to `overlap` tokens."""
    if size < 1:
        raise ValueError("size: a chunk holds at least one token")
    if not 0 <= overlap < size:
        raise ValueError("overlap: from 0 to size - 1 tokens")
    if not text.strip() or not offsets:
        return []
    chunks: list[Chunk] = []
    first = 0
    while first < len(offsets):
        last = _soft_end(text, offsets, first, min(first + size, len(offsets)))
        start = offsets[first]
        end = offsets[last] if last < len(offsets) else len(text)
        if text[start:end].strip():
            chunks.append(Chunk(len(chunks), start, end, text[start:end], last - first))
        if last >= len(offsets):
            break
        first = max(last - overlap, first + 1)
    return chunks


def sections(text: str, offsets: Sequence[int], *, max_tokens: int, max_sections: int) -> list[str]:
    """The text cut into at most `max_sections` consecutive, non-overlapping parts of about equal
    size, each of at most `max_tokens` tokens unless that would make more than `max_sections`
    (the map step of map-reduce: one model call per section)."""
    if not offsets:
        return []
    count = min(max_sections, max(1, -(-len(offsets) // max_tokens)))
    per = -(-len(offsets) // count)
    starts = [offsets[i] for i in range(0, len(offsets), per)]
    if starts:
        starts[0] = 0
    ends = [*starts[1:], len(text)]
    return [text[a:b] for a, b in zip(starts, ends, strict=True) if text[a:b].strip()]
