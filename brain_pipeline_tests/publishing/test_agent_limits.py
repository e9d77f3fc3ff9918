"""Counting the store as V8 does, and the verdicts around the agent's limit."""

from __future__ import annotations

import pytest

from brain_pipeline.corpus.agent_limits import (
    NODE_MAX_STRING_UNITS,
    size_verdict,
    utf16_units_of_utf8,
)

SAMPLES = ["", "plain ascii", "café ŝ", "日本語のテキスト", "emoji 😀 and 𝄞 clef", "\u2028\ufeff"]


@pytest.mark.parametrize("text", SAMPLES)
def test_units_equal_the_utf16_length(text: str) -> None:
    expected = len(text.encode("utf-16-le")) // 2
    assert utf16_units_of_utf8(text.encode("utf-8")) == expected


def test_blocks_split_anywhere_add_up() -> None:
    """The assembly counts the store block by block as it streams it."""
    data = "".join(SAMPLES).encode("utf-8") * 50
    whole = utf16_units_of_utf8(data)
    assert whole == len(data.decode("utf-8").encode("utf-16-le")) // 2
    for cut in range(0, len(data), 7):  # splits inside multi-byte sequences too
        assert utf16_units_of_utf8(data[:cut]) + utf16_units_of_utf8(data[cut:]) == whole


def test_verdicts_around_the_limit() -> None:
    assert size_verdict(100).level == "ok"
    assert size_verdict(NODE_MAX_STRING_UNITS * 4 // 5 + 1).level == "warn"
    assert size_verdict(NODE_MAX_STRING_UNITS * 4 // 5 - 1).level == "ok"
    assert size_verdict(NODE_MAX_STRING_UNITS).level == "warn"
    over = size_verdict(NODE_MAX_STRING_UNITS + 1)
    assert over.level == "block"
    assert "536,870,888" in over.message
    assert size_verdict(90, limit=100).level == "warn"
