"""The agent's string limit: UTF-16 units counted from UTF-8 bytes, and the verdict."""

from __future__ import annotations

import pytest

from brain_pipeline.corpus.agent_limits import size_verdict, string_limit, utf16_units_of_utf8

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


def test_the_agents_own_limit_is_read_when_a_store_is_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from brain_pipeline.corpus import agent_limits

    assert string_limit() == agent_limits.NODE_MAX_STRING_UNITS
    assert size_verdict(1_000).level == "ok"
    monkeypatch.setattr(agent_limits, "NODE_MAX_STRING_UNITS", 999)
    assert size_verdict(1_000).level == "block"  # not the value bound at import
    assert string_limit(5_000) == 5_000  # a configured limit wins
