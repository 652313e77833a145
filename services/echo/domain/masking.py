"""Masking of leaked secrets in model output (Open WebUI outlet and streamed pipe responses).

Domain module: pure, no I/O, standard library only. ``mask_secrets`` masks a whole text; ``StreamMasker``
masks a stream chunk by chunk into the same text, holding back only what may still be a secret (at most
64 K characters, see its docstring); ``may_hold_secret`` says cheaply whether a text could hold one.

Secrets are looked for in a *view* of the text, not the text itself, so that what a user would call a
leaked key is masked however it is written; each match is mapped back to the span of the original text
it came from, and that span is replaced by the kind's label. The view (``_view``):

- drops zero-width and other invisible format characters (Unicode ``Cf``, variation selectors, combining
  marks), so ``AIza\\u200bSy…`` or ``BE\\u200bGIN`` read as written;
- reads fullwidth, mathematical and circled letters and digits and hyphen look-alikes as ASCII (NFKC);
- decodes percent escapes (``%41%49…``, UTF-8 runs included), ``\\uXXXX`` / ``\\xXX`` / ``\\/`` escapes and
  HTML numeric entities;
- decodes base64 runs that hold ``-BEGIN `` at any alignment (a Kubernetes Secret's ``LS0tLS1CRUdJTi…``),
  line-wrapped ones included, so the private key inside is found by the PEM rules.

Clean text costs little: ASCII text without ``%``, ``\\`` or ``&#`` is its own view, and otherwise only
the places above are rewritten. Cost is linear in the text, about 1 µs a character at worst (text made
only of match starts). ``data:<mime>;base64,`` URIs are kept verbatim (unless their payload decodes to a
private key). Labels are inert, so masking is idempotent.

Token kinds (Google, OpenAI, Anthropic, AWS, GitHub, Slack, Stripe, GitLab, Hugging Face, npm, Google
OAuth) are matched on their prefix, which may follow letters or ``_`` (``api_key_AIza…``; a bare ``sk-``
glued to a word must look random), and must not be followed by ``[A-Za-z0-9_+/=-]`` (which keeps keys
inside longer tokens or base64 unmasked). A key split by one blank or line break is one key: a fixed-
length key when both halves add up to its length, a longer one when the second half looks random. AWS
secret keys are found beside their name (``aws_secret_access_key``, ``secret_key``, ``SecretAccessKey``,
the ``aws configure`` prompt, YAML, Terraform, env files) or after an access key id (a credentials CSV).
A private-key block runs from its BEGIN line (any number of dashes, any case) to its own END line: lines
of another armor inside it (a stray ``-----END PUBLIC KEY-----``) do not end it, and when prose
interrupts its base64, a matching END line within ``_PEM_REACH`` characters still does.
"""

from __future__ import annotations

import binascii
import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["SECRET_KINDS", "MaskResult", "SecretKind", "StreamMasker", "mask_secrets", "may_hold_secret"]


@dataclass(frozen=True)
class SecretKind:
    """One kind of secret: ``name`` keys the counts, ``label`` replaces each match.

    ``pattern`` is the kind's plain form (documentation, and the check that no label matches a kind);
    matching itself goes through the view and the kind's matcher, which also accept the variants the
    module docstring lists. ``is_secret`` is kept for callers that filter matches of ``pattern``.
    """

    name: str
    label: str
    pattern: re.Pattern[str]
    is_secret: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class MaskResult:
    """The masked text and, per kind name, how many secrets were masked (empty when none)."""

    text: str
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


_C = re.compile
_LA = r"(?![A-Za-z0-9_+/=-])"
# A private-key block's type, any case ("RSA PRIVATE KEY", "openssh private key", "PGP PRIVATE KEY BLOCK").
_PEM_TYPE = r"(?P<type>(?:[A-Za-z0-9]{1,16}[ \t]+){0,3}?(?i:private)[ \t]+(?i:key)(?:[ \t]+(?i:block))?)"

GOOGLE = SecretKind(
    "google_api_key", "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]", _C(rf"AIza[0-9A-Za-z_-]{{35}}{_LA}")
)
ANTHROPIC = SecretKind(
    "anthropic_api_key",
    "[CLÉ API ANTHROPIC MASQUÉE PAR SÉCURITÉ]",
    _C(rf"sk-ant-[a-z]{{2,10}}[0-9]{{2}}-[A-Za-z0-9_-]{{20,255}}{_LA}"),
)
OPENAI = SecretKind(
    "openai_api_key",
    "[CLÉ API OPENAI MASQUÉE PAR SÉCURITÉ]",
    _C(rf"sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{{20,255}}{_LA}"),
)
AWS_ID = SecretKind(
    "aws_access_key_id",
    "[CLÉ D'ACCÈS AWS MASQUÉE PAR SÉCURITÉ]",
    _C(rf"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{{16}}{_LA}"),
)
AWS_SECRET = SecretKind(
    "aws_secret_access_key",
    "[SECRET AWS MASQUÉ PAR SÉCURITÉ]",
    _C(
        r"(?i:secret[_ .-]?(?:access[_ .-]?)?key)(?:[ \t]{0,2}\[[^\]\r\n]{0,40}\])?"
        r"(?:\\?[\"'])?[ \t]{0,4}(?:(?:[=:]|=>|:=|is)[ \t]{0,4})?(?:\\?[\"'])?"
        rf"(?P<secret>[A-Za-z0-9/+]{{40}}){_LA}"
    ),
)
GITHUB = SecretKind(
    "github_token",
    "[JETON GITHUB MASQUÉ PAR SÉCURITÉ]",
    _C(rf"(?:gh[pousr]_[A-Za-z0-9]{{36,255}}|github_pat_[A-Za-z0-9_]{{50,255}}){_LA}"),
)
SLACK = SecretKind(
    "slack_token",
    "[JETON SLACK MASQUÉ PAR SÉCURITÉ]",
    _C(
        r"(?:xox[abposr]-[A-Za-z0-9-]{10,250}|xapp-[0-9]-[A-Za-z0-9-]{10,250}"
        rf"|https://hooks\.slack\.com/services/T[A-Z0-9]{{6,12}}/B[A-Z0-9]{{6,12}}/[A-Za-z0-9]{{20,32}}){_LA}"
    ),
)
STRIPE = SecretKind(
    "stripe_api_key",
    "[CLÉ API STRIPE MASQUÉE PAR SÉCURITÉ]",
    _C(rf"[rs]k_(?:live|test)_[A-Za-z0-9]{{24,247}}{_LA}"),
)
GITLAB = SecretKind(
    "gitlab_token", "[JETON GITLAB MASQUÉ PAR SÉCURITÉ]", _C(rf"glpat-[A-Za-z0-9_-]{{20,64}}{_LA}")
)
HUGGINGFACE = SecretKind(
    "huggingface_token", "[JETON HUGGING FACE MASQUÉ PAR SÉCURITÉ]", _C(rf"hf_[A-Za-z0-9]{{34,40}}{_LA}")
)
NPM = SecretKind("npm_token", "[JETON NPM MASQUÉ PAR SÉCURITÉ]", _C(rf"npm_[A-Za-z0-9]{{36}}{_LA}"))
GOOGLE_OAUTH = SecretKind(
    "google_oauth_client_secret",
    "[SECRET OAUTH GOOGLE MASQUÉ PAR SÉCURITÉ]",
    _C(rf"GOCSPX-[A-Za-z0-9_-]{{28}}{_LA}"),
)
PRIVATE_KEY = SecretKind(
    "private_key",
    "[CLÉ PRIVÉE MASQUÉE PAR SÉCURITÉ]",
    _C(rf"-{{0,8}}[ \t]?(?i:begin)[ \t]+{_PEM_TYPE}[ \t]?-{{0,8}}"),
)
SECRET_KINDS: tuple[SecretKind, ...] = (
    GOOGLE,
    ANTHROPIC,
    OPENAI,
    AWS_ID,
    AWS_SECRET,
    GITHUB,
    SLACK,
    STRIPE,
    GITLAB,
    HUGGINGFACE,
    NPM,
    GOOGLE_OAUTH,
    PRIVATE_KEY,
)

