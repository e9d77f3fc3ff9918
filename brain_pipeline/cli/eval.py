"""`brain-pipeline eval`: retrieval quality of a built store on the labelled fixture."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain_pipeline.evaluation.runner import ThresholdRow

HELP = "retrieval quality (legacy / bm25 / hybrid) on the labelled fixture"
DESCRIPTION = """\
Run the labelled fixture through the legacy baseline, BM25 and hybrid retrieval and print
recall@10, MRR, nDCG@10 and misses for each, plus any stale labels, then a verdict line:
`PASSED: ...` naming every applied threshold and its figure, or `FAILED: ...` naming
every reason. Exits 1 when the configured thresholds fail (or the fixture is stale), 2
when the inputs are unusable. This is the same evaluation as the blocking
`retrieval_eval` asset check. Progress (one line per retriever, and a count every few
seconds while one is slow) goes to stderr.

The store directory (default: the configured build dir) holds knowledge-store.json and
optionally embeddings.bin. The fixture comes from evaluation.fixture (BRAIN_EVAL_FIXTURE
overrides it), and --fixture overrides both.
"""

PROGRESS_EVERY_SECONDS = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR", help="store directory (default: build dir)")
    parser.add_argument("--fixture", metavar="FILE", help="labelled queries (JSON)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class EvalProgress:
    """Progress of an evaluation on a clock: the run would otherwise be silent for seconds.

    One line when a retriever is done (with its time), and while one is running, its
    query count at most every `every` seconds — never a line per query.
    """

    def __init__(
        self,
        write: Callable[[str], None] = _stderr,
        *,
        every: float = PROGRESS_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self.every = every
        self._clock = clock
        self._started = 0.0
        self._last = 0.0

    def __call__(self, retriever: str, done: int, total: int) -> None:
        now = self._clock()
        if done == 0:
            self._started = self._last = now
        if done >= total:
            self._write(f"eval: {retriever} done, {total} queries in {now - self._started:.1f}s")
        elif done and now - self._last >= self.every:
            self._last = now
            self._write(f"eval: {retriever} {done}/{total} queries")


_METRIC_LABELS = {"ndcg_at_10": "nDCG@10", "recall_at_10": "recall@10", "misses": "misses"}


def describe_bound(row: ThresholdRow) -> str:
    """E.g. "nDCG@10 0.483 >= 0.450" or "misses 18 <= 20" (without the retriever)."""
    label = _METRIC_LABELS.get(row.metric, row.metric)
    if row.kind == "max":
        return f"{label} {row.value:.0f} {'<=' if row.passed else '>'} {row.bound:.0f}"
    return f"{label} {row.value:.3f} {'>=' if row.passed else '<'} {row.bound:.3f}"


def verdict_line(rows: Sequence[ThresholdRow], failures: Sequence[str]) -> str:
    """`PASSED: bm25 nDCG@10 0.483 >= 0.450, ...; hybrid ...` or `FAILED: <every failure>`.

    A pass names every bound that was applied, with its figure, grouped by retriever, so
    a log shows what "passed" meant; a failure names every reason (bounds, stale labels,
    an empty store), the same sentences the blocking check reports.
    """
    if failures:
        return "FAILED: " + "; ".join(failures)
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(row.retriever, []).append(describe_bound(row))
    parts = [f"{name} {', '.join(items)}" for name, items in groups.items()]
    return "PASSED: " + ("; ".join(parts) if parts else "no thresholds configured")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from brain_pipeline.config import ConfigError, load_config
    from brain_pipeline.evaluation.runner import EvaluationReport
    from brain_pipeline.evaluation.service import evaluate_store_dir

    try:
        cfg = load_config()
        store = Path(args.store) if args.store else cfg.build_dir
        fixture = Path(args.fixture) if args.fixture else None
        _stderr(f"eval: store {store}, fixture {fixture or cfg.evaluation.fixture}")
        outcome = evaluate_store_dir(cfg, store, fixture, warn=_warn, progress=EvalProgress())
    except (ConfigError, ValueError) as exc:
        print(f"brain-pipeline eval: {exc}", file=sys.stderr)
        return 2

    report = outcome.report
    if not isinstance(report, EvaluationReport):  # no store, or an unusable fixture
        for failure in outcome.failures:
            print(f"brain-pipeline eval: {failure}", file=sys.stderr)
        return 2
    verdict = verdict_line(outcome.thresholds, outcome.failures)
    if args.json:
        print(report.to_json())
        _stderr(verdict)  # stdout stays one JSON document
    else:
        print(report.to_text())
        print(verdict)
    if outcome.failures:
        print("evaluation FAILED:", file=sys.stderr)
        for failure in outcome.failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    return 0
