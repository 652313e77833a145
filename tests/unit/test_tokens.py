"""Unit tests for echo.domain.tokens: the offline o200k_base counter, the estimator and the exact fallback."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echo.domain import tokens
from echo.domain.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TokenCount,
    TokenizerUnavailable,
    count_tokens,
    estimate_tokens,
    exact_tokens,
    messages_tokens,
)

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=200)  # lone surrogates included
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

# Held out from the calibration of the estimator's costs.
SAMPLES = {
    "english": (
        "Last weekend I finally took the kids to the aquarium downtown. They loved the jellyfish tunnel,"
        " although my youngest got a bit scared when the sharks swam right above us. Afterwards we grabbed"
        " pizza at that little place on Fifth Street, the one with the outdoor tables. I think we should go"
        " back in the spring when it's warmer; maybe your sister would like to join us this time?"
    ),
    "french": (
        "Ce matin, j'ai relu le compte rendu de la réunion : l'équipe propose de déplacer la base de données"
        " vers un nœud dédié, puis de surveiller les temps de réponse pendant deux semaines. Personnellement,"
        " je préférerais qu'on prévoie d'abord une procédure de retour arrière, car la dernière migration"
        " s'était mal passée. Qu'en penses-tu ? On pourrait en discuter jeudi après le déjeuner."
    ),
    "chinese": (
        "今天早上我重新看了一遍会议纪要：团队建议把数据库迁移到一台专用服务器上，然后连续两周观察响应时间。"
        "我个人更希望先准备好回滚方案，因为上一次迁移出了不少问题。你怎么看？"
        "我们可以星期四午饭以后再详细讨论一下，顺便确认一下预算和人员安排。"
    ),
    "code": '''def merge_settings(base: dict, override: dict) -> dict:
    """Merge two settings trees; values in override win."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_settings(merged[key], value)
        else:
            merged[key] = value
    return merged


class RetryPolicy:
    def __init__(self, attempts: int = 3, delay: float = 0.5) -> None:
        self.attempts = attempts
        self.delay = delay
