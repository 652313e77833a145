"""Routing of one attached file (seed 000, filter 1): inline, native part, or ephemeral RAG, pure.

By kind (`echo.domain.attachments.mime`) and size (`MAX_DIRECT_TEXT_SIZE`, the seed's 256 KiB):
- text (and PDFs or office files whose text is known) up to the limit goes into the turn (`inline`);
- larger text goes to the ephemeral RAG (`rag_ephemeral`): chunked, embedded, summarised by a job;
- images, audio and video Gemini reads natively stay native parts (`native`) up to the native
  limit: images for every model (they travel as `image_url` parts), audio and video for the `echo.*`
  pipe models only (other providers do not take them, so those are left to Open WebUI); one larger
  than `MAX_DIRECT_TEXT_SIZE` is also transcribed into the ephemeral RAG (`transcribe`);
- a file over the hard limit, or empty, is refused with a reason; a binary file whose text is not
  known (an archive, an executable) is left to Open WebUI.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from echo.domain.attachments import mime as mime_module

__all__ = ["FileFacts", "Limits", "Mode", "Route", "route", "source_id"]


class Mode(StrEnum):
    INLINE = "inline"
    NATIVE = "native"
    RAG = "rag_ephemeral"


@dataclass(frozen=True)
class FileFacts:
    """What is known of a file: Open WebUI's id and name, the declared type, its size in bytes, and its
    extracted text (from the body or Open WebUI's files API) when there is one."""

    file_id: str | None
    filename: str
    declared_mime: str | None = None
    size_bytes: int | None = None
    text: str | None = None


@dataclass(frozen=True)
class Limits:
    """Bytes: text injected directly (`MAX_DIRECT_TEXT_SIZE`), a native media part, any file at all."""

    max_direct_text_bytes: int
    max_native_bytes: int
    max_file_bytes: int


@dataclass(frozen=True)
class Route:
    """`mode` None: ECHO does not take the file (`refused` True: nobody should — the reason says why).
    `transcribe`: a native media part over `MAX_DIRECT_TEXT_SIZE` is also transcribed into the
    ephemeral RAG by the multimodal model (a job), so later turns can search it."""

    mode: Mode | None
    reason: str
    refused: bool = False
    transcribe: bool = False


def route(facts: FileFacts, verdict: mime_module.MimeVerdict, limits: Limits, *, pipe_model: bool) -> Route:
    size = facts.size_bytes
    text_bytes = len(facts.text.encode("utf-8")) if facts.text is not None else None
    if size is not None and size > limits.max_file_bytes:
        return Route(
            None, f"{size} bytes, over the {limits.max_file_bytes}-byte limit (ECHO_MAX_FILE_SIZE)", True
        )
    kind = verdict.kind
    if kind in (mime_module.Kind.IMAGE, mime_module.Kind.AUDIO, mime_module.Kind.VIDEO):
        if size == 0:
            return Route(None, "the file is empty (zero bytes)", True)
        if kind is not mime_module.Kind.IMAGE and not pipe_model:
            return Route(None, f"{verdict.mime} is passed natively to echo.* models only")
        if size is not None and size > limits.max_native_bytes:
            return Route(
                None,
                f"{size} bytes of {verdict.mime}, over the {limits.max_native_bytes}-byte limit of a native"
                " part (MAX_NATIVE_FILE_SIZE); media are not transcribed in this version",
                True,
            )
        large = size is not None and size > limits.max_direct_text_bytes
        return Route(Mode.NATIVE, f"{verdict.mime} read natively by the model", transcribe=large)
    if text_bytes is None:
        if size == 0:
            return Route(None, "the file is empty (zero bytes)", True)
        readable = kind in (mime_module.Kind.TEXT, mime_module.Kind.PDF)
        if readable and size is not None and size > limits.max_direct_text_bytes:
            return Route(
                Mode.RAG, f"{size} bytes of {verdict.mime}, over MAX_DIRECT_TEXT_SIZE: read by the job"
            )
        return Route(None, f"no text could be had for {verdict.mime}")
    if not facts.text or not facts.text.strip():
        return Route(None, "the file has no text (empty, or nothing could be extracted)", True)
    if text_bytes <= limits.max_direct_text_bytes:
        return Route(Mode.INLINE, f"{text_bytes} bytes of text, within MAX_DIRECT_TEXT_SIZE")
    return Route(
        Mode.RAG, f"{text_bytes} bytes of text, over MAX_DIRECT_TEXT_SIZE ({limits.max_direct_text_bytes})"
    )


def _id_part(value: str) -> str:
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "-") else "-" for ch in value)
    return cleaned.strip("-") or "none"


def source_id(user_id: str, chat_id: str, unix_time: int) -> str:
    """The seed's `U_<user>_C_<chat>_T_<unix time>` (characters other than letters, digits and `-`
    become `-`, so the id stays one token in a tool call)."""
    return f"U_{_id_part(user_id)}_C_{_id_part(chat_id)}_T_{int(unix_time)}"
