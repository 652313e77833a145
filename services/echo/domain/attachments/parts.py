"""Ordered multimodal parts of a user message (seed 000 v7.9), pure.

Open WebUI sends a prompt with pasted images as a `content` list of `text` and `image_url` parts.
`checked_parts` walks it in its original order and checks every `data:` URL: decoded, its type
sniffed from the bytes (a declared type that lies is corrected), its size bounded. A part that
fails a check is replaced, at its place, by a text note saying why, so the interleaving the user
meant reaches the model unchanged and nothing is dropped silently.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from echo.domain.attachments import mime as mime_module
from echo.errors import EchoError

__all__ = ["CheckedParts", "DataUrl", "DataUrlError", "checked_parts", "data_url", "parse_data_url"]


class DataUrlError(EchoError):
    """A `data:` URL that cannot be used; the message says why (shown to the model as a note)."""


@dataclass(frozen=True)
class DataUrl:
    mime: str
    data: bytes


@dataclass(frozen=True)
class CheckedParts:
    """The parts in order (OpenAI content parts), and the problems found (one line each)."""

    parts: tuple[dict[str, Any], ...]
    problems: tuple[str, ...] = ()
    images: int = 0
    corrected: int = 0


def parse_data_url(url: str, *, max_bytes: int) -> DataUrl:
    """Decode a `data:[<mime>][;base64],<payload>` URL; raise `DataUrlError` saying what is wrong."""
    if not url.startswith("data:"):
        raise DataUrlError("not a data: URL")
    header, comma, payload = url[len("data:") :].partition(",")
    if not comma:
        raise DataUrlError("malformed data: URL (no comma)")
    declared, *params = header.split(";")
    # base64 needs 4 characters per 3 bytes: refuse before decoding what would be too large.
    if len(payload) > (max_bytes // 3 + 1) * 4 + 4096:
        raise DataUrlError(f"larger than the {max_bytes}-byte limit")
    try:
        if "base64" in params:
            data = base64.b64decode("".join(payload.split()), validate=True)
        else:
            data = unquote_to_bytes(payload)
    except (binascii.Error, ValueError) as error:
        raise DataUrlError("invalid base64 payload") from error
    if not data:
        raise DataUrlError("empty (zero bytes)")
    if len(data) > max_bytes:
        raise DataUrlError(f"{len(data)} bytes, over the {max_bytes}-byte limit")
    return DataUrl(declared.strip().lower() or "text/plain", data)


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _image_url(part: Mapping[str, Any]) -> str | None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    return url if isinstance(url, str) else None


def checked_parts(content: Sequence[Any], *, max_image_bytes: int) -> CheckedParts:
    """Every part of `content` in order: text kept, `data:` images checked (see the module docstring),
    other URLs kept as they are; parts of other types are kept untouched."""
    parts: list[dict[str, Any]] = []
    problems: list[str] = []
    images = corrected = 0
    for index, raw in enumerate(content):
        part: Any = {"type": "text", "text": raw} if isinstance(raw, str) else raw
        if not isinstance(part, Mapping):
            problems.append(f"part {index}: not an object; left out")
            parts.append({"type": "text", "text": f"[part {index} left out: not a content part]"})
            continue
        if part.get("type") != "image_url":
            parts.append(dict(part))
            continue
        url = _image_url(part)
        if url is None or not url.startswith("data:"):
            parts.append(dict(part))
            images += url is not None
            continue
        try:
            decoded = parse_data_url(url, max_bytes=max_image_bytes)
        except DataUrlError as error:
            problems.append(f"image {index}: {error}")
            parts.append({"type": "text", "text": f"[image {index} left out: {error}]"})
            continue
        verdict = mime_module.gemini_mime("", decoded.mime, decoded.data)
        if verdict.kind is not mime_module.Kind.IMAGE:
            problems.append(f"image {index}: its bytes are {verdict.mime}, not an image")
            parts.append(
                {
                    "type": "text",
                    "text": f"[image {index} left out: its bytes are {verdict.mime}, not an image]",
                }
            )
            continue
        images += 1
        if verdict.mime != decoded.mime:
            corrected += 1
            parts.append(
                {**part, "image_url": {**_as_mapping(part), "url": data_url(verdict.mime, decoded.data)}}
            )
        else:
            parts.append(dict(part))
    return CheckedParts(tuple(parts), tuple(problems), images=images, corrected=corrected)


def _as_mapping(part: Mapping[str, Any]) -> dict[str, Any]:
    image = part.get("image_url")
    return dict(image) if isinstance(image, Mapping) else {}
