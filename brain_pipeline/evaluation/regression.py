"""The build directory's baseline, compared with a new evaluation (nothing judged here).

`compare_with_baseline` loads the baseline (`baseline.load_baseline`), compares the
per-query results (`compare.compare`) with the chunk history naming where entered chunks
come from, and picks the agent's retriever. What the differences mean for the verdict
(`on_regression`) is decided by `verdict.judge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from brain_pipeline.evaluation.baseline import Baseline, load_baseline
from brain_pipeline.evaluation.compare import ChunkOrigin, Comparison, OriginLookup, compare
from brain_pipeline.evaluation.runner import EvaluationReport
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory

AGENT_RETRIEVERS: tuple[str, ...] = ("hybrid", "bm25")
"""The retriever the agent answers with: hybrid (which is BM25 without vectors), else BM25."""


@dataclass(frozen=True)
class BaselineComparison:
    """The evaluation against the baseline, or None and `status` saying why there is none."""

    comparison: Comparison | None
    baseline: Baseline | None
    status: str
    """One line: which baseline, how many queries were compared, or why there is none."""
    retriever: str | None = None
    """The agent's retriever, whose new misses the verdict gates."""


def compare_with_baseline(report: EvaluationReport, memory: Memory) -> BaselineComparison:
    """Compare `report` with the baseline the ledger of `memory` keeps.

    Cheap for an evaluation that is otherwise reused: a JSON read of the baseline, a
    dictionary join over the queries, and one chunk-history query per chunk that
    entered a changed query's top 10.
    """
    found = load_baseline(memory)
    if found.baseline is None:
        return BaselineComparison(None, None, str(found.reason))
    baseline = found.baseline
    comparison = compare(
        report.queries,
        baseline.report.queries,
        _origin_lookup(memory.layout, baseline.evaluated_at),
    )
    if comparison.shared == 0:
        return BaselineComparison(
            None, baseline, "no baseline: the baseline shares no query with this fixture"
        )
    names = [s.name for s in report.retrievers]
    retriever = next((name for name in AGENT_RETRIEVERS if name in names), None)
    status = f"{baseline.describe()}; {comparison.shared} queries compared"
    if comparison.only_now or comparison.only_baseline:
        status += (
            f" (the fixture changed: {comparison.only_now} new or relabelled, "
            f"{comparison.only_baseline} gone; only shared queries are compared)"
        )
    return BaselineComparison(comparison, baseline, status, retriever)


def _origin_lookup(layout: StateLayout, since: str) -> OriginLookup:
    """Where entered chunks come from, per the chunk history; "new" = first seen after
    the baseline was evaluated. A history that cannot be read leaves origins unknown."""
    from brain_pipeline.corpus.chunk_history import HistoryError, lookup_many

    def parse(text: str) -> datetime | None:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None

    baseline_time = parse(since)

    def origins(ids: Sequence[str]) -> dict[str, ChunkOrigin]:
        try:
            entries = lookup_many(layout, ids)
        except (HistoryError, OSError, ValueError):
            return {}
        out: dict[str, ChunkOrigin] = {}
        for chunk_id, entry in entries.items():
            first = parse(entry.first_seen)
            new = None if first is None or baseline_time is None else first > baseline_time
            out[chunk_id] = ChunkOrigin(
                chunk_id, entry.source, entry.heading_text or None, entry.first_seen, new
            )
        return out

    return origins
