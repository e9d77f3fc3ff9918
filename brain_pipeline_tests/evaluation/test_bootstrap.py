"""Bootstrap intervals: reproducible, honest about their width, and covering at their rate."""

from __future__ import annotations

import numpy as np
import pytest

from brain_pipeline.evaluation.bootstrap import (
    Interval,
    bootstrap_means,
    figure_intervals,
    paired_difference,
    too_small_note,
)
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.runner import evaluate
from brain_pipeline_tests.evaluation.helpers import make_chunk


def _covers(interval: Interval, value: float) -> bool:
    return interval.low <= value <= interval.high


def _population(rng: np.random.Generator, size: int) -> np.ndarray:
    """Per-query nDCG-like values: a third misses (0), the rest spread over (0, 1]."""
    hits = rng.random(size) > 0.33
    return np.where(hits, rng.beta(2.0, 1.2, size), 0.0)


def test_same_values_give_the_same_interval() -> None:
    values = _population(np.random.default_rng(1), 54)
    assert bootstrap_means(values) == bootstrap_means(values.copy())


def test_interval_contains_the_mean_and_narrows_with_more_queries() -> None:
    rng = np.random.default_rng(2)
    small = bootstrap_means(_population(rng, 20))[0]
    large = bootstrap_means(_population(rng, 300))[0]
    assert small.low <= small.value <= small.high
    # Width shrinks as 1/sqrt(n): 300 queries is ~3.9x narrower than 20.
    assert 2.5 < small.half_width / large.half_width < 6.0


def test_identical_evaluations_differ_by_exactly_zero() -> None:
    values = _population(np.random.default_rng(3), 54)
    diff = paired_difference(values, values)
    assert (diff.value, diff.low, diff.high) == (0.0, 0.0, 0.0)


def test_paired_difference_sees_one_consistent_shift_an_unpaired_one_would_not() -> None:
    rng = np.random.default_rng(4)
    before = _population(rng, 54)
    after = np.clip(before - 0.03 * (before > 0), 0.0, 1.0)  # every hit a little worse
    diff = paired_difference(after, before)
    assert diff.high < 0  # the paired interval excludes 0
    separate = bootstrap_means([after, before])
    assert separate[0].high > separate[1].low  # the two intervals overlap


def test_paired_difference_rejects_unaligned_inputs() -> None:
    with pytest.raises(ValueError, match="shape"):
        paired_difference([0.1, 0.2], [0.1])


@pytest.mark.parametrize("n", [30, 54])
def test_interval_covers_the_true_mean_at_the_stated_rate(n: int) -> None:
    """Simulation: draw fixtures from a population whose mean is known, count coverage."""
    rng = np.random.default_rng(5)
    true_mean = float(_population(np.random.default_rng(6), 2_000_000).mean())
    trials = 400
    covered = sum(
        _covers(bootstrap_means(_population(rng, n), resamples=1000, seed=trial)[0], true_mean)
        for trial in range(trials)
    )
    # Percentile intervals under-cover slightly at small n; 400 trials: sd ~ 0.011.
    assert 0.91 <= covered / trials <= 0.98


def test_paired_difference_covers_the_true_shift() -> None:
    rng = np.random.default_rng(7)
    trials, n, covered = 300, 54, 0
    for trial in range(trials):
        before = _population(rng, n)
        shift = rng.normal(-0.02, 0.1, n)  # true mean difference -0.02
        diff = paired_difference(before + shift, before, resamples=1000, seed=trial)
        covered += _covers(diff, -0.02)
    assert 0.90 <= covered / trials <= 0.98


def test_figure_intervals_from_a_real_evaluation() -> None:
    chunks = [make_chunk(f"topic{i} explained in detail number {i}") for i in range(12)]
    fixture = Fixture(
        tuple(LabelledQuery(f"topic{i}", "aws", (chunks[i].id,)) for i in range(8))
        + (LabelledQuery("nothing matches", "aws", (chunks[0].id,)),),
        "t.json",
    )
    report = evaluate(chunks, fixture, retrievers=("bm25",))
    intervals = figure_intervals(report.queries)
    summary = report.summary("bm25")
    assert summary is not None
    assert intervals["bm25.ndcg_at_10"].value == pytest.approx(summary.ndcg_at_10)
    assert intervals["bm25.misses"].value == pytest.approx(summary.misses)
    assert intervals["bm25.misses"].high <= 9
    note = too_small_note(9, intervals, "bm25")
    assert note.startswith("9 queries: ±") and "label more queries" in note
