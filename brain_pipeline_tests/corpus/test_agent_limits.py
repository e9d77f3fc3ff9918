"""The agent's string limit: UTF-16 units counted from UTF-8 bytes, and the verdict."""

from __future__ import annotations

import pytest

from brain_pipeline.corpus.agent_limits import size_verdict, utf16_units_of_utf8

TEXTS = ["", "plain ascii", "é and ß", "€ 3 bytes", "😀 astral, two units", "a\x00b", "中文字"]


@pytest.mark.parametrize("text", TEXTS)
def test_units_equal_what_utf16_encoding_gives(text: str) -> None:
    assert utf16_units_of_utf8(text.encode("utf-8")) == len(text.encode("utf-16-le")) // 2


def test_the_verdict_levels_at_their_thresholds() -> None:
    assert size_verdict(79, limit=100).level == "ok"
    assert size_verdict(80, limit=100).level == "warn"
    assert size_verdict(100, limit=100).level == "warn"
    blocked = size_verdict(101, limit=100)
    assert blocked.level == "block" and "cannot load it" in blocked.message
    assert blocked.fraction == pytest.approx(1.01)
