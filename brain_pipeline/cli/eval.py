"""`brain-pipeline eval`: retrieval quality of a built store on the labelled fixture."""

from __future__ import annotations

import argparse
import sys

HELP = "retrieval quality (legacy / bm25 / hybrid) on the labelled fixture"
DESCRIPTION = """\
Run the labelled fixture through the legacy baseline, BM25 and hybrid retrieval and print
recall@10, MRR, nDCG@10 and misses for each, plus any stale labels. Exits 1 when the
configured thresholds fail (or the fixture is stale), 2 when the inputs are unusable.

The store directory (default: the configured build dir) holds knowledge-store.json and
optionally embeddings.bin. The fixture comes from evaluation.fixture (BRAIN_EVAL_FIXTURE
overrides it), and --fixture overrides both.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR", help="store directory (default: build dir)")
    parser.add_argument("--fixture", metavar="FILE", help="labelled queries (JSON)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.config import ConfigError, load_config
    from brain_pipeline.evaluation.configured import StoreNotFoundError, evaluate_store
    from brain_pipeline.evaluation.fixture import FixtureError

    try:
        cfg = load_config()
        report, failures = evaluate_store(cfg, store=args.store, fixture=args.fixture)
    except (ConfigError, StoreNotFoundError, FixtureError, ValueError) as exc:
        print(f"brain-pipeline eval: {exc}", file=sys.stderr)
        return 2

    if args.json:
        print(report.to_json())
    else:
        print(report.to_text())
    if failures:
        print("evaluation FAILED:", file=sys.stderr)
        for failure in failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    return 0
