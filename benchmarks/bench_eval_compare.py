"""Cost of the baseline comparison, and interval widths on SciFact.

    python benchmarks/bench_eval_compare.py --chunks 200000 --scifact /work/shared/datasets/scifact

1. Interval widths: BM25 on SciFact (test split), per-query nDCG@10, 95% bootstrap
   half-width for the full split and for random subsets of fixture size.
2. Comparison cost (median [min-max] of `--runs` runs, default 5, the two cases taking
   turns; benchmarks/_figures.py, with a reference unit for the machine's speed): a chunk
   history of --chunks synthetic chunks (the only part of the comparison whose size
   grows with the store), a baseline of 300 queries x 3 retrievers,
   and a current evaluation in which *every* query changed (worst case: every entered id
   is looked up). Timed: load_baseline + compare with history origins.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from _figures import DEFAULT_RUNS, Figure, Session

from brain_pipeline.evaluation.baseline import load_baseline, record_baseline
from brain_pipeline.evaluation.bootstrap import bootstrap_means
from brain_pipeline.evaluation.compare import compare
from brain_pipeline.evaluation.judgements import ready
from brain_pipeline.evaluation.runner import EvaluationReport, QueryResult, RetrieverSummary
from brain_pipeline.state.blobs import LocalBlobs
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, sqlite_url
from brain_pipeline.state.memory import Memory


def scifact_widths(path: Path) -> None:
    from brain_pipeline.evaluation.beir import DEPTH, load_beir
    from brain_pipeline.evaluation.metrics import gain_matrix, ideal_matrix, ndcg_at
    from brain_pipeline.retrieval.bm25 import BM25Index

    data = load_beir(path)
    index = BM25Index.build(data.doc_ids, data.documents)
    rankings = [[doc for doc, _ in index.search(q, DEPTH)] for q in data.queries]
    judgments = list(data.qrels)
    ndcg = ndcg_at(gain_matrix(rankings, judgments, 10), ideal_matrix(judgments, 10), 10)
    full = bootstrap_means(ndcg)[0]
    print(f"scifact bm25: {len(ndcg)} queries, nDCG@10 {full.value:.4f} "
          f"95% {full.low:.4f}-{full.high:.4f} (±{full.half_width:.3f})")
    rng = np.random.default_rng(0)
    for n in (20, 54, 100):
        widths = [bootstrap_means(ndcg[rng.choice(len(ndcg), n, replace=False)])[0].half_width
                  for _ in range(50)]
        print(f"  subsets of {n}: median ±{np.median(widths):.3f}")


@dataclass(frozen=True)
class FakeChunk:
    id: str
    content: str
    area: str
    source: str
    heading: str


def comparison_cost(n_chunks: int, session: Session) -> None:
    from brain_pipeline.corpus.chunk_history import record_store

    with tempfile.TemporaryDirectory() as tmp:
        layout = StateLayout.of(tmp)
        layout.state_dir.mkdir(parents=True)
        ledger = Ledger(sqlite_url(layout.ledger))
        memory = ready(Memory(ledger, LocalBlobs(layout.blobs_dir), layout))
        t0 = datetime(2025, 1, 1, tzinfo=UTC)
        chunks = [FakeChunk(f"{i:012x}", f"text {i}", "a", f"f{i % 997}.md", "h")
                  for i in range(n_chunks)]
        started = time.perf_counter()
        record_store(layout, chunks, t0)
        print(f"history of {n_chunks} chunks built in {time.perf_counter() - started:.1f}s")
        rng = np.random.default_rng(1)
        rows = []
        for retriever in ("legacy", "bm25", "hybrid"):
            for q in range(300):
                top = [f"{int(i):012x}" for i in rng.choice(n_chunks, 10, replace=False)]
                rows.append(QueryResult(f"q{q}", "a", retriever, 1, 1.0, 1.0, 1.0, top, "lexical",
                                        relevant_ranks={top[0]: 1}, miss=False))
        report = EvaluationReport([RetrieverSummary(r, 1, 1, 1, 0, 300) for r in
                                   ("legacy", "bm25", "hybrid")], rows, [], [], n_chunks, "f")
        record_baseline(memory, {"key": "k", "when": t0.isoformat(), "report": report.to_dict()},
                        {}, kind="published")
        changed = [replace(r, top_ids=[f"{int(i):012x}" for i in
                                       rng.choice(n_chunks, 10, replace=False)],
                           first_relevant_rank=None, rr=0.0, ndcg=0.0, recall=0.0, miss=True,
                           relevant_ranks=dict.fromkeys(r.relevant_ranks))
                   for r in rows]
        from brain_pipeline.corpus.chunk_history import lookup_many
        from brain_pipeline.evaluation.compare import ChunkOrigin

        def origins(ids: list[str]) -> dict[str, ChunkOrigin]:
            return {k: ChunkOrigin(k, e.source, e.heading_text, e.first_seen,
                                   e.first_seen > (t0 + timedelta(0)).isoformat())
                    for k, e in lookup_many(layout, ids).items()}

        def timed_compare(current: list[QueryResult]) -> tuple[float, int, int]:
            started = time.perf_counter()
            baseline = load_baseline(memory).baseline
            assert baseline is not None
            result = compare(current, baseline.report.queries, origins)
            took = time.perf_counter() - started
            return took, len(result.changes), sum(len(c.entered) for c in result.changes)

        cases = (("unchanged", rows), ("every query changed", changed))
        seconds: dict[str, list[float]] = {label: [] for label, _ in cases}
        for _ in range(session.runs):  # the two cases take turns
            for label, current in cases:
                took, changes, entered = timed_compare(current)
                seconds[label].append(took * 1000)
            session.note_reference()
        for label, current in cases:
            _, changes, entered = timed_compare(current)
            print(f"  {label}: {changes} changes, {entered} entered ids looked up, "
                  f"{Figure.of(seconds[label]).text('{:.0f}', 'ms')}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--scifact", type=Path)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="timed runs (median)")
    args = parser.parse_args()
    session = Session(runs=args.runs).start()
    if args.scifact:
        scifact_widths(args.scifact)
    comparison_cost(args.chunks, session)
    session.finish()


if __name__ == "__main__":
    main()
