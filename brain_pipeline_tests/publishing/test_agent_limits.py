"""Counting the store as V8 does, and the verdicts around the agent's limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain_pipeline.publishing.agent_limits import (
    NODE_MAX_STRING_UNITS,
    file_utf16_units,
    size_verdict,
    utf16_units_of_utf8,
)

SAMPLES = ["", "plain ascii", "café ŝ", "日本語のテキスト", "emoji 😀 and 𝄞 clef", "\u2028\ufeff"]


@pytest.mark.parametrize("text", SAMPLES)
def test_units_equal_the_utf16_length(text: str) -> None:
    expected = len(text.encode("utf-16-le")) // 2
    assert utf16_units_of_utf8(text.encode("utf-8")) == expected


def test_file_count_matches_the_in_memory_count(tmp_path: Path) -> None:
    text = "".join(SAMPLES) * 1000
    path = tmp_path / "store.json"
    path.write_bytes(text.encode("utf-8"))
    assert file_utf16_units(path) == len(text.encode("utf-16-le")) // 2
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert file_utf16_units(empty) == 0


def test_verdicts_around_the_limit() -> None:
    assert size_verdict(100).level == "ok"
    assert size_verdict(NODE_MAX_STRING_UNITS * 4 // 5 + 1).level == "warn"
    assert size_verdict(NODE_MAX_STRING_UNITS * 4 // 5 - 1).level == "ok"
    assert size_verdict(NODE_MAX_STRING_UNITS).level == "warn"
    over = size_verdict(NODE_MAX_STRING_UNITS + 1)
    assert over.level == "block"
    assert "536,870,888" in over.message
    assert size_verdict(90, limit=100).level == "warn"
