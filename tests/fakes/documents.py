"""Real files for the attachment tests and benches: PDFs made with fpdf2 (text, several pages,
encrypted), a corrupt PDF, PNG/JPEG bytes made by hand, and a generated long text."""

from __future__ import annotations

import io
import random
import struct
import zlib

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

__all__ = ["corrupt_pdf", "encrypted_pdf", "long_text", "pdf", "png"]

_PROSE = (
    "the system stores every chunk of the document with its source id so that a search finds the"
    " passage where a user asks about budgets deadlines contracts engineers servers and invoices"
)
_WORDS = tuple(_PROSE.split(" "))


def pdf(pages: list[str]) -> bytes:
    """A PDF with one page per text (Helvetica, wrapped)."""
    document = FPDF()
    document.set_font("Helvetica", size=11)
    for text in pages:
        document.add_page()
        document.multi_cell(0, 6, text)
    return bytes(document.output())


def encrypted_pdf(text: str, password: str = "s3cret") -> bytes:
    """A PDF that needs `password` to open (RC4-128: pypdf writes and reads it without extras)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf([text]))))
    writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def corrupt_pdf() -> bytes:
    good = pdf(["a page that will not survive"])
    return good[: len(good) // 3] + b"\x00garbage" * 50


def png(width: int = 2, height: int = 2, *, noise: bool = False) -> bytes:
    """A valid RGB PNG: red, or random pixels (`noise`, so its size grows with its area)."""
    rng = random.Random(width * 7919 + height)
    row = (lambda: rng.randbytes(3 * width)) if noise else (lambda: b"\xff\x00\x00" * width)
    raw = b"".join(b"\x00" + row() for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        checksum = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", checksum)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def long_text(size_bytes: int, *, seed: int = 7, marker: str | None = None) -> str:
    """About `size_bytes` of generated prose in paragraphs; `marker` once, in the middle."""
    rng = random.Random(seed)
    paragraphs: list[str] = []
    total = 0
    while total < size_bytes:
        sentence_count = rng.randint(3, 7)
        sentences = [
            " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 18))).capitalize() + "."
            for _ in range(sentence_count)
        ]
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        total += len(paragraph) + 2
    if marker is not None:
        paragraphs.insert(len(paragraphs) // 2, marker)
    return "\n\n".join(paragraphs)
