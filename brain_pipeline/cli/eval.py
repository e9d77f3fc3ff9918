"""`brain-pipeline eval`: retrieval quality of a built store on the labelled fixture."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brain_pipeline.cli import CommandError, configuration

HELP = "retrieval quality (legacy / bm25 / hybrid) on the labelled fixture"
DESCRIPTION = """\
Run the labelled fixture through the legacy baseline, BM25 and hybrid retrieval and print
recall@10, MRR, nDCG@10 and misses for each, plus any stale labels, then a verdict line:
`PASSED: ...` naming every applied threshold and its figure, or `FAILED: ...` naming
every reason. Exits 1 when the configured thresholds fail (or the fixture is stale), 2
when the inputs are unusable. This is the same evaluation as the blocking
`retrieval_eval` asset check. Progress (one line per retriever, and a count every few
seconds while one is slow) goes to stderr.

Every evaluation is compared with the baseline, the evaluation of the last published
store: a query the agent's retriever answered then and misses now fails the evaluation
(evaluation.on_regression: block; warn only names it), with the chunks that displaced
its answer. Figures carry 95% bootstrap intervals over queries, differences from the
baseline a paired one. `--accept --note "why"` records this evaluation as the new
baseline (the note stays in `--history`).

The store directory (default: the configured build dir) holds knowledge-store.json and
optionally embeddings.bin. The fixture comes from evaluation.fixture (BRAIN_EVAL_FIXTURE
overrides it), and --fixture overrides both.
"""

PROGRESS_EVERY_SECONDS = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR", help="store directory (default: build dir)")
    parser.add_argument("--fixture", metavar="FILE", help="labelled queries (JSON)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the full report as JSON, with the known-item figures and the verdict",
    )
    parser.add_argument(
        "--per-query",
        action="store_true",
        help="also print every query's ranks per retriever, and the changes from the baseline",
    )
    parser.add_argument(
        "--csv", metavar="FILE", help="write the per-query table (with --history: the history)"
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="list the evaluations of past publications (figures, intervals, misses); "
        "evaluates nothing",
    )
    parser.add_argument(
        "--accept",
        action="store_true",
        help="make this evaluation the baseline (accepts its regressions); needs --note",
    )
    parser.add_argument("--note", metavar="TEXT", help="why the evaluation is accepted")


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


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.evaluation.service import evaluate_store_dir

    if args.accept and not (args.note or "").strip():
        raise CommandError('--accept needs --note "why" (it is kept)')
    cfg = configuration()
    try:
        if args.history:
            return _history(cfg, args)
        store = Path(args.store) if args.store else cfg.build_dir
        fixture = Path(args.fixture) if args.fixture else None
        _stderr(f"eval: store {store}, fixture {fixture or cfg.evaluation.fixture}")
        outcome = evaluate_store_dir(cfg, store, fixture, warn=_warn, progress=EvalProgress())
    except ValueError as exc:
        raise CommandError(exc) from None

    report = outcome.report
    if report is None:  # no store, or an unusable fixture
        raise CommandError("\n".join(str(failure) for failure in outcome.failures))
    from brain_pipeline.evaluation.reports import report_text, summary_lines

    if args.accept:
        _accept(cfg, store, outcome, str(args.note).strip())
    verdict = outcome.verdict.line()
    if args.csv:
        from brain_pipeline.evaluation.reports import per_query_frame

        _write_csv(Path(args.csv), per_query_frame(report).to_csv(index=False))
    if args.json:
        print(_json_document(outcome))
        _stderr(verdict)  # stdout stays one JSON document
    else:
        print(report_text(report))
        for line in summary_lines(outcome):
            print(line)
        _print_known_items(outcome)
        if args.per_query:
            _print_per_query(outcome)
        print(verdict)
    for warning in outcome.verdict.warnings:
        _warn(warning)
    if outcome.verdict.failures:
        print("evaluation FAILED:", file=sys.stderr)
        for failure in outcome.verdict.failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    return 0


def _json_document(outcome: Any) -> str:
    """The report, with the known-item check's figures (`known_items`) and the verdict
    (severity, failures, warnings, and the rule it was judged by) beside it."""
    import json

    from brain_pipeline.evaluation.reports import known_item_summary

    verdict = outcome.verdict
    document = {
        **outcome.report.to_dict(),
        "known_items": known_item_summary(verdict.known_items),
        "verdict": {
            "severity": verdict.severity,
            "headline": verdict.headline(),
            "failures": list(verdict.failures),
            "warnings": list(verdict.warnings),
            "evaluation_key": outcome.record_key,
            "rule": outcome.rule.to_dict() if outcome.rule is not None else None,
        },
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def _print_known_items(outcome: Any) -> None:
    """The known-item check's found@10 per area (evaluation/known_item_gate.py)."""
    from brain_pipeline.evaluation.known_item_gate import table_lines

    known = outcome.verdict.known_items
    if known is not None:
        print()
        for line in table_lines(known):
            print(line)


