"""An evaluation report for people: the terminal's text, the check's markdown, rank rows.

Rendering only: what the retrievers did is `runner.EvaluationReport`, what is judged of
it is `verdict.EvaluationVerdict`. Pure, and free of pandas (see `reports` for the DataFrames).
"""

from __future__ import annotations

from typing import Any

from brain_pipeline.evaluation.runner import EvaluationReport
from brain_pipeline.utils.markdown import md_code, md_text


def report_text(report: EvaluationReport) -> str:
    """A plain-text version of the comparison for the terminal (`brain-pipeline eval`)."""
    n = len({(q.query, q.area) for q in report.queries})
    labels = [f"{s.name} (= bm25)" if s.fell_back_entirely else s.name for s in report.retrievers]
    width = max([len("retriever"), *map(len, labels)])
    lines = [f"{n} queries from {report.fixture_source}, {report.n_chunks} chunks"]
    if n == 0:  # no labels: no figures to show (the known-item table follows)
        return "\n".join(lines)
    lines.append(f"{'retriever':<{width}}  recall@10     MRR  nDCG@10  misses")
    for label, s in zip(labels, report.retrievers, strict=True):
        lines.append(
            f"{label:<{width}}  {s.recall_at_10:9.3f}  {s.mrr:6.3f}  {s.ndcg_at_10:7.3f}  "
            f"{s.misses:>3}/{s.n_queries}"
        )
    lines.extend(f"note: {note}" for note in fallback_notes(report) + report.notes)
    if report.stale_ids:
        lines.append(f"stale ids ({len(report.stale_ids)}): {', '.join(report.stale_ids)}")
    if report.unknown_areas:
        lines.append(f"unknown areas: {', '.join(report.unknown_areas)}")
    return "\n".join(lines)


def report_markdown(report: EvaluationReport) -> str:
    """The comparison table, fallbacks, staleness and a per-query rank table."""
    n = len({(q.query, q.area) for q in report.queries})
    lines = [
        f"Retrieval evaluation: {n} queries from {md_code(report.fixture_source)} "
        f"over {report.n_chunks} chunks.",
        "",
        "| retriever | recall@10 | MRR | nDCG@10 | misses |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in report.retrievers:
        label = f"{s.name} (= bm25)" if s.fell_back_entirely else s.name
        lines.append(
            f"| {label} | {s.recall_at_10:.3f} | {s.mrr:.3f} | {s.ndcg_at_10:.3f} "
            f"| {s.misses}/{s.n_queries} |"
        )
    lines.append("")
    lines.extend(f"- {md_text(note)}" for note in fallback_notes(report) + report.notes)
    if report.stale_ids:
        lines.append(
            f"- **Stale fixture**: {len(report.stale_ids)} labelled chunk id(s) are not in "
            f"the store: {md_text(', '.join(report.stale_ids))}"
        )
    if report.unknown_areas:
        unknown = md_text(", ".join(report.unknown_areas))
        lines.append(f"- **Unknown area(s)** in the fixture: {unknown}")
    lines.extend(["", *_rank_table(report)])
    return "\n".join(lines).rstrip() + "\n"


def fallback_notes(report: EvaluationReport) -> list[str]:
    """One sentence per retriever that answered some queries with BM25 instead."""
    notes = []
    for s in report.retrievers:
        if s.fallback_queries:
            notes.append(
                f"{s.name} answered {s.fallback_queries}/{s.n_queries} queries with BM25 "
                f"({s.fallback})" + ("; its figures are BM25's" if s.fell_back_entirely else "")
            )
    return notes


def _first_ranks(report: EvaluationReport) -> dict[tuple[str, str], dict[str, int | None]]:
    """(query, area) -> retriever -> rank of its first relevant hit, fixture order."""
    ranks: dict[tuple[str, str], dict[str, int | None]] = {}
    for q in report.queries:
        ranks.setdefault((q.query, q.area), {})[q.retriever] = q.first_relevant_rank
    return ranks


def query_rows(report: EvaluationReport) -> list[dict[str, Any]]:
    """One row per labelled query: area, first relevant rank per retriever, staleness."""
    names = [s.name for s in report.retrievers]
    stale_queries = {(query, area) for _, query, area in report.stale_labels}
    return [
        {
            "query": query,
            "area": area,
            **{name: by_name.get(name) for name in names},
            "stale_label": (query, area) in stale_queries,
        }
        for (query, area), by_name in _first_ranks(report).items()
    ]


def _rank_table(report: EvaluationReport) -> list[str]:
    """Rank of the first relevant hit per query and retriever ("—" for a miss)."""
    names = [s.name for s in report.retrievers]
    lines = [
        "| query | area | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for (query, area), by_name in _first_ranks(report).items():
        cells = ["—" if by_name.get(name) is None else str(by_name[name]) for name in names]
        row = [md_text(query), md_text(area), *cells]
        lines.append("| " + " | ".join(row) + " |")
    return lines