''',
    "mixed": (
        "Le déploiement a échoué sur le pod echo-hooks : l'image n'existe pas. 我检查了一下镜像标签，"
        "发现配置文件里写的是旧版本。I fixed the chart values and pushed the change; please run"
        " `helm upgrade echo ./charts/echo -n echo` again and tell me if the pods come up 🙏"
    ),
}


def test_public_api_is_pinned() -> None:
    assert sorted(tokens.__all__) == [
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


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("hello world", 2),
        ("Bonjour, comment ça va ?", 6),
        ("你好，世界", 3),
        ("def f(x):\n    return x + 1\n", 11),
        ("<|endoftext|>", 7),  # a special token's text counts as text
        ("🚀 Déployé ✅", 6),
    ],
)
def test_exact_tokens_known_counts(text: str, count: int) -> None:
    assert exact_tokens(text) == count


def test_the_encoding_is_tiktokens_o200k_base() -> None:
    encoding = tokens._o200k_base()
    assert encoding.name == "o200k_base"
    assert encoding.n_vocab == 200019
    assert encoding._special_tokens == {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}


def test_the_encoding_is_built_as_tiktoken_defines_o200k_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """The public constructor gets tiktoken's own pattern, special tokens and expected file hash."""
    from tiktoken_ext import openai_public

    asked: list[tuple[str, str | None]] = []

    def record(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append((url, expected_hash))
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", record)
    definition = openai_public.o200k_base()
    assert asked == [(tokens._O200K_URL, tokens._O200K_SHA256)]
    assert definition["pat_str"] == tokens._O200K_PAT_STR
    assert definition["special_tokens"] == tokens._O200K_SPECIAL_TOKENS
    encoding = tokens._o200k_base()
    assert encoding._pat_str == definition["pat_str"]
    assert encoding.max_token_value == 200018


def test_the_encoding_loads_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no network allowed")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tokens, "_encoding", None)
    assert exact_tokens("hello world") == 2


def test_a_corrupt_or_missing_bpe_file_is_a_clear_error() -> None:
    with pytest.raises(TokenizerUnavailable, match=r"sha256 446a9538.* tiktoken expects 0000"):
        tokens._bundled_bpe(O200K_URL, expected_hash="0" * 64)
    with pytest.raises(TokenizerUnavailable, match=r"cannot read nope\.tiktoken\.gz"):
        tokens._bundled_bpe("https://example.invalid/nope.tiktoken", expected_hash="0" * 64)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_estimate_is_close_to_exact_per_class(kind: str) -> None:
    exact = exact_tokens(SAMPLES[kind])
    assert abs(estimate_tokens(SAMPLES[kind]) - exact) <= 0.15 * exact


def test_estimate_is_close_to_exact_over_all_classes() -> None:
    exact = sum(map(exact_tokens, SAMPLES.values()))
    assert abs(sum(map(estimate_tokens, SAMPLES.values())) - exact) <= 0.05 * exact


def test_estimator_tables() -> None:
    assert tokens._PROSE_TABLE.count(tokens._PUNCT) == sum(
        tokens._class_of(byte) == "punct" for byte in range(256)
    )
    assert max(tokens._PROSE_TABLE + tokens._CODE_TABLE) * tokens._CHUNK < 65521
    assert tokens._CODE_UNITS_PER_QUAD + 4 * tokens._CODE_UNITS["space"] >= 0


@given(st.binary(max_size=5000), st.sampled_from([tokens._PROSE_TABLE, tokens._CODE_TABLE]))
def test_units_sum_is_the_byte_sum(data: bytes, table: bytes) -> None:
    units = data.translate(table)
    assert tokens._units_sum(units) == sum(units)


@given(ANY_TEXT)
def test_never_raises_on_any_text(text: str) -> None:
    estimate = estimate_tokens(text)
    assert estimate >= 0
    assert (estimate == 0) == (text == "")
    assert exact_tokens(text) >= 0
    assert count_tokens(text, threshold=estimate).exact


def test_count_tokens_estimates_far_from_the_threshold() -> None:
    text = SAMPLES["english"]
    assert count_tokens(text) == TokenCount(estimate_tokens(text), exact=False)
    assert count_tokens(text, threshold=10_000) == TokenCount(estimate_tokens(text), exact=False)
    assert count_tokens(text, threshold=10) == TokenCount(estimate_tokens(text), exact=False)


def test_count_tokens_counts_exactly_near_the_threshold() -> None:
    text = SAMPLES["french"]
    estimate, exact = estimate_tokens(text), exact_tokens(text)
    assert count_tokens(text, threshold=round(estimate * 1.1)) == TokenCount(exact, exact=True)
    assert count_tokens(text, threshold=round(estimate / 1.1)) == TokenCount(exact, exact=True)
    assert not count_tokens(text, threshold=estimate + 1, margin=0.0).exact
    assert count_tokens(text, threshold=estimate * 2, margin=1.0).exact


def test_messages_tokens_counts_text_parts_and_an_overhead() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 5000}}
    messages = [
        {"role": "system", "content": SAMPLES["english"]},
        {"role": "user", "content": [{"type": "text", "text": SAMPLES["chinese"]}, image]},
        {"role": "assistant", "content": None},
    ]
    texts = [SAMPLES["english"], SAMPLES["chinese"], ""]
    overhead = 3 * MESSAGE_OVERHEAD_TOKENS
    estimate = overhead + sum(map(estimate_tokens, texts))
    assert messages_tokens(messages) == TokenCount(estimate, exact=False)
    assert messages_tokens(messages, threshold=estimate) == TokenCount(
        overhead + sum(map(exact_tokens, texts)), exact=True
    )
    assert messages_tokens([]) == TokenCount(0, exact=False)