# --- the view ------------------------------------------------------------------------------------

# Dropped from the view: every format character (Cf), variation selectors, combining marks, fillers.
_IGNORED_BMP = (
    "\u00ad\u034f\u0300-\u036f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u1ab0-\u1aff\u1dc0-\u1dff\u200b-\u200f\u202a-\u202e\u2060-\u206f\u20d0-\u20ff\u3164"
    "\ufe00-\ufe0f\ufe20-\ufe2f\ufeff\uffa0\ufff9-\ufffb"
)
_IGNORED_ASTRAL = (
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)


def _translations() -> dict[int, str]:
    """Characters the view reads as one ASCII character: NFKC of fullwidth, mathematical, circled and
    squared letters and digits, and the hyphens a key or a PEM line may be written with."""
    table: dict[int, str] = {ord(c): "-" for c in "\u2010\u2011\u2012\u2212\ufe63\uff0d"}
    ranges = [(0xFF01, 0xFF5E), (0x1D400, 0x1D7FF), (0x24B6, 0x24E9), (0x2460, 0x2468), (0x1F130, 0x1F189)]
    for first, last in ranges:
        for code in range(first, last + 1):
            folded = unicodedata.normalize("NFKC", chr(code))
            if len(folded) == 1 and folded.isascii() and (folded.isalnum() or folded in "+/=_-"):
                table[code] = folded
    return table


_TRANSLATED = _translations()


# Where the odd characters lie. A class of few ranges within the BMP is searched fast; characters past
# it (emoji among them) are found with one range, then looked up one by one.
_TRANSLATED_BMP = (
    "\u2010-\u2012\u2212\u2460-\u2468\u24b6-\u24e9\ufe63\uff0b\uff0d\uff0f-\uff19\uff1d\uff21-\uff3a"
    "\uff3f\uff41-\uff5a"
)
_ODD = _C(f"[{_IGNORED_BMP}{_TRANSLATED_BMP}]")
_ODD_RUN = _C(f"[{_IGNORED_BMP}{_TRANSLATED_BMP}]+")
_KEY_CLASS = "A-Za-z0-9+/=_-"
# An invisible character beside one a key is written with (the joiners inside emoji do not count); the
# class comes first, so the regex engine skips to candidates, and the look-arounds run only there.
_IGNORED_KEYED = _C(f"[{_IGNORED_BMP}](?:(?<=[{_KEY_CLASS}].)|(?=[{_IGNORED_BMP}]{{0,8}}[{_KEY_CLASS}]))")
_TRANSLATED_ONE = _C(f"[{_TRANSLATED_BMP}]")
_ASTRAL = _C("[\U00010000-\U0010ffff]")
_IGNORED_CHAR = _C(f"[{_IGNORED_BMP}{_IGNORED_ASTRAL}]")


# The UTF-8 of the odd characters past the BMP (tags, mathematical letters, squared letters…), to tell
# fast whether a text with emoji holds any.
_ODD_ASTRAL_UTF8 = re.compile(
    rb"\xf0(?:\x9d[\x85\x90-\x9f]|\x9f[\x84-\x86]|\x91[\x82\x83]|\x93\x90|\x9b\xb2)|\xf3\xa0[\x80-\x83]"
)


def _odd_astral(text: str) -> list[int]:
    """Where ``text`` holds an odd character past the BMP."""
    if _ASTRAL.search(text) is None or not _ODD_ASTRAL_UTF8.search(text.encode("utf-8", "surrogatepass")):
        return []
    return [found.start() for found in _ASTRAL.finditer(text) if _fold(found.group()) != found.group()]


def _odd_spans(raw: str) -> list[tuple[int, int, bool]]:
    """The runs of odd characters the view rewrites: any holding a folded character, or invisible ones
    beside a character a key is written with."""
    spans: list[tuple[int, int, bool]] = []
    first = _ODD.search(raw)  # one fast scan; most texts stop here
    starts = (
        []
        if first is None
        else sorted(
            [found.start() for found in _IGNORED_KEYED.finditer(raw, first.start())]
            + [found.start() for found in _TRANSLATED_ONE.finditer(raw, first.start())]
        )
    )
    at = 0
    for start in starts:
        if start < at:
            continue
        run = _ODD_RUN.match(raw, start)
        assert run is not None
        spans.append((start, run.end(), False))
        at = run.end()
    spans.extend((at, at + 1, False) for at in _odd_astral(raw))
    return spans


_ESCAPE_LEADS = ("%", "\\u", "\\x", "\\/", "&#")


def _escape_spans(raw: str) -> list[tuple[int, int, bool]]:
    """The escapes the view decodes (found with ``str.find``, which is faster than a regex scan)."""
    spans: list[tuple[int, int, bool]] = []
    present = [lead for lead in _ESCAPE_LEADS if lead[0] in raw]  # one-character scans first: fast
    for lead in present:
        at = raw.find(lead)
        while at != -1:
            found = _ESCAPE.match(raw, at)
            if found is not None:
                spans.append((at, found.end(), True))
            at = raw.find(lead, found.end() if found else at + 1)
    return spans


