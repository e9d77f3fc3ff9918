"""Bootstrap intervals over queries: how sure a figure, or a difference, is.

A fixture of 20–60 labelled queries gives a mean nDCG@10 whose sampling noise is easily
±0.05–0.10: a change of 0.02 between two evaluations says nothing on its own. Each
figure gets a percentile bootstrap interval (queries resampled with replacement), and a
difference between two evaluations of the *same* queries a paired bootstrap (the
per-query differences are resampled together, which is much tighter than comparing two
independent intervals because most queries do not change).

Pure numpy, vectorised: one (resamples x queries) index matrix per call, shared by all
metrics so the intervals of one evaluation come from the same resamples. A fixed seed
makes every interval reproducible: the same per-query values always give the same
interval, so a reused evaluation and a re-run show identical figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

RESAMPLES = 2000
SEED = 18
LEVEL = 0.95
METRICS: tuple[tuple[str, str], ...] = (
    ("ndcg_at_10", "ndcg"),
    ("recall_at_10", "recall"),
    ("mrr", "rr"),
    ("misses", "miss"),
)
"""(figure name, per-query attribute). Misses are a count, so their interval is one too."""


@dataclass(frozen=True)
class Interval:
    """A figure (the mean, or for counts the total, over queries) and its interval."""

    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def to_list(self) -> list[float]:
        return [round(self.low, 6), round(self.high, 6)]


def _indices(n: int, resamples: int, seed: int) -> npt.NDArray[np.intp]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(resamples, n))


def _percentiles(stats: FloatArray, level: float) -> tuple[FloatArray, FloatArray]:
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(stats, [tail, 100.0 - tail], axis=-1)
    return low, high


def bootstrap_means(
    values: FloatArray | Sequence[Sequence[float]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> list[Interval]:
    """One interval per row of `values` (metrics x queries) for the mean over queries.

    All rows are resampled with the same query indices. No queries: [0, 0] intervals.
    """
    matrix = np.atleast_2d(np.asarray(values, dtype=np.float64))
    n = matrix.shape[1]
    if n == 0:
        return [Interval(0.0, 0.0, 0.0) for _ in range(matrix.shape[0])]
    idx = _indices(n, resamples, seed)
    # (metrics, resamples): each resample's mean, without materialising a 3-d array
    # larger than resamples x queries per metric.
    means = np.stack([row[idx].mean(axis=1) for row in matrix])
    low, high = _percentiles(means, level)
    centre = matrix.mean(axis=1)
    return [
        Interval(float(c), float(lo), float(hi))
        for c, lo, hi in zip(centre, low, high, strict=True)
    ]


def paired_difference(
    current: FloatArray | Sequence[float],
    baseline: FloatArray | Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Interval:
    """Mean of current - baseline over the same queries, with a paired bootstrap interval.

    The interval excludes 0 only when the queries moved consistently in one direction.
    """
    now = np.asarray(current, dtype=np.float64)
    then = np.asarray(baseline, dtype=np.float64)
    if now.shape != then.shape:
        raise ValueError(f"paired values differ in shape: {now.shape} vs {then.shape}")
    return bootstrap_means(now - then, resamples=resamples, seed=seed, level=level)[0]


def scale(interval: Interval, factor: float) -> Interval:
    """The interval of factor x the statistic (a mean of 0/1 misses -> a count)."""
    return Interval(interval.value * factor, interval.low * factor, interval.high * factor)


def _column(rows: Sequence[Any], attribute: str) -> list[float]:
    return [float(getattr(row, attribute)) for row in rows]


def figure_intervals(
    rows: Iterable[Any], *, resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, Interval]:
    """{"bm25.ndcg_at_10": Interval, ...} from per-query results (runner.QueryResult).

    Rows need `retriever` and the attributes in METRICS; misses are reported as a count.
    """
    by_retriever: dict[str, list[Any]] = {}
    for row in rows:
        by_retriever.setdefault(str(row.retriever), []).append(row)
    out: dict[str, Interval] = {}
    for name, own in by_retriever.items():
        matrix = [_column(own, attribute) for _, attribute in METRICS]
        intervals = bootstrap_means(matrix, resamples=resamples, seed=seed)
        for (metric, _), interval in zip(METRICS, intervals, strict=True):
            if metric == "misses":
                interval = scale(interval, len(own))
            out[f"{name}.{metric}"] = interval
    return out


def too_small_note(n_queries: int, intervals: Mapping[str, Interval], retriever: str) -> str:
    """The sentence saying which differences this fixture cannot see.

    E.g. "20 queries: ±0.08 on bm25 nDCG@10; label more queries to see changes smaller
    than that". The half-width of the nDCG@10 interval is the smallest change of the mean
    that stands out of the noise of one evaluation.
    """
    interval = intervals.get(f"{retriever}.ndcg_at_10")
    if interval is None:
        return f"{n_queries} queries: no interval for {retriever}"
    return (
        f"{n_queries} queries: ±{interval.half_width:.2f} on {retriever} nDCG@10 "
        f"({interval.low:.3f}–{interval.high:.3f}, 95%); label more queries to see changes "
        "smaller than that"
    )
