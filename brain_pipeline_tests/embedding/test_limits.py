"""The limits table, the conservative token estimate and the too_long policy."""

from __future__ import annotations

from brain_pipeline.embedding.limits import (
    FALLBACK_LIMITS,
    estimate_tokens,
    limits_for,
    longest_fitting_head,
    prepare,
)
from brain_pipeline_tests.peers.fake_gemini import fake_token_count


def test_the_table_holds_the_documented_gemini_limit() -> None:
    assert limits_for("gemini-embedding-001").max_tokens == 2048
    assert limits_for("gemini-embedding-001").max_texts == 100
    assert limits_for("some-future-model") == FALLBACK_LIMITS
    assert limits_for("all-MiniLM-L6-v2-int8").self_truncating


def test_the_estimate_is_at_least_the_fakes_count_for_every_script() -> None:
    samples = [
        "An ordinary English sentence about virtual private clouds and subnets. " * 50,
        "| cell | value | 12345 |\n" * 200,
        "漢字のテキストは一文字ずつ数えます。" * 100,
        "Кириллица тоже считается осторожно. " * 80,
        "हिन्दी पाठ का अनुमान भी सावधानी से। " * 60,
        "😀🚀" * 300,
        "é" * 2000,
    ]
    for text in samples:
        assert estimate_tokens(text) >= fake_token_count(text) * 0.9, text[:20]


def test_non_latin_scripts_count_one_token_per_character_at_least() -> None:
    assert estimate_tokens("漢" * 1000) == 1000
    assert estimate_tokens("😀" * 10) == 20
    assert estimate_tokens("word " * 300) == 400  # 4 letters: 4/3 each, spaces free


def test_the_longest_head_that_fits() -> None:
    text = "漢" * 3000
    head = longest_fitting_head(text, 2048)
    assert head == "漢" * 2048
    assert longest_fitting_head("short text", 2048) == "short text"


def test_policy_truncate_or_skip() -> None:
    limits = limits_for("gemini-embedding-001")
    long = "x " * 20000
    truncated = prepare(long, limits, "truncate")
    assert truncated.truncated and truncated.text is not None
    assert long.startswith(truncated.text) and estimate_tokens(truncated.text) <= 2048
    assert truncated.estimated_tokens == estimate_tokens(long)
    skipped = prepare(long, limits, "skip")
    assert skipped.text is None and skipped.estimated_tokens == estimate_tokens(long)
    assert prepare("fits", limits, "skip").text == "fits"
    local = limits_for("all-MiniLM-L6-v2-int8")
    assert prepare(long, local, "skip").text == long  # the local model truncates itself