_ESCAPE = _C(
    r"%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*|\\u[0-9A-Fa-f]{4}(?:\\u[dD][c-fC-F][0-9A-Fa-f]{2})?"
    r"|\\x[0-9A-Fa-f]{2}|\\/|&#[0-9]{1,7};|&#[xX][0-9A-Fa-f]{1,6};"
)
# The tail of a text that may still be an escape (a stream holds it back until it is complete).
_OPEN_ESCAPE = _C(
    r"%(?:[0-9A-Fa-f]{2}%)*[0-9A-Fa-f]{0,2}\Z|\\(?:u[0-9A-Fa-f]{0,3}|x[0-9A-Fa-f]?)?\Z|&(?:#[xX]?[0-9A-Fa-f]{0,7})?\Z"
)
_OPEN_ESCAPE_REACH = 1024


def _b64_markers() -> tuple[tuple[str, int], ...]:
    """The base64 of ``-BEGIN `` (and ``-begin ``) at each byte alignment: the characters its bytes
    alone decide, and how far they sit from the start of their 4-character group."""
    markers = []
    for plain in (b"-BEGIN ", b"-begin "):
        for align in range(3):
            first = -(-8 * align // 6)
            last = (8 * align + 8 * len(plain)) // 6
            encoded = binascii.b2a_base64(b"\0" * align + plain + b"\0\0", newline=False).decode()
            markers.append((encoded[first:last], first))
    return tuple(markers)


_B64_MARKERS = _b64_markers()
_B64_LINE = _C(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_B64_BREAK = _C(r"(?:\r?\n|\\r\\n|\\n)[ \t]*(?=[A-Za-z0-9+/])")
_B64_CHAR = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_B64_BACK = 64  # how far before its marker a run is decoded (a stream holds at least this much)
_B64_WRAP_MIN = 16  # a line shorter than this is not taken as a wrapped base64 line


class _View:
    """``text``, read from ``raw`` (of length ``raw_len``) through blocks: ``(view start, raw start, view
    length, raw length)`` spans that map as a whole; between blocks, characters map one to one. A view of
    a view (base64 decoded after the escapes) maps through its ``parent``."""

    __slots__ = ("_blocks", "_raw_starts", "_view_starts", "parent", "raw_len", "text")

    def __init__(
        self, text: str, raw_len: int, blocks: list[tuple[int, int, int, int]], parent: _View | None = None
    ) -> None:
        self.text, self.raw_len, self.parent, self._blocks = text, raw_len, parent, blocks
        self._view_starts = [block[0] for block in blocks]
        self._raw_starts = [block[1] for block in blocks]

    def _start(self, at: int) -> int:
        if at >= len(self.text):
            return self.raw_len
        i = bisect_right(self._view_starts, at) - 1
        if i < 0:
            return at
        v0, r0, vlen, rlen = self._blocks[i]
        return r0 if at < v0 + vlen else r0 + rlen + at - v0 - vlen

    def _end(self, end: int) -> int:
        if end <= 0:
            return 0
        i = bisect_right(self._view_starts, end - 1) - 1
        if i < 0:
            return end
        v0, r0, vlen, rlen = self._blocks[i]
        return r0 + rlen if end - 1 < v0 + vlen else r0 + rlen + end - v0 - vlen

    def _index(self, raw: int) -> int:
        i = bisect_right(self._raw_starts, raw) - 1
        if i < 0:
            return raw
        v0, r0, vlen, rlen = self._blocks[i]
        return v0 if raw < r0 + rlen else v0 + vlen + raw - r0 - rlen

    def raw_start(self, at: int) -> int:
        """Where in the raw text the view character ``at`` comes from (its whole block)."""
        start = self._start(at)
        return self.parent.raw_start(start) if self.parent else start

    def raw_end(self, end: int) -> int:
        """Where in the raw text the view character ``end - 1`` ends."""
        stop = self._end(end)
        return self.parent.raw_end(stop) if self.parent else stop

    def index(self, raw: int) -> int:
        """The view index of the raw index ``raw`` (a block's start when inside one)."""
        return self._index(self.parent.index(raw) if self.parent else raw)


def _utf8_chars(data: bytes) -> list[tuple[str, int]]:
    """Each character of ``data`` with its byte count; a byte that starts no valid character is U+FFFD."""
    out: list[tuple[str, int]] = []
    i, n = 0, len(data)
    while i < n:
        byte = data[i]
        size = (
            1
            if byte < 0x80
            else 2
            if 0xC2 <= byte < 0xE0
            else 3
            if 0xE0 <= byte < 0xF0
            else 4
            if 0xF0 <= byte < 0xF5
            else 0
        )
        if size and i + size <= n:
            try:
                out.append((data[i : i + size].decode(), size))
                i += size
                continue
            except UnicodeDecodeError:
                pass
        out.append(("\ufffd", 1))
        i += 1
    return out


def _unescape(token: str) -> list[tuple[str, int]]:
    """The characters one ``_ESCAPE`` match stands for, each with the raw length it takes."""
    if token[0] == "%":
        return [(char, 3 * size) for char, size in _utf8_chars(bytes.fromhex(token.replace("%", "")))]
    if token.startswith("&#"):
        code = int(token[3:-1], 16) if token[2] in "xX" else int(token[2:-1])
        return [(chr(code) if code <= 0x10FFFF and not 0xD800 <= code < 0xE000 else "\ufffd", len(token))]
    if token == "\\/":
        return [("/", 2)]
    if token[1] == "x":
        return [(chr(int(token[2:], 16)), 4)]
    high = int(token[2:6], 16)
    if len(token) == 12 and 0xD800 <= high < 0xDC00:
        low = int(token[8:12], 16)
        return [(chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)), 12)]
    chars = [("\ufffd" if 0xD800 <= high < 0xE000 else chr(high), 6)]
    return chars if len(token) == 6 else [*chars, ("\ufffd", 6)]


def _fold(char: str) -> str:
    """The view of one character: dropped (""), read as ASCII, or itself."""
    folded = _TRANSLATED.get(ord(char))
    if folded is not None:
        return folded
    return "" if _IGNORED_CHAR.match(char) else char


