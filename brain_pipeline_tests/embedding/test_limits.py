"""The limits table, the byte bound, and the test peer's token count that stands in for
the service's tokenizer (what the builder trusts instead of any local guess)."""

from __future__ import annotations

import pytest

from brain_pipeline.embedding.limits import FALLBACK_LIMITS, certainly_fits, limits_for
from brain_pipeline_tests.peers.fake_gemini import MODEL_MAX_TOKENS, fake_token_count

SAMPLES = [
    "An ordinary English sentence about virtual private clouds and subnets. " * 50,
    "| cell | value | 12345 |\n" * 200,
    "| 2023-01-05 | 1,234.56 | 0.0042 | 98.7% |\n" * 60,
    "漢字のテキストは一文字ずつ数えます。" * 100,
    "Кириллица тоже считается осторожно. " * 80,
    "हिन्दी पाठ का अनुमान भी सावधानी से। " * 60,
    "😀🚀" * 300,
    "é" * 2000,
    "Role: Lone \ud800 title - Topic: surrogate \udfff kept",
]


def test_the_table_holds_the_documented_gemini_limit() -> None:
    assert limits_for("gemini-embedding-001").max_tokens == 2048
    assert limits_for("gemini-embedding-001").max_texts == 100
    assert limits_for("gemini-embedding-2").max_tokens == 8192
    assert limits_for("some-future-model") == FALLBACK_LIMITS


def test_the_peer_refuses_at_the_documented_limits() -> None:
    for model, limit in MODEL_MAX_TOKENS.items():
        assert limits_for(model).max_tokens == limit


@pytest.mark.parametrize("text", SAMPLES, ids=lambda t: t[:12])
def test_the_byte_bound_holds_for_the_peers_tokenizer(text: str) -> None:
    # a token covers at least one UTF-8 byte, so the bytes bound any subword count
    assert fake_token_count(text) <= len(text.encode("utf-8", "surrogatepass"))
    limits = limits_for("gemini-embedding-001")
    if certainly_fits(text, limits):
        assert fake_token_count(text) <= limits.max_tokens


def test_certainly_fits_is_the_byte_bound() -> None:
    limits = limits_for("gemini-embedding-001")
    assert certainly_fits("a" * 2048, limits)
    assert not certainly_fits("a" * 2049, limits)
    assert not certainly_fits("é" * 1025, limits)  # 2,050 bytes


def test_the_peer_counts_like_a_subword_tokenizer_not_per_character() -> None:
    assert fake_token_count("the") == 1 and fake_token_count("pipeline") == 2
    assert fake_token_count("Кириллица") == 3  # non-ASCII letters: 3 to a token
    assert fake_token_count("2048") == 2 and fake_token_count("3.14159") == 4
    assert fake_token_count("漢字") == 2  # one token per CJK character
    assert fake_token_count("a b") == 2  # a single space joins the next word
    assert fake_token_count("----") == 1 and fake_token_count("😀") == 2
    prose = SAMPLES[0]
    assert 3.5 < len(prose) / fake_token_count(prose) < 4.5  # about 4 characters a token
