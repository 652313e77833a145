"""The lexical side of hybrid retrieval: words as sparse vectors, and reciprocal rank fusion (pure).

Dense embeddings place "Caroline", "1:56 pm" or "2023-05-08" near any other name, time or date; a
lexical match keeps them apart. A text becomes its terms — NFKC, case-folded, Unicode words, numbers
and dates kept as tokens — and each term is hashed to a 32-bit sparse index (BLAKE2b, so every
process and every store agrees without a vocabulary). A document's value for a term is its
frequency, saturated as BM25's (k1 = 1.2, no length normalisation: a stored chunk or memory is short,
and the store multiplies by the term's IDF); a query's value is 1 per distinct term. The store's score
is then sum(idf(t) * saturated_tf(t, d)) over the shared terms, BM25 without ``b``.

The dense and lexical candidate lists are fused by reciprocal rank fusion (Cormack et al. 2009):
score(d) = sum over lists of 1 / (k + rank), rank from 1, k = 60.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from echo.domain import text as text_module

__all__ = [
    "RRF_K",
    "Fused",
    "SparseTerms",
    "candidate_depth",
    "document_terms",
    "fuse",
    "idf",
    "query_terms",
    "score",
    "select",
    "term_index",
    "tokens",
]

RRF_K = 60
_K1 = 1.2
# A number with its separators kept whole ("2023-05-08", "1:56", "3.5", "7/5/2023"), then its parts.
_NUMBER = r"\d+(?:[.,:/\-]\d+)+"
# Han, kana and Hangul syllables: each character is a term (these scripts put no spaces between words).
_IDEOGRAPH = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]"
_TOKEN = re.compile(rf"{_NUMBER}|{_IDEOGRAPH}|[^\W_]+")
_ONE_IDEOGRAPH = re.compile(_IDEOGRAPH)
_PARTS = re.compile(r"\d+")


@dataclass(frozen=True)
class SparseTerms:
    """A sparse vector: strictly increasing 32-bit ``indices`` and their ``values``."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __bool__(self) -> bool:
        return bool(self.indices)

    def as_mapping(self) -> dict[int, float]:
        return dict(zip(self.indices, self.values, strict=True))


def tokens(text: str) -> list[str]:
    """The terms of ``text`` in order: words of one letter are dropped (``s`` of ``Caroline's``), not
    digits nor ideographs; a composite number is a term and so is each of its digit runs."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found: list[str] = []
    for match in _TOKEN.finditer(folded):
        token = match.group()
        if token[0].isdigit() and not token.isdigit():
            parts = _PARTS.findall(token)
            if len(parts) > 1:
                found.append(token)
                found.extend(parts)
                continue
        if len(token) > 1 or token.isdigit() or _ONE_IDEOGRAPH.fullmatch(token):
            found.append(token)
    return found


@functools.lru_cache(maxsize=1 << 16)  # words recur: a query's terms are mostly ones seen before
def term_index(term: str) -> int:
    """The sparse index of a term: the first 4 bytes of its BLAKE2b digest, an unsigned 32-bit int."""
    digest = hashlib.blake2b(text_module.encodable(term).encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def _sparse(weights: Mapping[int, float]) -> SparseTerms:
    ordered = sorted(weights.items())
    return SparseTerms(tuple(i for i, _ in ordered), tuple(v for _, v in ordered))


def _by_index(terms: Iterable[str]) -> Counter[int]:
    return Counter(term_index(term) for term in terms)  # two terms hashing alike add up


def document_terms(text: str) -> SparseTerms:
    """What a stored text contributes: saturated term frequency per hashed term (empty: no terms)."""
    counts = _by_index(tokens(text))
    return _sparse({i: tf * (_K1 + 1) / (tf + _K1) for i, tf in counts.items()})


def query_terms(text: str) -> SparseTerms:
    """What a query asks: 1 per distinct hashed term (a word repeated in the question counts once)."""
    return _sparse(dict.fromkeys(_by_index(tokens(text)), 1.0))


def idf(document_frequency: int, documents: int) -> float:
    """BM25's IDF, as Qdrant's ``Modifier.IDF`` computes it: ln((N - n + 0.5) / (n + 0.5) + 1)."""
    return math.log((documents - document_frequency + 0.5) / (document_frequency + 0.5) + 1)


def score(query: SparseTerms, document: SparseTerms, weights: Mapping[int, float]) -> float | None:
    """The lexical score of a document: sum of query value * IDF weight * document value over the
    shared indices; None when they share none (such a document is not a lexical candidate)."""
    stored = document.as_mapping()
    shared = [(i, v) for i, v in zip(query.indices, query.values, strict=True) if i in stored]
    if not shared:
        return None
    return math.fsum(v * weights.get(i, 0.0) * stored[i] for i, v in shared)


def candidate_depth(limit: int) -> int:
    """How many candidates each side of a hybrid search ranks before fusion (every adapter alike)."""
    return max(3 * limit, 30)


def fuse(rankings: Sequence[Sequence[str]], *, k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ranked id lists, best first. Ties go to the better single rank, then
    to the earlier list (the dense one, by convention)."""
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for which, ranking in enumerate(rankings):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            best[item] = min(best.get(item, (rank, which)), (rank, which))
    return sorted(scores.items(), key=lambda pair: (-pair[1], best[pair[0]]))


def _ranked(scored: Sequence[tuple[str, float]]) -> list[str]:
    # Engines order equal scores their own way (insertion, segment, id); by id here, alike everywhere.
    return [item for item, _ in sorted(scored, key=lambda pair: (-pair[1], pair[0]))]


@dataclass(frozen=True)
class Fused:
    """One hit of a hybrid search: its id, its RRF score and its lexical score (None: not a match)."""

    id: str
    fused: float
    lexical: float | None


def select(
    dense: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    cosine: Mapping[str, float],
    *,
    limit: int,
    min_score: float | None,
) -> list[Fused]:
    """The hits of a hybrid search, best first: the ``dense`` candidates ((id, cosine), each at least
    ``min_score``) and the ``lexical`` ones ((id, score)) ranked by score, then by cosine, then by id,
    and fused; then every candidate whose ``cosine`` is below ``min_score`` dropped but the lexical
    side's best; then ``limit`` kept."""
    # Equal lexical scores go by their cosine (then id): the closer in meaning first.
    lexical_ranking = [
        item for item, _ in sorted(lexical, key=lambda pair: (-pair[1], -cosine.get(pair[0], 0.0), pair[0]))
    ]
    lexical_scores = dict(lexical)
    top = lexical_ranking[0] if lexical_ranking else None
    kept = [
        Fused(item, fused, lexical_scores.get(item))
        for item, fused in fuse([_ranked(dense), lexical_ranking])
        if min_score is None or cosine[item] >= min_score or item == top
    ]
    return kept[:limit]
