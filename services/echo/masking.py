"""Masking of leaked secrets in model output (Open WebUI outlet and streamed pipe responses).

Domain module: pure, no I/O, standard library only. ``mask_secrets`` masks a whole text; ``StreamMasker``
masks a stream chunk by chunk into the same text, holding back only what may still be a secret (at most
64 K characters, see its docstring); ``may_hold_secret`` says cheaply whether a text could hold one.
Cost is linear in the text, about 1 µs a character at worst (text made only of match starts).
``data:<mime>;base64,`` URIs are kept verbatim. Labels are inert, so masking is idempotent: every token
pattern is neither glued after ``[A-Za-z0-9_+/-]`` (a JSON escape such as ``\\n`` is fine) nor followed
by ``[A-Za-z0-9_+/=-]``, which also keeps keys inside longer tokens or base64 unmasked.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["SECRET_KINDS", "MaskResult", "SecretKind", "StreamMasker", "mask_secrets", "may_hold_secret"]


@dataclass(frozen=True)
class SecretKind:
    """One kind of secret: ``name`` keys the counts, ``label`` replaces each match.

    ``is_secret`` is an optional post-check on the matched text (for a PEM block: its BEGIN line and
    body), to cut false positives. When the pattern defines a group named ``secret``, only that group
    is replaced (the context is kept).
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


_LB = r"(?:(?<![A-Za-z0-9_+/-])|(?<=\\[nrt]))"
_LA = r"(?![A-Za-z0-9_+/=-])"
_PEM_TYPE = r"(RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY( BLOCK)?-----"
_TOKEN_PREFIX = re.compile(r"[a-z]+-(?:(?:proj|svcacct|admin)-)?")
_B64_RUN_32 = re.compile(r"[A-Za-z0-9+/]{32}")
_AWS_NAMES = "aws_secret_access_key|AWS_SECRET_ACCESS_KEY|SecretAccessKey"
_B64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _mixed(text: str) -> bool:
    """The random part of an ``sk-``/``xox`` token mixes letters and digits (cuts ``sk-learn-…`` prose)."""
    if text.startswith("https://"):
        return True
    prefix = _TOKEN_PREFIX.match(text)
    body = text[prefix.end() :] if prefix else text
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body)


def _key_material(text: str) -> bool:
    """A PEM block holds base64 key material, not only prose around its BEGIN/END lines."""
    return _B64_RUN_32.search(text) is not None


_GOOGLE = rf"{_LB}AIza[0-9A-Za-z_-]{{35}}{_LA}"
_ANTHROPIC = rf"{_LB}sk-ant-(?:api03|admin01)-[A-Za-z0-9_-]{{20,255}}{_LA}"
_OPENAI = rf"{_LB}sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{{20,255}}{_LA}"
_AWS_ID = rf"{_LB}(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{{16}}{_LA}"
_AWS_SECRET = (  # only the value is masked; the key name stays
    rf"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))(?:{_AWS_NAMES})[\"']?[ \t]{{0,4}}[=:][ \t]{{0,4}}[\"']?"
    rf"(?P<secret>[A-Za-z0-9/+=]{{39}}[A-Za-z0-9/+]){_LA}"
)
_GITHUB = rf"{_LB}(?:gh[pousr]_[A-Za-z0-9]{{36,255}}|github_pat_[A-Za-z0-9_]{{50,255}}){_LA}"
_SLACK = (
    rf"{_LB}(?:xox[abposr]-[A-Za-z0-9-]{{10,250}}|xapp-[0-9]-[A-Za-z0-9-]{{10,250}}"
    rf"|https://hooks\.slack\.com/services/T[A-Z0-9]{{6,12}}/B[A-Z0-9]{{6,12}}/[A-Za-z0-9]{{20,32}}){_LA}"
)
_PEM_BEGIN = rf"{_LB}-----BEGIN {_PEM_TYPE}"  # the block's extent is resolved by _pem_span
_C = re.compile
SECRET_KINDS: tuple[SecretKind, ...] = (
    SecretKind("google_api_key", "[CLÉ API GOOGLE MASQUÉE PAR SÉCURITÉ]", _C(_GOOGLE)),
    SecretKind("anthropic_api_key", "[CLÉ API ANTHROPIC MASQUÉE PAR SÉCURITÉ]", _C(_ANTHROPIC)),
    SecretKind("openai_api_key", "[CLÉ API OPENAI MASQUÉE PAR SÉCURITÉ]", _C(_OPENAI), _mixed),
    SecretKind("aws_access_key_id", "[CLÉ D'ACCÈS AWS MASQUÉE PAR SÉCURITÉ]", _C(_AWS_ID)),
    SecretKind("aws_secret_access_key", "[SECRET AWS MASQUÉ PAR SÉCURITÉ]", _C(_AWS_SECRET)),
    SecretKind("github_token", "[JETON GITHUB MASQUÉ PAR SÉCURITÉ]", _C(_GITHUB)),
    SecretKind("slack_token", "[JETON SLACK MASQUÉ PAR SÉCURITÉ]", _C(_SLACK), _mixed),
    SecretKind("private_key", "[CLÉ PRIVÉE MASQUÉE PAR SÉCURITÉ]", _C(_PEM_BEGIN), _key_material),
)

