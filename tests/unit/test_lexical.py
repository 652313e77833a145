"""``echo.domain.lexical``: the terms of a text, their sparse vectors, IDF and reciprocal rank fusion."""

from __future__ import annotations

import hashlib
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain import lexical


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Caroline's LGBTQ group", ["caroline", "lgbtq", "group"]),
        ("at 1:56 pm on 8 May, 2023", ["at", "1:56", "1", "56", "pm", "on", "8", "may", "2023"]),
        ("on 2023-05-08", ["on", "2023-05-08", "2023", "05", "08"]),
        ("costs 3.5 or 1,000", ["costs", "3.5", "3", "5", "or", "1,000", "1", "000"]),
        ("Mélanie ÉCOLE Straße", ["mélanie", "école", "strasse"]),
        ("ｆｕｌｌ width ４２", ["full", "width", "42"]),
        ("我喜欢猫 and 東京", ["我", "喜", "欢", "猫", "and", "東", "京"]),
        ("I saw a mp3_file", ["saw", "mp3", "file"]),
        ("", []),
        ("?! -- ...", []),
    ],
)
def test_tokens_keep_names_numbers_and_dates(text: str, expected: list[str]) -> None:
    assert lexical.tokens(text) == expected


def test_term_indices_are_stable_32_bit_hashes() -> None:
    assert lexical.term_index("caroline") == lexical.term_index("caroline")
    assert lexical.term_index("caroline") != lexical.term_index("melanie")
    assert 0 <= lexical.term_index("\ud800 lone") < 2**32  # a lone surrogate hashes too
    expected = int.from_bytes(hashlib.blake2b(b"zanzibar", digest_size=4).digest(), "big")
    assert lexical.term_index("zanzibar") == expected  # no seed, no vocabulary: every process agrees


def test_documents_weigh_saturated_frequencies_and_queries_distinct_terms() -> None:
    doc = lexical.document_terms("Dog dog DOG cat")
    weights = doc.as_mapping()
    assert weights[lexical.term_index("dog")] == pytest.approx(3 * 2.2 / (3 + 1.2))
    assert weights[lexical.term_index("cat")] == pytest.approx(1.0)
    assert list(doc.indices) == sorted(doc.indices)
    query = lexical.query_terms("dog Dog cat")
    assert query.values == (1.0, 1.0)
    assert not lexical.query_terms("? a !")
    assert not lexical.document_terms("")


def test_idf_is_qdrants_formula() -> None:
    assert lexical.idf(1, 10) == pytest.approx(math.log((10 - 1 + 0.5) / 1.5 + 1))
    assert lexical.idf(10, 10) < lexical.idf(1, 10)


def test_score_sums_shared_terms_and_is_none_without_any() -> None:
    query = lexical.query_terms("zanzibar 1987")
    doc = lexical.document_terms("zanzibar zanzibar trip")
    zanzibar = lexical.term_index("zanzibar")
    assert lexical.score(query, doc, {zanzibar: 2.0}) == pytest.approx(2.0 * 2 * 2.2 / 3.2)
    assert lexical.score(query, lexical.document_terms("nothing shared"), {}) is None


def test_fuse_is_reciprocal_rank_fusion_with_deterministic_ties() -> None:
    fused = lexical.fuse([["a", "b", "c"], ["c", "d"]])
    k = lexical.RRF_K
    assert [item for item, _ in fused] == ["c", "a", "b", "d"]
    assert [score for _, score in fused] == pytest.approx(
        [1 / (k + 3) + 1 / (k + 1), 1 / (k + 1), 1 / (k + 2), 1 / (k + 2)]
    )
    assert [i for i, _ in lexical.fuse([["y"], ["x"]])] == ["y", "x"]  # the dense list wins a tie
    assert [i for i, _ in lexical.fuse([["b", "a"], ["a", "b"]])] == ["b", "a"]


def test_select_keeps_the_best_lexical_match_below_the_floor() -> None:
    cosine = {"near": 0.9, "far": 0.1, "farther": 0.05}
    chosen = lexical.select([("near", 0.9)], [("farther", 1.0), ("far", 3.0)], cosine, limit=5, min_score=0.5)
    assert [(c.id, c.lexical) for c in chosen] == [("near", None), ("far", 3.0)]
    everything = lexical.select(
        [("near", 0.9), ("far", 0.1)], [("far", 3.0)], cosine, limit=1, min_score=None
    )
    assert [c.id for c in everything] == ["far"]
    assert lexical.candidate_depth(1) == 30
    assert lexical.candidate_depth(20) == 60


def test_select_orders_equal_lexical_scores_by_their_cosine() -> None:
    for near_id, far_id in (("a", "z"), ("z", "a")):
        cosine = {near_id: 0.8, far_id: 0.3}
        chosen = lexical.select([], [(far_id, 2.0), (near_id, 2.0)], cosine, limit=2, min_score=None)
        assert [c.id for c in chosen] == [near_id, far_id]


@given(st.text(max_size=200))
def test_any_text_gives_a_valid_sparse_vector(text: str) -> None:
    doc = lexical.document_terms(text)
    assert list(doc.indices) == sorted(set(doc.indices))
    assert all(0 <= i < 2**32 for i in doc.indices)
    assert all(v >= 1.0 for v in doc.values)
    assert len(doc.indices) == len(doc.values)
