"""Text heuristics of the offline provider. Pure, deterministic, standard library only.

An extractive summary keeps the input's most informative sentences in their original order: each
sentence scores the sum, over its distinct content words, of term frequency in the whole text times
an inverse sentence frequency (a TF-IDF over sentences), divided by the square root of its length so
that long sentences do not win by size alone. Sentences are taken best first while they fit the word
budget. Sizes are counted in words, each CJK character counting as one (about a token each).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter

__all__ = ["importance", "keywords", "sentences", "size", "slug", "summarize"]

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")
_CJK_STOPS = ("。", "！", "？", "；")
_UNIT = re.compile(rf"{_CJK.pattern}|(?:(?!{_CJK.pattern})\S)+")  # what ``size`` counts as one word
_MIN_SCORED_WORDS = 6  # sentences shorter than this are scored as if this long: greetings do not win
_STOPWORD_TEXT = """
    a about above after again all also am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each few for from further had has
    have having he her here hers him his how i if in into is it its just like may me might more most
    must my no nor not now of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your yours yes ok
    okay please thanks thank hello hi hey user assistant system
    au aux avec ce ces cette dans de des du elle elles en est et été être il ils je la le les leur
    leurs lui ma mais me même mes moi mon ne nos notre nous on ou où par pas pour qu que qui sa se ses
    son sur ta te tes toi ton tu un une vos votre vous ça c'est j'ai d'un d'une l'on n'est qu'il aussi
    comme donc alors très plus tout tous toute toutes avoir fait faire peut sont était oui non merci
    bonjour salut
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_CUES = (
    "important", "critical", "critique", "crucial", "urgent", "essential", "essentiel", "never",
    "always", "jamais", "toujours", "remember", "souviens", "rappelle", "deadline", "échéance",
    "decided", "decision", "décidé", "décision", "prefer", "préfère", "allerg", "password",
    "mot de passe", "must", "doit", "require", "exige", "security", "sécurité", "production",
    "重要", "记住", "必须", "决定", "总是", "永远", "偏好", "喜欢",
)  # fmt: skip
_PERSONAL = (
    "my name", "je m'appelle", "i live", "j'habite", "i work", "je travaille", "my wife", "my husband",
    "ma femme", "mon mari", "my birthday", "mon anniversaire", "i am allergic", "je suis allergique",
)  # fmt: skip


def size(text: str) -> int:
    """Length in words, each CJK character counting as one word."""
    return len(_UNIT.findall(text))


def sentences(text: str) -> list[str]:
    """Non-empty sentences, line breaks and sentence punctuation (Latin or CJK) ending one."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def _content_words(text: str) -> list[str]:
    """Lower-cased words minus stop words, digits and words under 3 letters; CJK runs as bigrams."""
    out: list[str] = []
    for word in (w.lower() for w in _WORD.findall(text)):
        if _CJK.search(word):
            out.extend(_bigrams(word))
        elif word not in _STOPWORDS and not word.isdigit() and len(word) > 2:
            out.append(word)
    return out


def _bigrams(word: str) -> list[str]:
    """Unsegmented CJK text as overlapping character pairs (each pair a rough word)."""
    runs = re.findall(f"{_CJK.pattern}+", word)
    return [run[i : i + 2] for run in runs for i in range(max(len(run) - 1, 1))]


def _join(parts: list[str]) -> str:
    """Sentences joined by a space, or by nothing after CJK punctuation."""
    out = ""
    for part in parts:
        out += part if not out or out.endswith(_CJK_STOPS) else " " + part
    return out


def summarize(text: str, max_words: int) -> str:
    """The most informative sentences of ``text`` in their order, at most ``max_words`` words."""
    parts = sentences(text)
    if size(" ".join(parts)) <= max_words:
        return _join(parts)
    words = [_content_words(s) for s in parts]
    frequency = Counter(w for ws in words for w in ws)
    spread = Counter(w for ws in words for w in set(ws))
    n = len(parts)

    scores = [
        sum(frequency[w] * (1.0 + math.log(n / spread[w])) for w in set(ws))
        / math.sqrt(max(len(ws), _MIN_SCORED_WORDS))
        for ws in words
    ]
    ranked = sorted(range(n), key=lambda i: (-scores[i], i))
    chosen: list[int] = []
    used = 0
    for i in ranked:
        cost = size(parts[i])
        if used + cost <= max_words and (scores[i] > 0 or not chosen):
            chosen.append(i)
            used += cost
    if not chosen:  # even the best sentence is too long: cut it
        return _cut(parts[ranked[0]], max_words)
    return _join([parts[i] for i in sorted(chosen)])


def _cut(text: str, max_words: int) -> str:
    """The first ``max_words`` words (CJK characters) of ``text``, original spacing kept, then "…"."""
    units = list(_UNIT.finditer(text))
    if len(units) <= max_words:
        return text
    return text[: units[max_words - 1].end()] + "…" if max_words > 0 else ""


def keywords(text: str, k: int) -> list[str]:
    """Up to ``k`` most frequent content words, ties broken by first appearance.

    A CJK bigram seen once is mostly noise (half of two words), so it is left out.
    """
    words = _content_words(text)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    counts = Counter(words)
    kept = [w for w in counts if counts[w] > 1 or not _CJK.search(w)]
    return sorted(kept, key=lambda w: (-counts[w], first[w]))[:k]


def importance(text: str, low: int = 1, high: int = 5) -> int:
    """1–5 from cues: durable-fact and priority words raise it, a very short text lowers it."""
    lowered = text.lower()
    cues = sum(1 for cue in _CUES if cue in lowered)
    score = 2 + (cues >= 1) + (cues >= 3) + any(p in lowered for p in _PERSONAL)
    if size(text) < 30:
        score -= 1
    return max(low, min(high, score))


def slug(text: str, words: int = 3, max_chars: int = 40) -> str:
    """A short technical id: top ASCII-folded keywords joined by ``_`` plus 6 hex of the text's hash."""
    folded = []
    for word in keywords(text, 12):
        ascii_word = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode()
        ascii_word = re.sub(r"[^a-z0-9]+", "", ascii_word.lower())
        if ascii_word and ascii_word not in folded:
            folded.append(ascii_word)
    stem = "_".join(folded[:words])[:max_chars].rstrip("_") or "memory"
    return f"{stem}_{hashlib.sha256(text.encode()).hexdigest()[:6]}"