_PRIVATE_KEY = SECRET_KINDS[-1]
_DATA_URI = re.compile(
    rf"{_LB}data:[A-Za-z0-9.+-]{{1,64}}/[A-Za-z0-9.+-]{{1,64}}(?:;[A-Za-z0-9.+=-]{{1,40}}){{0,3}};base64,"
    r"[A-Za-z0-9+/=]*"
)
_SCAN = ((None, _DATA_URI), *((kind, kind.pattern) for kind in SECRET_KINDS))
# Where a match may start: each pattern of _SCAN begins with one of these.
_START = re.compile(
    r"AIza|sk-|A(?:KIA|SIA|BIA|CCA)|gh[pousr]_|github_pat_|xox[abposr]-|xapp-|https://hooks\."
    rf"|-----BEGIN |data:|{_AWS_NAMES}"
)
_START_LONGEST = len("AWS_SECRET_ACCESS_KEY")
# The first characters of each pattern's matches (its starts above); a start is only tried against the
# patterns that can begin with its first character, which keeps crafted runs of starts cheap.
_FIRST_CHARS = {
    None: "d",
    "google_api_key": "A",
    "anthropic_api_key": "s",
    "openai_api_key": "s",
    "aws_access_key_id": "A",
    "aws_secret_access_key": "aAS",
    "github_token": "g",
    "slack_token": "xh",
    "private_key": "-",
}
_SCAN_BY_FIRST = {
    first: tuple(
        (kind, pattern) for kind, pattern in _SCAN if first in _FIRST_CHARS[kind.name if kind else None]
    )
    for first in "".join(_FIRST_CHARS.values())
}
# PEM body: the rest of the BEGIN line, then whole lines of base64 (or "Name: value" headers), split
# by real or JSON-escaped newlines.
_PEM_LINE = r"[ \t]*+(?:[A-Z][A-Za-z0-9-]*+: [^\r\n\\]*+|(?:[A-Za-z0-9+/=]++[ \t]++)*+[A-Za-z0-9+/=]*+)"
_PEM_BODY = re.compile(rf"{_PEM_LINE}(?:(?:\r?\n|\\r\\n|\\n){_PEM_LINE}(?=[\r\n\\]|\Z))*")
_PEM_END = re.compile(rf"(?:\r?\n|\\r\\n|\\n)?[ \t]{{0,8}}-----END {_PEM_TYPE}{_LA}")
_EOL = re.compile(r"[\r\n]")
# The END line of any private-key block, and how much text may hold one that is not complete yet.
_KEY_END = re.compile(rf"-----END {_PEM_TYPE}{_LA}")
_KEY_END_TAIL = 48
# Where a stream may still change: a token match is at most _HOLD long (sk-ant-admin01- + 255 chars,
# plus look-around) and holds no character outside _TOKEN_CHARS; matches with blanks (AWS secret in
# context, PEM header) start at an _ANCHOR and are at most _SPACEY long.
_HOLD = 272
_SPACEY = 80
_PEM_SLACK = 64
_CAP = 64 * 1024
_TOKEN_CHARS = _B64_CHARS + "_.:;,-"
_ANCHOR = re.compile(rf"-----BEGIN|{_AWS_NAMES}")
_CONTEXT = 8


def _pem_body_end(text: str, header: re.Match[str], resolve: bool) -> int | None:
    """Where the body of the PEM block opened by ``header`` stops; None while text to come could move it,
    unless ``resolve``."""
    body = _PEM_BODY.match(text, header.end())
    body_end = body.end() if body else header.end()
    if not resolve and body_end + _PEM_SLACK > len(text):
        return None
    return body_end


def _pem_block_end(text: str, header: re.Match[str], body_end: int, resolve: bool) -> int | None:
    """Where the block ends: its matching END line, else the end of the line where its base64 stops (less
    trailing blanks). None while text to come could change it, unless ``resolve``. Only asked for a block
    that holds key material, which the caller then consumes: the search for the line end never rescans."""
    end = _PEM_END.match(text, body_end)
    if end and end.group(1) == header.group(1) and end.group(2) == header.group(2):
        return end.end()
    eol = _EOL.search(text, body_end)
    if eol is None and not resolve:
        return None
    stop = eol.start() if eol else len(text)
    return header.end() + len(text[header.end() : stop].rstrip())


