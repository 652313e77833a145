"""Text out of a file's bytes, read locally (seed 000: "les fichiers textuels sont lus localement").

Text files are decoded (UTF-8, or UTF-16/32 with a byte-order mark; anything else as UTF-8 with
replacement characters, counted); PDFs go through pypdf, page by page, each page marked
`[page N]` so a search hit says where it is. An encrypted PDF that opens without a password is read;
one that needs a password, a corrupt PDF, or one with no text layer (a scan) raises
`ExtractionError` saying which. CPU-bound: callers run it in a worker thread.
"""

from __future__ import annotations

import codecs
import io
import logging
from dataclasses import dataclass

import pypdf
from pypdf import errors as pypdf_errors

from echo.domain.attachments import mime as mime_module
from echo.errors import EchoError

__all__ = ["Extracted", "ExtractionError", "extract_text"]

logging.getLogger("pypdf").setLevel(logging.ERROR)  # it warns on every odd object of a real-world PDF

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class ExtractionError(EchoError):
    """No text can be read from the file; the message says why (shown to the user and the model)."""


@dataclass(frozen=True)
class Extracted:
    text: str
    pages: int = 0
    replaced: int = 0  # undecodable bytes replaced by U+FFFD


def _decode(data: bytes) -> Extracted:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return Extracted(data.decode(encoding, errors="replace"))
    try:
        return Extracted(data.decode("utf-8"))
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        return Extracted(text, replaced=text.count("\ufffd"))


def _pdf(data: bytes) -> Extracted:
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("the PDF is encrypted and needs a password")
        pages = []
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            if text:
                pages.append(f"[page {number}]\n{text}")
        count = len(reader.pages)
    except ExtractionError:
        raise
    except pypdf_errors.FileNotDecryptedError as error:
        raise ExtractionError("the PDF is encrypted and needs a password") from error
    except pypdf_errors.DependencyError as error:
        raise ExtractionError(f"the PDF's encryption is not supported: {error}") from error
    except (pypdf_errors.PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as error:
        raise ExtractionError(
            f"the PDF is corrupt or unreadable ({type(error).__name__}: {error})"
        ) from error
    if not pages:
        raise ExtractionError(f"the PDF has no text layer ({count} pages; a scan needs OCR)")
    return Extracted("\n\n".join(pages), pages=count)


def extract_text(data: bytes, verdict: mime_module.MimeVerdict) -> Extracted:
    """The file's text; raises `ExtractionError` when there is none to be had locally."""
    if not data:
        raise ExtractionError("the file is empty (zero bytes)")
    if verdict.kind is mime_module.Kind.PDF:
        return _pdf(data)
    if verdict.kind is mime_module.Kind.TEXT:
        extracted = _decode(data)
        if not extracted.text.strip():
            raise ExtractionError("the file holds only white space")
        return extracted
    raise ExtractionError(f"{verdict.mime} has no text ECHO reads locally")
