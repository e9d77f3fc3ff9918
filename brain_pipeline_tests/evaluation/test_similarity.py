"""The repair score: how much of an old text a new one keeps, in order."""

from __future__ import annotations

import pytest

from brain_pipeline.evaluation.similarity import coverage, covered, excerpt, normalise

OLD = "Amazon VPC lets you launch resources in a logically isolated virtual network."


def test_rewrapping_keeps_everything() -> None:
    assert normalise("  a\n b\t\tc ") == "a b c"
    assert coverage(OLD, OLD.replace(" ", "\n  ")) == 1.0


def test_an_unrelated_text_keeps_nothing_and_an_edit_keeps_most() -> None:
    assert coverage(OLD, "Python lists hold items in order and grow as needed.") == 0.0
    edited = OLD.replace("logically isolated", "private")
    assert 0.6 < coverage(OLD, edited) < 1.0


def test_the_same_words_in_another_order_keep_little() -> None:
    words = OLD.split()
    shuffled = " ".join(words[i] for i in (5, 0, 9, 2, 7, 4, 1, 8, 3, 6, 10))
    assert coverage(OLD, shuffled) < 0.5


@pytest.mark.parametrize(
    ("intervals", "chars"), [([], 0), ([(0, 5), (3, 8)], 8), ([(10, 12), (0, 2)], 4)]
)
def test_overlapping_intervals_count_once(intervals: list[tuple[int, int]], chars: int) -> None:
    assert covered(intervals) == chars


def test_an_excerpt_is_flat_and_bounded() -> None:
    assert excerpt("short\ntext") == "short text"
    long = excerpt("word " * 100, size=20)
    assert len(long) == 20 and long.endswith("…")