def _settled(text: str, pos: int) -> int:
    """Index before which no match can depend on text not received yet."""
    n = len(text)
    low = max(pos, n - _HOLD)
    after_break = low + len(text[low:].rstrip(_TOKEN_CHARS))
    anchor = _ANCHOR.search(text, max(low, n - _SPACEY))
    return max(low, min(after_break, anchor.start() if anchor else n))


def _match_at(
    text: str, start: int, resolve: bool
) -> tuple[SecretKind | None, re.Match[str], int | None] | None:
    """A data URI (kind None) or the first kind that matches at ``start`` and passes its check, with
    its end: None while text to come could change it."""
    for kind, pattern in _SCAN_BY_FIRST.get(text[start], ()):
        match = pattern.match(text, start)
        if match is None:
            continue
        if kind is None:
            return None, match, match.end()
        if kind is _PRIVATE_KEY:  # judged on its BEGIN line and body before its extent is looked for
            body_end = _pem_body_end(text, match, resolve)
            if body_end is None:
                return kind, match, None
            if kind.is_secret is not None and not kind.is_secret(text[start:body_end]):
                continue
            return kind, match, _pem_block_end(text, match, body_end, resolve)
        if kind.is_secret is None or kind.is_secret(match.group()):
            return kind, match, match.end()
    return None


def _scan(text: str, pos: int, *, final: bool, in_data: bool = False) -> tuple[str, int, bool, Counter[str]]:
    """Mask ``text[pos:]`` (``text[:pos]`` is look-behind context), leftmost match first, ties in
    ``_SCAN`` order. Returns the masked text up to the settled index, that index, whether the text
    ends inside a data URI, and the counts."""
    n, out, counts = len(text), [], Counter[str]()
    if in_data:  # the data URI of the previous call goes on
        stop = n - len(text[pos:].lstrip(_B64_CHARS))
        if stop == n and not final:
            return text[pos:], n, True, counts
        out.append(text[pos:stop])
        pos = stop
    settled = n if final else _settled(text, pos)
    at = pos
    while (hit := _START.search(text, at)) is not None and hit.start() < settled:
        found = _match_at(text, hit.start(), final)
        if found is None:
            at = hit.start() + 1
            continue
        kind, match, end = found
        if end is None:  # a PEM block still open: hold from its BEGIN line
            settled = hit.start()
            break
        if kind is None:  # a data URI: kept verbatim, nothing inside it is a secret
            if end == n and not final:
                out.append(text[pos:])
                return "".join(out), n, True, counts
            out.append(text[pos:end])
        else:
            masked_from = match.start("secret") if "secret" in match.re.groupindex else match.start()
            out.extend((text[pos:masked_from], kind.label))
            counts[kind.name] += 1
        pos = at = end
        settled = max(settled, end)
    out.append(text[pos:settled])
    return "".join(out), settled, False, counts


def mask_secrets(text: str) -> MaskResult:
    """Mask every secret of ``SECRET_KINDS`` in ``text``."""
    masked, _, _, counts = _scan(text, 0, final=True)
    return MaskResult(masked, dict(counts))


def may_hold_secret(text: str) -> bool:
    """Whether a secret could start anywhere in ``text``: a cheap over-approximation, for failing closed
    when masking cannot run. Searched in windows, so that no single regex call runs long."""
    n, window = len(text), _CAP
    return any(_START.search(text, at, min(n, at + window + _START_LONGEST)) for at in range(0, n, window))


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
        self._wait_until = 0  # while a long PEM block is held open, rescan only on a new line or 64 chars
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
        if len(self._held) < self._wait_until and _EOL.search(chunk) is None:
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
            self._counts[_PRIVATE_KEY.name] += 1
            self._in_key, self._context, self._held = True, "", text[end:]
            return out + _PRIVATE_KEY.label + self._swallow(final=final)
        self._context, self._held = text[max(0, end - _CONTEXT) : end], text[end:]
        self._wait_until = len(self._held) + _PEM_SLACK if len(self._held) > _HOLD else 0
        return out

    def _swallow(self, *, final: bool) -> str:
        """Drop held text up to the END line of the private-key block being swallowed; mask what follows."""
        end = _KEY_END.search(self._held)
        if end is None or (end.end() == len(self._held) and not final):  # its look-ahead needs one more char
            self._held = "" if final else self._held[-_KEY_END_TAIL:]
            return ""
        text, self._in_key, self._wait_until = self._held, False, 0
        self._context, self._held = text[max(0, end.end() - _CONTEXT) : end.end()], text[end.end() :]
        return self._run(final=final)