def _decode_escapes_and_odd(raw: str) -> _View | None:
    """The view with odd characters folded and escapes decoded; None when it would be ``raw`` itself."""
    spans = _escape_spans(raw) if raw.isascii() else [*_odd_spans(raw), *_escape_spans(raw)]
    if not spans:
        return None
    spans.sort()
    pieces: list[str] = []
    blocks: list[tuple[int, int, int, int]] = []
    at = view_at = 0
    for start, end, escape in spans:
        pieces.append(raw[at:start])
        view_at += start - at
        if escape:
            raw_at = start
            for char, size in _unescape(raw[start:end]):
                folded = _fold(char)
                pieces.append(folded)
                blocks.append((view_at, raw_at, len(folded), size))
                view_at += len(folded)
                raw_at += size
        else:
            dropped_from = None
            for i in range(start, end):
                folded = _fold(raw[i])
                if folded:
                    if dropped_from is not None:
                        blocks.append((view_at, dropped_from, 0, i - dropped_from))
                        dropped_from = None
                    pieces.append(folded)
                    view_at += 1
                elif dropped_from is None:
                    dropped_from = i
            if dropped_from is not None:
                blocks.append((view_at, dropped_from, 0, end - dropped_from))
        at = end
    pieces.append(raw[at:])
    text = "".join(pieces)
    if not blocks and text == raw:
        return None
    return _View(text, len(raw), blocks)