def _print_per_query(outcome: Any) -> None:
    """Per-query ranks (one column per retriever), then the changes from the baseline."""
    import pandas as pd

    from brain_pipeline.evaluation.reports import changes_frame, query_rows

    # Rank of the first relevant hit, one column per retriever ("-": a miss).
    rows = [{k: "-" if v is None else v for k, v in row.items() if k != "stale_label"}
            for row in query_rows(outcome.report)]
    ranks = pd.DataFrame(rows, columns=list(rows[0]) if rows else ["query"])
    with pd.option_context("display.max_rows", None, "display.width", 200,
                           "display.max_colwidth", 70):
        print()
        print(_left(ranks.astype(str)).to_string(index=False, justify="left"))
        comparison = outcome.regression.comparison if outcome.regression else None
        if comparison is not None and comparison.changes:
            print()
            print("changes from the baseline:")
            changes = changes_frame(comparison)
            print(_left(changes.drop(columns=["gained"])).to_string(index=False, justify="left"))
    print()


def _left(frame: Any) -> Any:
    """Text columns left-aligned (pandas right-aligns them, which is hard to read)."""
    out = frame.copy()
    for name in out.columns:
        if out[name].dtype == object or str(out[name].dtype).startswith("str"):
            width = max([len(str(name)), *(len(str(v)) for v in out[name])])
            out[name] = out[name].map(lambda v, w=width: f"{v!s:<{w}}")
    return out


def _write_csv(path: Path, text: str) -> None:
    from brain_pipeline.utils.atomic import atomic_write_bytes

    atomic_write_bytes(path, text.encode("utf-8"))
    _stderr(f"eval: wrote {path}")


def _accept(cfg: Any, store: Path, outcome: Any, note: str) -> None:
    """Record the evaluation as the baseline, and its verdict as accepted (in `outcome`
    too); a CommandError (exit 1) when it cannot be accepted."""
    from brain_pipeline.corpus.store_reader import cache_layout
    from brain_pipeline.evaluation.service import accept_evaluation

    others = outcome.verdict.own_failures
    if others:
        raise CommandError(
            "not accepted: only regressions can be accepted, this evaluation fails on its "
            f"own: {'; '.join(others)}",
            1,
        )
    layout = cache_layout(store, cfg.build_dir)
    accepted = None
    if layout is not None and outcome.record_key:
        accepted = accept_evaluation(cfg, outcome.record_key, note)
    if accepted is None:
        raise CommandError(
            "not accepted: this evaluation was not recorded (a store outside the build "
            "directory, or a provider that failed mid-run); run it again",
            1,
        )
    count = sum(1 for r in outcome.verdict.regressions if r.blocking)
    known = outcome.verdict.known_items
    losses = len(known.failures) if known is not None else 0
    outcome.verdict = accepted
    _stderr(
        f"eval: accepted evaluation {str(outcome.record_key)[:12]} as the baseline "
        f"({count} regression(s), {losses} known-item loss(es) accepted): {note}"
    )


def _history(cfg: Any, args: argparse.Namespace) -> int:
    """`eval --history`: one row per publication (or acceptance), newest first."""
    import json

    import pandas as pd

    from brain_pipeline.evaluation.baseline import publications
    from brain_pipeline.evaluation.reports import history_frame
    from brain_pipeline.evaluation.service import judgement_memory

    entries, reason = publications(judgement_memory(cfg))
    if reason:
        print(f"brain-pipeline eval: {reason}", file=sys.stderr)
    frame = history_frame(entries)
    if args.csv:
        _write_csv(Path(args.csv), frame.to_csv(index=False))
    if args.json:
        print(json.dumps(entries, indent=2, ensure_ascii=False))
    elif not frame.empty:
        with pd.option_context("display.max_rows", None, "display.width", 250):
            print(frame.to_string(index=False))
    return 0
