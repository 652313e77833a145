"""`gemini_mime`: the MIME type of a file as Gemini should see it, from its name, the type the client
declared, and its first bytes (seed 000's get_gemini_mime), pure.

Content wins over names: a file whose bytes carry a known signature (PDF, PNG, MP4…) is that type
whatever its extension or declared type says, and a file whose bytes read as text is text even when
it is called `photo.png`. Only when the bytes say nothing (too few, or none given) do the extension
and then the declared type decide.
"""

from __future__ import annotations

import codecs
import posixpath
from dataclasses import dataclass
from enum import StrEnum

import filetype

__all__ = ["NATIVE_MIME_TYPES", "Kind", "MimeVerdict", "gemini_mime", "kind_of", "looks_like_text"]


class Kind(StrEnum):
    """What a file is to the router."""

    TEXT = "text"
    PDF = "pdf"
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"
    OTHER = "other"  # binary Gemini does not read natively (archives, office files, executables)


_IMAGES = ("image/png", "image/jpeg", "image/webp", "image/heic", "image/heif")
_AUDIO = ("audio/wav", "audio/mp3", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac")
_VIDEO = (
    "video/mp4",
    "video/mpeg",
    "video/mov",
    "video/avi",
    "video/x-flv",
    "video/mpg",
    "video/webm",
    "video/wmv",
    "video/3gpp",
)
_TEXTS = (
    "text/plain",
    "text/html",
    "text/css",
    "text/javascript",
    "text/x-typescript",
    "text/csv",
    "text/markdown",
    "text/x-python",
    "application/json",
    "text/xml",
    "text/rtf",
)
NATIVE_MIME_TYPES = frozenset((*_IMAGES, *_AUDIO, *_VIDEO, *_TEXTS, "application/pdf"))
"""Every type Gemini accepts as an inline part (its documented image, audio, video, document lists)."""

# Signature types (filetype's names) to the names Gemini documents.
_SNIFFED_ALIASES = {
    "audio/mpeg": "audio/mp3",
    "audio/x-wav": "audio/wav",
    "audio/x-aiff": "audio/aiff",
    "audio/x-flac": "audio/flac",
    "audio/aac": "audio/aac",
    "audio/x-aac": "audio/aac",
    "video/quicktime": "video/mov",
    "video/x-msvideo": "video/avi",
    "video/x-ms-wmv": "video/wmv",
    "video/x-matroska": "video/webm",
    "video/3gpp": "video/3gpp",
    "image/heic": "image/heic",
    "image/heif": "image/heif",
    "application/rtf": "text/rtf",
}

_TEXT_EXTENSIONS = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".tsv": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript",
    ".py": "text/x-python",
    ".json": "application/json",
    ".jsonl": "text/plain",
    ".xml": "text/xml",
    ".rtf": "text/rtf",
}
# Source and configuration files Gemini reads as plain text.
_PLAIN_EXTENSIONS = frozenset(
    [
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".go",
        ".rs",
        ".rb",
        ".php",
        ".pl",
        ".swift",
        ".m",
        ".r",
        ".jl",
        ".lua",
        ".sh",
        ".bash",
        ".zsh",
        ".ps1",
        ".bat",
        ".sql",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".env",
        ".properties",
        ".gradle",
        ".dockerfile",
        ".tf",
        ".hcl",
        ".proto",
        ".graphql",
        ".vue",
        ".svelte",
        ".tex",
        ".bib",
        ".rst",
        ".adoc",
        ".org",
        ".srt",
        ".vtt",
        ".diff",
        ".patch",
        ".ipynb",
    ]
)
_BINARY_EXTENSIONS = {
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".heic": "image/heic",
    ".heif": "image/heif",
    ".wav": "audio/wav",
    ".mp3": "audio/mp3",
    ".aiff": "audio/aiff",
    ".aif": "audio/aiff",
    ".aac": "audio/aac",
    ".ogg": "audio/ogg",
    ".oga": "audio/ogg",
    ".flac": "audio/flac",
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mpeg": "video/mpeg",
    ".mpg": "video/mpg",
    ".mov": "video/mov",
    ".avi": "video/avi",
    ".flv": "video/x-flv",
    ".webm": "video/webm",
    ".wmv": "video/wmv",
    ".3gp": "video/3gpp",
}
_DECLARED_ALIASES = {
    "image/jpg": "image/jpeg",
    "audio/mpeg": "audio/mp3",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "video/quicktime": "video/mov",
    "video/x-msvideo": "video/avi",
    "application/x-javascript": "text/javascript",
    "application/javascript": "text/javascript",
    "application/x-typescript": "text/x-typescript",
    "application/x-python-code": "text/x-python",
    "application/xml": "text/xml",
    "application/rtf": "text/rtf",
}
_SNIFF_BYTES = 8192
_MIN_SIGNATURE_BYTES = 4


