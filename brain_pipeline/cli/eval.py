"""`brain-pipeline eval`: retrieval quality of a built store on the labelled fixture."""

from __future__ import annotations

import argparse
import sys

HELP = "retrieval quality (legacy / bm25 / hybrid) on the labelled fixture"
DESCRIPTION = """\
Run the labelled fixture through the legacy baseline, BM25 and hybrid retrieval and print
recall@10, MRR, nDCG@10 and misses for each, plus any stale labels. Exits 1 when the
configured thresholds fail (or the fixture is stale), 2 when the inputs are unusable.
This is the same evaluation as the blocking `retrieval_eval` asset check.

The store directory (default: the configured build dir) holds knowledge-store.json and
optionally embeddings.bin. The fixture comes from evaluation.fixture (BRAIN_EVAL_FIXTURE
overrides it), and --fixture overrides both.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR", help="store directory (default: build dir)")
    parser.add_argument("--fixture", metavar="FILE", help="labelled queries (JSON)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from brain_pipeline.config import ConfigError, load_config
    from brain_pipeline.evaluation.runner import EvaluationReport
    from brain_pipeline.services import evaluate_store_dir

    try:
        cfg = load_config()
        store = Path(args.store) if args.store else cfg.build_dir
        fixture = Path(args.fixture) if args.fixture else None
        outcome = evaluate_store_dir(cfg, store, fixture, warn=_warn)
    except (ConfigError, ValueError) as exc:
        print(f"brain-pipeline eval: {exc}", file=sys.stderr)
        return 2

    report = outcome.report
    if not isinstance(report, EvaluationReport):  # no store, or an unusable fixture
        for failure in outcome.failures:
            print(f"brain-pipeline eval: {failure}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else report.to_text())
    if outcome.failures:
        print("evaluation FAILED:", file=sys.stderr)
        for failure in outcome.failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    return 0