def _decode_base64_keys(text: str, parent: _View | None) -> _View | None:
    """The view with every base64 run that holds a ``-BEGIN `` marker decoded (Latin-1, one block per
    4-character group), from the group the marker starts in; None when there is none."""
    starts = sorted(
        {
            found - offset
            for marker, offset in _B64_MARKERS
            for found in _find_all(text, marker)
            if found - offset >= 0 and all(c in _B64_CHAR for c in text[found - offset : found])
        }
    )
    if not starts:
        return None
    pieces: list[str] = []
    blocks: list[tuple[int, int, int, int]] = []
    at = view_at = 0
    for marker_group in starts:
        if marker_group < at:
            continue
        back = marker_group  # decode from the run's start (a little way back at most), in whole groups
        while back - 4 >= max(at, marker_group - _B64_BACK) and all(
            c in _B64_CHAR for c in text[back - 4 : back]
        ):
            back -= 4
        start = back
        pieces.append(text[at:start])
        view_at += start - at
        at = start
        while True:
            line = _B64_LINE.match(text, at)
            assert line is not None
            data = binascii.a2b_base64(line.group()) if line.end() > at else b""
            for i in range(0, len(data), 3):
                blocks.append((view_at + i, at + 4 * (i // 3), min(3, len(data) - i), 4))
            pieces.append(data.decode("latin-1"))
            view_at += len(data)
            at = line.end()
            whole_line = line.end() - line.start() >= _B64_WRAP_MIN and not line.group().endswith("=")
            wrap = _B64_BREAK.match(text, at) if whole_line and text[at : at + 1] not in _B64_CHAR else None
            if wrap is None:
                break
            blocks.append((view_at, at, 0, wrap.end() - at))
            at = wrap.end()
    pieces.append(text[at:])
    return _View("".join(pieces), len(text), blocks, parent)


def _find_all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _view(raw: str) -> _View:
    """What secrets are looked for in (see the module docstring)."""
    first = _decode_escapes_and_odd(raw)
    second = _decode_base64_keys(first.text if first else raw, first)
    return second or first or _View(raw, len(raw), [])


# --- matching ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    """What starts at a match start: the spans to mask (view indices), where the match ends (None:
    text to come could change it), and whether it is a data URI (kept verbatim)."""

    spans: tuple[tuple[SecretKind, int, int], ...]
    end: int | None
    data: bool = False
    payload: int = 0  # a data URI's: where its base64 starts


_HOLD_OPEN = _Found((), None)
_AFTER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=-")
_GLUE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-")
_SEP = _C(r"[ \t]|\r?\n|\\n")
_SPLIT_MIN = 8  # the second half of a split key of variable length: at least this long, and random


def _glued_after(text: str, end: int) -> bool:
    return end < len(text) and text[end] in _AFTER


def _glued_before(text: str, start: int) -> bool:
    """Whether ``start`` follows a letter, digit or ``+/-`` (a JSON escape such as ``\\n`` does not count)."""
    if start == 0 or text[start - 1] not in _GLUE:
        return False
    return not (start >= 2 and text[start - 2] == "\\" and text[start - 1] in "nrt")


_DIGIT = _C(r"[0-9]")
_LETTER = _C(r"[A-Za-z]")
_UPPER = _C(r"[A-Z]")
_LOWER = _C(r"[a-z]")


def _random(part: str) -> bool:
    return _DIGIT.search(part) is not None and _LETTER.search(part) is not None


def _cases(part: str) -> bool:
    return _UPPER.search(part) is not None and _LOWER.search(part) is not None


@dataclass(frozen=True)
class _Token:
    """A prefixed token: ``prefix`` at the start, then a body of ``run`` characters, ``low``…``high``
    long (exactly ``high`` when equal), possibly split once by ``_SEP``. ``check(body, glued)`` may
    refuse it (``glued``: it follows a letter, digit or ``+/-``)."""

    kind: SecretKind
    prefix: re.Pattern[str]
    run: re.Pattern[str]
    low: int
    high: int
    check: Callable[[str, bool], bool] | None = None
    needs: tuple[str, ...] = ()  # character classes ``check`` wants in the body: tested first, in one go
    quick: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # the run stops one past ``high``: never a scan to the text's end
        chars = self.run.pattern
        object.__setattr__(self, "run", _C(f"{chars}{{0,{self.high + 1}}}"))
        # Each need: the body (split or not) up to its first such character, without backtracking.
        allowed = {c for c in map(chr, range(128)) if re.fullmatch(chars, c)} | set(" \t\r\n\\")
        wants = []
        for need in self.needs:
            others = "".join(map(re.escape, sorted(c for c in allowed if not re.fullmatch(need, c))))
            wants.append(f"(?=[{others}]{{0,{self.high + 3}}}+{need})")
        object.__setattr__(self, "quick", _C(f"(?:{self.prefix.pattern}){''.join(wants)}"))

    def match(self, text: str, start: int) -> _Found | None:
        if self.needs and self.quick.match(text, start) is None:  # (crafted runs of prefixes fail here)
            return None
        head = self.prefix.match(text, start)
        if head is None:
            return None
        glued = _glued_before(text, start)
        found = self._body(text, head.end(), glued)
        if found is None:
            return None
        end, body = found
        if self.check is not None and not self.check(body, glued):
            return None
        return _Found(((self.kind, start, end),), end)

    def _body(self, text: str, at: int, glued: bool) -> tuple[int, str] | None:
        first = self.run.match(text, at)
        assert first is not None
        size = first.end() - at
        if self.low <= size <= self.high and not _glued_after(text, first.end()):
            if self.low < self.high:
                more = self._second(text, first.end(), self.high - size, _SPLIT_MIN)
                if more is not None:
                    return more[0], first.group() + more[1]
            return first.end(), first.group()
        if size >= self.low:  # too long, or glued to what follows: maybe to another key
            if self.check is not None and not self.check(first.group(), glued):
                return None  # (what the check asks for is not even in the whole run)
            fixed = self.low == self.high
            stop = _glued_key(text, at + self.low, min(at + self.high, first.end()), fixed=fixed)
            return None if stop is None else (stop, text[at:stop])
        if size == 0 or (self.low < self.high and size < 4):
            return None
        if self.low == self.high:
            more = self._second(text, first.end(), self.high - size, self.high - size, random=False)
        else:
            more = self._second(text, first.end(), self.high - size, max(_SPLIT_MIN, self.low - size))
        return None if more is None else (more[0], first.group() + more[1])

    def starts_key(self, text: str, at: int) -> bool:
        """Whether a key of this kind may start at ``at``: its prefix, then at least ``low`` characters
        (however long: it may be glued to the next one), or a first half that ``_second`` completes."""
        head = self.prefix.match(text, at)
        if head is None:
            return False
        run = self.run.match(text, head.end())
        assert run is not None
        size = run.end() - head.end()
        if size >= self.low:
            return True
        if size == 0 or (self.low < self.high and size < 4):
            return False
        fixed = self.low == self.high
        longest, shortest = self.high - size, self.high - size if fixed else max(_SPLIT_MIN, self.low - size)
        return self._second(text, run.end(), longest, shortest, random=not fixed) is not None

    def _second(
        self, text: str, at: int, longest: int, shortest: int, *, random: bool = True
    ) -> tuple[int, str] | None:
        """The second half after one separator at ``at``, ``shortest``…``longest`` long."""
        sep = _SEP.match(text, at)
        if sep is None or longest < shortest:
            return None
        second = self.run.match(text, sep.end())
        assert second is not None
        size = second.end() - sep.end()
        if not shortest <= size <= longest or _glued_after(text, second.end()):
            return None
        if random and not _random(second.group()):
            return None
        return second.end(), second.group()


def _glued_key(text: str, low: int, high: int, *, fixed: bool) -> int | None:
    """Where, in ``[low, high]`` (exactly ``high`` for a fixed length), another secret starts glued to
    the token being matched (``AIza…AIza…``): the token then ends there, as it would once that secret is
    masked, which keeps masking idempotent."""
    at, stop = (high, high + 1) if fixed else (low, high + 1)
    while (found := _START.search(text, at, stop + _START_LONGEST)) is not None and found.start() < stop:
        check = _GLUED_CHECKS.get(found.group(), _aws_name_at)
        if check is not None and check(text, found.start()):
            return found.start()
        at = found.start() + 1
    return None


_OPENAI_WORD = _C(r"(?:proj|svcacct|admin)-")


def _openai_check(body: str, glued: bool) -> bool:
    """The random part mixes letters and digits (cuts ``sk-learn-…`` prose); glued to a word without a
    distinctive prefix (``task-…``), it must also be long and mix cases."""
    word = _OPENAI_WORD.match(body)
    core = body[word.end() :] if word else body
    if not _random(core):
        return False
    if glued and word is None:
        return len(core) >= 32 and _cases(core)
    return True


def _mixed_check(body: str, glued: bool) -> bool:
    return _random(body)


def _cases_check(body: str, glued: bool) -> bool:
    return _cases(body)


_RUN_KEY = _C(r"[A-Za-z0-9_-]")
_RUN_ALNUM = _C(r"[A-Za-z0-9]")
_RUN_UPPER = _C(r"[A-Z0-9]")
_RUN_SLACK = _C(r"[A-Za-z0-9-]")
_RUN_WORD = _C(r"[A-Za-z0-9_]")

_GOOGLE_TOKEN = _Token(GOOGLE, _C("AIza"), _RUN_KEY, 35, 35)
_ANTHROPIC_TOKEN = _Token(ANTHROPIC, _C(r"sk-ant-[a-z]{2,10}[0-9]{2}-"), _RUN_KEY, 20, 255)
_OPENAI_TOKEN = _Token(OPENAI, _C("sk-"), _RUN_KEY, 20, 263, _openai_check, ("[0-9]", "[A-Za-z]"))
_AWS_ID_TOKEN = _Token(AWS_ID, _C(r"A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA"), _RUN_UPPER, 16, 16)
_GITHUB_TOKEN = _Token(GITHUB, _C(r"gh[pousr]_"), _RUN_ALNUM, 36, 255)
_GITHUB_PAT = _Token(GITHUB, _C("github_pat_"), _RUN_WORD, 50, 255)
_SLACK_TOKEN = _Token(
    SLACK, _C(r"xox[abposr]-|xapp-[0-9]-"), _RUN_SLACK, 10, 250, _mixed_check, ("[0-9]", "[A-Za-z]")
)
_STRIPE_TOKEN = _Token(STRIPE, _C(r"[rs]k_(?:live|test)_"), _RUN_ALNUM, 24, 247)
_GITLAB_TOKEN = _Token(GITLAB, _C("glpat-"), _RUN_KEY, 20, 64)
_HF_TOKEN = _Token(HUGGINGFACE, _C("hf_"), _RUN_ALNUM, 34, 40, _cases_check, ("[A-Z]", "[a-z]"))
_NPM_TOKEN = _Token(NPM, _C("npm_"), _RUN_ALNUM, 36, 36, _mixed_check, ("[0-9]", "[A-Za-z]"))
_OAUTH_TOKEN = _Token(GOOGLE_OAUTH, _C("GOCSPX-"), _RUN_KEY, 28, 28)

_SLACK_HOOK = _C(
    r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/(?P<last>[A-Za-z0-9]{20,32})"
)
_AWS_PAIR = _C(r"(?:[ \t,;|\"'=:]|\r?\n|\\n){1,8}(?P<secret>[A-Za-z0-9/+]{40})")
_AWS_NAMED = _C(AWS_SECRET.pattern.pattern.removesuffix(_LA))
_DATA_URI = _C(
    r"data:[A-Za-z0-9.+-]{1,64}/[A-Za-z0-9.+-]{1,64}(?:;[A-Za-z0-9.+=-]{1,40}){0,3};base64,"
    r"(?P<payload>[A-Za-z0-9+/=]*)"
)


_DIGIT_OR_SIGN = _C(r"[0-9+/]")


def _aws_value(value: str) -> bool:
    """A 40-character AWS secret mixes cases and holds a digit, ``/`` or ``+`` (not a 40-letter word)."""
    return _cases(value) and _DIGIT_OR_SIGN.search(value) is not None


def _aws_value_end(text: str, found: re.Match[str] | None) -> int | None:
    """Where the 40-character value of ``found`` ends, when it is an AWS secret key: not glued to what
    follows, unless another secret starts right there."""
    if found is None or not _aws_value(found.group("secret")):
        return None
    end = found.end()
    return _glued_key(text, end, end, fixed=True) if _glued_after(text, end) else end


def _aws_id(text: str, start: int, resolve: bool, ends: _Ends) -> _Found | None:
    """An access key id, and the secret key that follows it in a credentials file or CSV row."""
    found = _AWS_ID_TOKEN.match(text, start)
    if found is None or found.end is None:
        return found
    pair = _AWS_PAIR.match(text, found.end)
    end = _aws_value_end(text, pair)
    if pair is None or end is None:
        return found
    return _Found((*found.spans, (AWS_SECRET, pair.start("secret"), end)), end)


def _aws_secret(text: str, start: int, resolve: bool, ends: _Ends) -> _Found | None:
    found = _AWS_NAMED.match(text, start)
    end = _aws_value_end(text, found)
    if found is None or end is None:
        return None
    return _Found(((AWS_SECRET, found.start("secret"), end),), end)


def _slack(text: str, start: int, resolve: bool, ends: _Ends) -> _Found | None:
    if text.startswith("https://", start):
        hook = _SLACK_HOOK.match(text, start)
        if hook is None:
            return None
        end: int | None = hook.end()
        if _glued_after(text, hook.end()):
            last = hook.start("last")
            end = _glued_key(text, last + 20, hook.end(), fixed=False)
        return None if end is None else _Found(((SLACK, start, end),), end)
    return _SLACK_TOKEN.match(text, start)


def _data_uri(text: str, start: int, resolve: bool, ends: _Ends) -> _Found | None:
    if _glued_before(text, start) or (start and text[start - 1] == "_"):
        return None
    found = _DATA_URI.match(text, start)
    return None if found is None else _Found((), found.end(), data=True, payload=found.start("payload"))


# PEM: the BEGIN line, then lines of base64, of "Name: value" headers, or of another armor (a stray
# "-----END PUBLIC KEY-----"), split by real or JSON-escaped newlines; then the block's own END line.
_NL = r"(?:\r?\n|\\r\\n|\\n)"
_DASHES = "-\u2013\u2014\u2015"
_PEM_BEGIN = _C(rf"[{_DASHES}]{{0,8}}[ \t]?(?i:begin)[ \t]+{_PEM_TYPE}[ \t]?[{_DASHES}]{{0,8}}")
_NOT_PRIVATE = r"(?!(?:[A-Za-z0-9]{1,16}[ \t]+){0,3}(?i:private)[ \t])"
_ARMOR = rf"-{{2,8}}+[ \t]?+(?i:begin|end)[ \t]++{_NOT_PRIVATE}[A-Za-z0-9 \t]{{1,48}}+-{{0,8}}+"
_PEM_LINE = (
    rf"[ \t]*+(?:[A-Z][A-Za-z0-9-]*+: [^\r\n\\]*+|{_ARMOR}|(?:[A-Za-z0-9+/=]++[ \t]++)*+[A-Za-z0-9+/=]*+)"
)
_PEM_BODY = _C(rf"{_PEM_LINE}(?:{_NL}{_PEM_LINE}(?=[\r\n\\]|\Z))*")
_KEY_END_RE = rf"--(?:-{{0,6}})[ \t]?(?i:end)[ \t]+{_PEM_TYPE}[ \t]?-{{0,8}}+"
_PEM_END = _C(rf"{_NL}?[ \t]{{0,8}}{_KEY_END_RE}")
_KEY_END = _C(_KEY_END_RE)
_LINE_END = _C(r"[\r\n\"]|\\[nr\"]")
_B64_RUN_32 = _C(r"[A-Za-z0-9+/]{32}")
_PEM_SLACK = 64
_PEM_REACH = 8192  # how far past where its base64 stops a block's own END line still ends it


def _pem_type(match: re.Match[str]) -> str:
    return " ".join(match.group("type").upper().split())


class _Ends:
    """The private-key END lines of one text, found once, left to right, as the scan needs them."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._found: list[re.Match[str]] = []
        self._starts: list[int] = []
        self._scanned = 0

    def matching(self, start: int, kind: str, reach: int) -> re.Match[str] | None:
        """The first END line of type ``kind`` that starts in ``[start, reach]``."""
        while self._scanned <= reach and self._scanned < len(self._text):
            found = _KEY_END.search(self._text, self._scanned)
            if found is None:
                self._scanned = len(self._text)
                break
            self._found.append(found)
            self._starts.append(found.start())
            self._scanned = found.end()
        for found in self._found[bisect_right(self._starts, start - 1) :]:
            if found.start() > reach:
                break
            if _pem_type(found) == kind:
                return found
        return None


def _private_key(text: str, start: int, resolve: bool, ends: _Ends) -> _Found | None:
    """A private-key block, judged on its BEGIN line and body before its extent is looked for."""
    header = _PEM_BEGIN.match(text, start)
    if header is None:
        return None
    body = _PEM_BODY.match(text, header.end())
    body_end = body.end() if body else header.end()
    if not resolve and body_end + _PEM_SLACK > len(text):
        return _HOLD_OPEN
    if _B64_RUN_32.search(text, header.end(), body_end) is None:
        return None
    kind = _pem_type(header)
    end = _PEM_END.match(text, body_end)
    if end is not None and _pem_type(end) == kind:
        return _Found(((PRIVATE_KEY, start, end.end()),), end.end())
    far = ends.matching(body_end, kind, body_end + _PEM_REACH)
    if far is not None:
        return _Found(((PRIVATE_KEY, start, far.end()),), far.end())
    if not resolve and len(text) < body_end + _PEM_REACH:
        return _HOLD_OPEN
    eol = _LINE_END.search(text, body_end)
    stop = eol.start() if eol else len(text)
    block_end = header.end() + len(text[header.end() : stop].rstrip())
    return _Found(((PRIVATE_KEY, start, block_end),), block_end)


_Matcher = Callable[[str, int, bool, _Ends], _Found | None]


def _token(*tokens: _Token) -> _Matcher:
    def match(text: str, start: int, resolve: bool, ends: _Ends) -> _Found | None:
        for token in tokens:
            found = token.match(text, start)
            if found is not None:
                return found
        return None

    return match


def _sk(text: str, start: int, resolve: bool, ends: _Ends) -> _Found | None:
    if text.startswith("sk-ant-", start) and (found := _ANTHROPIC_TOKEN.match(text, start)) is not None:
        return found
    return _OPENAI_TOKEN.match(text, start)


# Where a match may start. Every alternative begins with a literal character, which lets the regex
# engine skip to candidate characters; the matched literal says which matchers to try.
_STARTS: dict[str, _Matcher] = {
    "AIza": _token(_GOOGLE_TOKEN),
    "sk-": _sk,
    **dict.fromkeys(("AKIA", "ASIA", "ABIA", "ACCA", "A3T"), _aws_id),
    **dict.fromkeys(("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _token(_GITHUB_TOKEN)),
    "github_pat_": _token(_GITHUB_PAT),
    **dict.fromkeys(("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xapp-"), _slack),
    "https://hooks.slack.com/": _slack,
    **dict.fromkeys(("sk_live_", "sk_test_", "rk_live_", "rk_test_"), _token(_STRIPE_TOKEN)),
    "glpat-": _token(_GITLAB_TOKEN),
    "hf_": _token(_HF_TOKEN),
    "npm_": _token(_NPM_TOKEN),
    "GOCSPX-": _token(_OAUTH_TOKEN),
    "--": _private_key,
    **{f"{word}{blank}": _private_key for word in ("begin", "Begin", "BEGIN") for blank in " \t"},
    "data:": _data_uri,
}


def _starts(*tokens: _Token) -> Callable[[str, int], bool]:
    return lambda text, at: any(token.starts_key(text, at) for token in tokens)


def _aws_name_at(text: str, at: int) -> bool:
    found = _AWS_NAMED.match(text, at)  # (not _aws_value_end: no recursion along glued secrets)
    return found is not None and _aws_value(found.group("secret"))


# What may start glued after a token and end it (None: what cannot follow a letter or digit).
_GLUED_CHECKS: dict[str, Callable[[str, int], bool] | None] = {
    "AIza": _starts(_GOOGLE_TOKEN),
    "sk-": _starts(_ANTHROPIC_TOKEN, _OPENAI_TOKEN),
    **dict.fromkeys(("AKIA", "ASIA", "ABIA", "ACCA", "A3T"), _starts(_AWS_ID_TOKEN)),
    **dict.fromkeys(("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _starts(_GITHUB_TOKEN)),
    "github_pat_": _starts(_GITHUB_PAT),
    **dict.fromkeys(("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xapp-"), _starts(_SLACK_TOKEN)),
    "https://hooks.slack.com/": lambda text, at: _SLACK_HOOK.match(text, at) is not None,
    **dict.fromkeys(("sk_live_", "sk_test_", "rk_live_", "rk_test_"), _starts(_STRIPE_TOKEN)),
    "glpat-": _starts(_GITLAB_TOKEN),
    "GOCSPX-": _starts(_OAUTH_TOKEN),
    "hf_": _starts(_HF_TOKEN),
    "npm_": _starts(_NPM_TOKEN),
    "data:": None,
    "--": lambda text, at: _PEM_BEGIN.match(text, at) is not None,
    **{
        f"{word}{blank}": lambda text, at: _PEM_BEGIN.match(text, at) is not None
        for word in ("begin", "Begin", "BEGIN")
        for blank in " \t"
    },
}
_AWS_NAMES = (
    "secret[_ .-]?(?:key|Key|access|Access)",
    "Secret[_ .-]?(?:key|Key|access|Access)",
    "SECRET[_ .-]?(?:KEY|ACCESS|key|Key)",
)


def _start_pattern() -> re.Pattern[str]:
    """Every start, grouped by first character: each alternative then begins with a literal, which lets
    the regex engine skip to candidate characters, and a candidate tries one group, not every start."""
    groups: dict[str, list[str]] = {}
    for literal in sorted(_STARTS, key=len, reverse=True):
        groups.setdefault(literal[0], []).append(re.escape(literal[1:]))
    for name in _AWS_NAMES:
        groups.setdefault(name[0], []).append(name[1:])
    return _C("|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in groups.items()))


_START = _start_pattern()
_START_LONGEST = 40


def _matcher(hit: str) -> _Matcher:
    return _STARTS.get(hit) or _aws_secret


def _match_at(text: str, hit: re.Match[str], resolve: bool, ends: _Ends) -> _Found | None:
    try:
        return _matcher(hit.group())(text, hit.start(), resolve, ends)
    except RecursionError:  # pragma: no cover - the patterns do not recurse; kept failing closed
        return _Found(((PRIVATE_KEY, hit.start(), len(text)),), len(text))


# --- scanning and streaming ------------------------------------------------------------------------

# Where a stream may still change: a token match is at most _HOLD long and holds no character outside
# _TOKEN_CHARS (a split one: two such runs around one separator, the first holding a prefix); matches
# with blanks (an AWS secret beside its name or id, a PEM header) start at an _ANCHOR and are at most
# _SPACEY long.
_B64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_TOKEN_CHARS = _B64_CHARS + "_.:;,-"
_HOLD = 288
_SPACEY = 128
_MARKER_HOLD = 16  # a data URI streams on, less this much: a base64 marker may be arriving
_CAP = 64 * 1024
_ANCHOR = _C(r"(?i:secret|begin)|--|AKIA|ASIA|ABIA|ACCA|A3T")
_CONTEXT = 8
_END_HINT = _C(r"(?i:end)")
_KEY_END_TAIL = 96


def _settled(text: str, pos: int) -> int:
    """View index before which no match can depend on text not received yet."""
    n = len(text)
    low = max(pos, n - _HOLD)
    cut = low + len(text[low:].rstrip(_TOKEN_CHARS))
    held = cut
    if cut > low and text[cut - 1] in " \t\n\\":  # maybe the first half of a key split in two
        sep = cut - 2 if text[cut - 1] == "\n" and cut - 2 >= low and text[cut - 2] == "\r" else cut - 1
        first = low + len(text[low:sep].rstrip(_TOKEN_CHARS))
        prefix = _START.search(text, first, sep)
        if prefix is not None and sep > first:
            held = prefix.start()
    # A match with blanks starts at an anchor at most _SPACEY before the tokens still held (it may end
    # in them: a value glued to another secret), and so does the token glued before such a match.
    reach = max(pos, cut - _SPACEY)
    anchor = _ANCHOR.search(text, reach)
    if anchor is None or anchor.start() >= held:
        return held
    before = max(pos, anchor.start() - _HOLD)
    glued = before + len(text[before : anchor.start()].rstrip(_TOKEN_CHARS))
    return max(pos, min(held, glued))


def _stable(raw: str, pos: int) -> int:
    """Raw index before which every escape is complete (a stream holds the rest back)."""
    tail = max(pos, len(raw) - _OPEN_ESCAPE_REACH)
    if not any(c in raw[tail:] for c in "%\\&"):
        return len(raw)
    open_escape = _OPEN_ESCAPE.search(raw, tail)
    return open_escape.start() if open_escape else len(raw)


def _render(
    raw: str, view: _View, pos: int, spans: list[tuple[SecretKind, int, int]], settled: int, stable: int
) -> tuple[str, int]:
    """``raw[pos:]`` up to the view index ``settled``, each masked span replaced by its label."""
    out: list[str] = []
    at = pos
    for kind, start, end in spans:
        raw_start, raw_end = max(at, view.raw_start(start)), view.raw_end(end)
        out.extend((raw[at:raw_start], kind.label))
        at = max(at, raw_end)
    stop = stable if settled >= len(view.text) else max(at, view.raw_start(settled))
    out.append(raw[at:stop])
    return "".join(out), stop


def _scan(raw: str, pos: int, *, final: bool, in_data: bool = False) -> tuple[str, int, bool, Counter[str]]:
    """Mask ``raw[pos:]`` (``raw[:pos]`` is look-behind context), leftmost match first. Returns the
    masked text up to the settled raw index, that index, whether the text ends inside a data URI, and
    the counts."""
    stable = len(raw) if final else _stable(raw, pos)
    view = _view(raw if stable == len(raw) else raw[:stable])
    text, counts = view.text, Counter[str]()
    n, spans = len(text), list[tuple[SecretKind, int, int]]()
    at = view.index(pos)
    if in_data:  # the data URI of the previous call goes on
        stop = n - len(text[at:].lstrip(_B64_CHARS))
        if stop == n and not final:
            out, end = _render(raw, view, pos, spans, max(at, n - _MARKER_HOLD), stable)
            return out, end, True, counts
        at = stop
    settled = n if final else _settled(text, at)
    ends = _Ends(text)
    search_from = at
    while (hit := _START.search(text, search_from)) is not None and hit.start() < settled:
        found = _match_at(text, hit, final, ends)
        if found is None:
            search_from = hit.start() + 1
            continue
        if found.end is None:  # a match still open (a PEM block): hold from its start
            settled = hit.start()
            break
        if found.data and found.end == n and not final:  # a data URI streams on, less its tail
            streaming = n - _MARKER_HOLD > found.payload
            hold = n - _MARKER_HOLD if streaming else hit.start()
            out, end = _render(raw, view, pos, spans, hold, stable)
            return out, end, streaming, _count(counts, spans)
        spans.extend(found.spans)
        search_from = found.end
        settled = max(settled, found.end)
    out, end = _render(raw, view, pos, spans, settled, stable)
    return out, end, False, _count(counts, spans)


def _count(counts: Counter[str], spans: list[tuple[SecretKind, int, int]]) -> Counter[str]:
    counts.update(kind.name for kind, _, _ in spans)
    return counts


def mask_secrets(text: str) -> MaskResult:
    """Mask every secret of ``SECRET_KINDS`` in ``text``."""
    masked, _, _, counts = _scan(text, 0, final=True)
    return MaskResult(masked, dict(counts))


_SUSPECT_ESCAPE = _C(
    r"%(?:2[BbDdFf]|3[0-9Dd]|[4-7][0-9A-Fa-f]|[89A-Fa-f][0-9A-Fa-f])|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|&#"
)


def _suspect(window: str) -> bool:
    if _START.search(window) or any(marker in window for marker, _ in _B64_MARKERS):
        return True
    if not window.isascii() and _odd_spans(window):  # (the joiners inside emoji do not count)
        return True
    return ("%" in window or "\\" in window or "&#" in window) and _SUSPECT_ESCAPE.search(window) is not None


def may_hold_secret(text: str) -> bool:
    """Whether a secret could start anywhere in ``text``: a cheap over-approximation, for failing closed
    when masking cannot run (any match start, escape or character the view rewrites counts). Searched
    in windows, so that no single regex call runs long."""
    n, window = len(text), _CAP
    return any(_suspect(text[at : min(n, at + window + _START_LONGEST)]) for at in range(0, n, window))


class StreamMasker:
    """Masks a streamed response: ``"".join(feed(c) for c in chunks) + flush()`` equals
    ``mask_secrets(text).text`` for any split of ``text``, and nothing that may still turn out to be a
    secret is emitted early.

    One exception, which fails closed: a private-key block still open when ``_CAP`` characters of it
    are held is masked there (its label goes out at once), and the stream then swallows everything up
    to the next private-key END line, or to the end of the stream. ``mask_secrets``, which sees the
    whole text, ends a block without an END line where its base64 stops instead: only text after such
    a block can differ."""

    def __init__(self) -> None:
        self._context = ""
        self._held = ""
        self._in_data = False
        self._in_key = False  # swallowing a private-key block masked past the cap
        self._wait_until = 0  # while a long PEM block is held open, rescan only when it grew or may end
        self._counts: Counter[str] = Counter()

    @property
    def counts(self) -> Mapping[str, int]:
        """Per kind name, how many secrets were masked so far."""
        return dict(self._counts)

    def feed(self, chunk: str) -> str:
        """Take the next chunk; return the text now safe to emit."""
        self._held += chunk
        if self._in_key:
            return self._swallow(final=False)
        if len(self._held) < self._wait_until and _END_HINT.search(chunk) is None:
            return ""
        return self._run(final=False)

    def flush(self) -> str:
        """End of stream: return the rest, masked."""
        out = self._swallow(final=True) if self._in_key else self._run(final=True)
        self._context = ""
        return out

    def _run(self, *, final: bool) -> str:
        text = self._context + self._held
        out, end, self._in_data, counts = _scan(text, len(self._context), final=final, in_data=self._in_data)
        self._counts.update(counts)
        if len(text) - end > _CAP:  # only an open private-key block, from its BEGIN line, holds this much
            self._counts[PRIVATE_KEY.name] += 1
            self._in_key, self._context, self._held = True, "", text[end:]
            return out + PRIVATE_KEY.label + self._swallow(final=final)
        self._context, self._held = text[max(0, end - _CONTEXT) : end], text[end:]
        held = len(self._held)
        grown = min(_CAP + 1, held + max(_PEM_SLACK, held // 4))  # rescans grow geometrically, to the cap
        self._wait_until = grown if held > _HOLD + _SPACEY else 0
        return out

    def _swallow(self, *, final: bool) -> str:
        """Drop held text up to the END line of the private-key block being swallowed; mask what follows."""
        view = _view(self._held)
        end = _KEY_END.search(view.text)
        if end is None or (end.end() == len(view.text) and not final):  # more dashes may follow
            self._held = "" if final else self._held[-_KEY_END_TAIL:]
            return ""
        stop = view.raw_end(end.end())
        text, self._in_key, self._wait_until = self._held, False, 0
        self._context, self._held = text[max(0, stop - _CONTEXT) : stop], text[stop:]
        return self._run(final=final)