@dataclass(frozen=True)
class MimeVerdict:
    """The type to use, its kind, and whether the declared type disagreed with the content."""

    mime: str
    kind: Kind
    mismatch: bool = False


def kind_of(mime: str) -> Kind:
    if mime == "application/pdf":
        return Kind.PDF
    major = mime.split("/", 1)[0]
    if major == "image" and mime in _IMAGES:
        return Kind.IMAGE
    if major == "audio" and mime in _AUDIO:
        return Kind.AUDIO
    if major == "video" and mime in _VIDEO:
        return Kind.VIDEO
    if mime in _TEXTS or major == "text":
        return Kind.TEXT
    return Kind.OTHER


def looks_like_text(head: bytes) -> bool:
    """True when these first bytes decode as UTF-8 (or UTF-16 with a BOM) with no NULs and few
    control characters; a multi-byte character cut at the end of `head` does not count against it."""
    if not head:
        return False
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return len(head) % 2 == 0 or len(head) > 2
    if b"\x00" in head:
        return False
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(head, final=False)
    except UnicodeDecodeError:
        return False
    controls = sum(1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r\f\v\x1b")
    return controls <= max(1, len(text) // 100)


def _extension(filename: str) -> str:
    name = posixpath.basename(filename.replace("\\", "/")).lower()
    if name == "dockerfile" or name == "makefile":
        return ".dockerfile"
    return posixpath.splitext(name)[1]


def _by_name(filename: str) -> str | None:
    extension = _extension(filename)
    if extension in _TEXT_EXTENSIONS:
        return _TEXT_EXTENSIONS[extension]
    if extension in _PLAIN_EXTENSIONS:
        return "text/plain"
    return _BINARY_EXTENSIONS.get(extension)


def _declared(declared: str | None) -> str | None:
    if not declared:
        return None
    base = declared.split(";", 1)[0].strip().lower()
    return _DECLARED_ALIASES.get(base, base) or None


def _sniffed(head: bytes) -> str | None:
    if len(head) < _MIN_SIGNATURE_BYTES:
        return None
    found: str | None = filetype.guess_mime(head[:_SNIFF_BYTES])  # filetype ships no types
    if found is None:
        return None
    return _SNIFFED_ALIASES.get(found, found)


def gemini_mime(filename: str, declared: str | None = None, head: bytes | None = None) -> MimeVerdict:
    """The file's type (see the module docstring); `head`: its first bytes when they are at hand."""
    by_name = _by_name(filename)
    stated = _declared(declared)
    claimed = by_name or stated
    if head is not None:
        sniffed = _sniffed(head)
        if sniffed is None and looks_like_text(head[:_SNIFF_BYTES]):
            textual = claimed if claimed is not None and kind_of(claimed) is Kind.TEXT else "text/plain"
            return MimeVerdict(textual, Kind.TEXT, mismatch=claimed is not None and claimed != textual)
        if sniffed is not None:
            return MimeVerdict(sniffed, kind_of(sniffed), mismatch=claimed is not None and claimed != sniffed)
        if head and claimed is not None and kind_of(claimed) is Kind.TEXT:
            return MimeVerdict("application/octet-stream", Kind.OTHER, mismatch=True)
    mime = claimed or "application/octet-stream"
    return MimeVerdict(mime, kind_of(mime))
