"""An evaluation for people: the report as text and markdown, the tables, the summary.

Rendering only: what the retrievers did is `runner.EvaluationReport`, what is judged of it
is `verdict.EvaluationVerdict`. The terminal's text (`report_text`), the check's markdown
(`report_markdown`) and the rank rows (`query_rows`) are plain strings and rows. The
tables people work with (per-query results, changes, past publications) are pandas
DataFrames, rendered by the caller to the terminal (`to_string`), to CSV (`eval --csv`) or
to Dagster table metadata (lib/tables.py). pandas takes about a second to import, so it is
imported inside those functions only: an evaluation that prints no table never pays for
it. The changes table also comes as plain rows (`changes_rows`): the evaluation check
shows it on every run, usually empty, without importing pandas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from brain_pipeline.utils.markdown import md_code, md_text

if TYPE_CHECKING:
    import pandas as pd

    from brain_pipeline.evaluation.compare import Comparison
    from brain_pipeline.evaluation.known_item_gate import KnownItemVerdict
    from brain_pipeline.evaluation.runner import EvaluationReport, RetrieverSummary

_HISTORY_METRICS = ("ndcg_at_10", "recall_at_10", "misses")


def _label(summary: RetrieverSummary) -> str:
    return f"{summary.name} (= bm25)" if summary.fell_back_entirely else summary.name


def _notes(report: EvaluationReport) -> list[str]:
    return fallback_notes(report) + report.notes


def report_text(report: EvaluationReport) -> str:
    """A plain-text version of the comparison for the terminal (`brain-pipeline eval`)."""
    n = len({(q.query, q.area) for q in report.queries})
    width = max([len("retriever"), *(len(_label(s)) for s in report.retrievers)])
    lines = [f"{n} queries from {report.fixture_source}, {report.n_chunks} chunks"]
    if n == 0:  # no labels: no figures to show (the known-item table follows)
        return "\n".join(lines)
    lines.append(f"{'retriever':<{width}}  recall@10     MRR  nDCG@10  misses")
    for s in report.retrievers:
        lines.append(
            f"{_label(s):<{width}}  {s.recall_at_10:9.3f}  {s.mrr:6.3f}  {s.ndcg_at_10:7.3f}  "
            f"{s.misses:>3}/{s.n_queries}"
        )
    lines.extend(f"note: {note}" for note in _notes(report))
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
        lines.append(
            f"| {_label(s)} | {s.recall_at_10:.3f} | {s.mrr:.3f} | {s.ndcg_at_10:.3f} "
            f"| {s.misses}/{s.n_queries} |"
        )
    lines.append("")
    lines.extend(f"- {md_text(note)}" for note in _notes(report))
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


def query_rows(report: EvaluationReport) -> list[dict[str, Any]]:
    """One row per labelled query (fixture order): area, the rank of the first relevant
    hit per retriever (None: a miss), staleness."""
    names = [s.name for s in report.retrievers]
    stale_queries = {(query, area) for _, query, area in report.stale_labels}
    ranks: dict[tuple[str, str], dict[str, int | None]] = {}
    for q in report.queries:
        ranks.setdefault((q.query, q.area), {})[q.retriever] = q.first_relevant_rank
    return [
        {
            "query": query,
            "area": area,
            **{name: by_name.get(name) for name in names},
            "stale_label": (query, area) in stale_queries,
        }
        for (query, area), by_name in ranks.items()
    ]


def _rank_table(report: EvaluationReport) -> list[str]:
    """Rank of the first relevant hit per query and retriever ("—" for a miss)."""
    names = [s.name for s in report.retrievers]
    lines = [
        "| query | area | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for row in query_rows(report):
        cells = ["—" if row[name] is None else str(row[name]) for name in names]
        row_text = [md_text(row["query"]), md_text(row["area"]), *cells]
        lines.append("| " + " | ".join(row_text) + " |")
    return lines


def per_query_frame(report: EvaluationReport) -> pd.DataFrame:
    """One row per query and retriever: rank of the first hit, each relevant id's rank,
    miss, the metrics and the top-10 ids (space-separated, so a CSV cell stays one cell)."""
    import pandas as pd

    rows = [
        {
            "query": q.query,
            "area": q.area,
            "retriever": q.retriever,
            "first_rank": q.first_relevant_rank,
            "miss": q.miss,
            "ndcg_at_10": q.ndcg,
            "recall_at_10": q.recall,
            "rr": q.rr,
            "relevant_ranks": " ".join(
                f"{chunk}:{'-' if rank is None else rank}"
                for chunk, rank in q.relevant_ranks.items()
            ),
            "top_ids": " ".join(q.top_ids),
            "mode": q.mode,
        }
        for q in report.queries
    ]
    frame = pd.DataFrame(rows, columns=list(rows[0]) if rows else ["query"])
    if rows:
        frame["first_rank"] = frame["first_rank"].astype("Int64")
    return frame


#: The changes table's columns with their types (string, int), in order.
CHANGES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("retriever", "string"),
    ("query", "string"),
    ("area", "string"),
    ("change", "string"),
    ("rank_before", "int"),
    ("rank_after", "int"),
    ("lost", "string"),
    ("gained", "string"),
    ("entered", "string"),
    ("entered_new", "int"),
)
_CHANGE_ORDER = {"became a miss": 0, "lost relevant hits": 1, "moved down": 2}


def changes_rows(comparison: Comparison) -> list[list[Any]]:
    """One row per changed query (regressions first, otherwise in the comparison's order),
    values in `CHANGES_COLUMNS` order; a rank that does not exist is None, the chunks that
    entered its top 10 are joined in one cell. Plain lists, so the evaluation check's table
    (usually empty) costs no pandas import."""
    changes = sorted(comparison.changes, key=lambda c: _CHANGE_ORDER.get(c.kind, 9))
    return [
        [
            c.retriever, c.query, c.area, c.kind, c.rank_before, c.rank_after,
            ", ".join(c.lost), ", ".join(c.gained),
            "; ".join(origin.describe() for origin in c.entered),
            sum(1 for o in c.entered if o.new_since_baseline),
        ]
        for c in changes
    ]  # fmt: skip


def changes_frame(comparison: Comparison) -> pd.DataFrame:
    """`changes_rows` as a DataFrame (for `eval --csv` and the terminal): ranks as
    nullable integers."""
    import pandas as pd

    frame = pd.DataFrame(
        changes_rows(comparison), columns=[name for name, _ in CHANGES_COLUMNS]
    )
    frame["rank_before"] = frame["rank_before"].astype("Int64")
    frame["rank_after"] = frame["rank_after"].astype("Int64")
    frame["entered_new"] = frame["entered_new"].astype("int64")
    return frame


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


def known_item_summary(known: KnownItemVerdict | None) -> dict[str, Any] | None:
    """The known-item check as plain JSON, for `eval --json` and each `eval --history`
    entry: found@10 overall and per area, and per area what was lost (chunks, known
    items' text, retrieval) and the verdict, with the baseline compared with and the
    check's own lines. found@10 is None where nothing was asked (a 0 would read as a
    fall). None when the evaluation had no known-item check (an older record)."""
    if known is None:
        return None
    areas: dict[str, dict[str, Any]] = {}
    for a in known.areas:
        lost_chunks = a.chunks_before - a.chunks_now
        areas[a.area] = {
            "asked_in": a.asked_in,
            "items": a.items,
            "found_before": a.found_before,
            "found_now": a.found_now,
            "found_at_10": round(a.found_at_10, 4) if a.items else None,
            "found_at_10_before": round(a.found_at_10_before, 4) if a.items else None,
            "change": a.change,
            "change_low": a.change_low,
            "change_high": a.change_high,
            "chunks_before": a.chunks_before,
            "chunks_now": a.chunks_now,
            "chunk_loss": round(lost_chunks / a.chunks_before, 4) if a.chunks_before else 0.0,
            "lost_content": a.lost_content,
            "known_item_loss": round(a.lost_content / a.items, 4) if a.items else 0.0,
            "lost_retrieval": a.lost_retrieval,
            "verdict": a.verdict,
        }
    return {
        "baseline": known.status,
        "found": known.found,
        "asked": known.asked,
        "found_at_10": round(known.found / known.asked, 4) if known.asked else None,
        "areas": areas,
        "failures": list(known.failures),
        "warnings": list(known.warnings),
        "notes": list(known.notes),
    }


def _known_item_columns(entry: Mapping[str, Any], row: dict[str, Any]) -> None:
    """found@10 overall, and how many areas lost something, for one history row."""
    known = entry.get("known_items")
    if not isinstance(known, Mapping):
        return
    if known.get("found_at_10") is not None:
        row["known_items.found_at_10"] = round(float(known["found_at_10"]), 3)
    found = known.get("areas")
    areas: list[Mapping[str, Any]] = (
        [a for a in found.values() if isinstance(a, Mapping)] if isinstance(found, Mapping) else []
    )
    row["known_items.lost_content"] = sum(int(a.get("lost_content", 0)) for a in areas)
    row["known_items.blocked_areas"] = sum(1 for a in areas if a.get("verdict") == "block")


def history_frame(publications: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per past publication (newest first): when, how, figures with intervals."""
    import pandas as pd

    rows = []
    for entry in publications:
        figures = entry.get("figures") or {}
        intervals = entry.get("intervals") or {}
        row: dict[str, Any] = {
            "when": entry.get("when"),
            "kind": entry.get("kind"),
            "queries": _count(figures.get("queries")),
        }
        for retriever in ("bm25", "hybrid"):
            for metric in _HISTORY_METRICS:
                name = f"{retriever}.{metric}"
                if name not in figures:
                    continue
                value = figures[name]
                row[name] = _count(value) if metric == "misses" else round(float(value), 3)
                low_high = intervals.get(name)
                if isinstance(low_high, list | tuple) and len(low_high) == 2:
                    row[f"{name}.ci"] = f"{low_high[0]:.3g}–{low_high[1]:.3g}"
        _known_item_columns(entry, row)
        row["store"] = str(entry.get("store_sha256") or "")[:12]
        row["note"] = entry.get("note") or ""
        rows.append(row)
    return pd.DataFrame(rows)


def summary_lines(outcome: Any, *, markdown: bool = False) -> list[str]:
    """The few lines a person reads first: regressions, baseline, figures with intervals,
    whether a difference is out of the noise, and what the fixture is too small to see.

    `outcome` is a service.EvaluationOutcome with `regression` and `intervals` set; the
    regressions and warnings named are its verdict's.
    """
    from brain_pipeline.evaluation.bootstrap import too_small_note

    regression = outcome.regression
    lines: list[str] = []
    if regression is None or outcome.report is None:
        return lines
    retriever = regression.retriever or "bm25"
    lines.append(regression.status)
    # The terminal's verdict line names blocking regressions already: not twice there.
    verdict = outcome.verdict
    blocking = [r.message for r in verdict.regressions if r.blocking] if markdown else []
    lines.extend([*blocking, *verdict.warnings])
    comparison = regression.comparison
    if comparison is not None:
        gated = {(c.retriever, c.query, c.area) for c in comparison.new_misses(retriever)}
        others = [c for c in comparison.changes if (c.retriever, c.query, c.area) not in gated]
        if others:
            worse = sum(1 for c in others if c.regression)
            lines.append(
                f"{len(others)} other per-query change(s) ({worse} for the worse), "
                "see the changes table" + ("" if markdown else " (--per-query)")
            )
        lines.extend(comparison.notes)
    figure = outcome.intervals.get(f"{retriever}.ndcg_at_10")
    if figure is not None:
        text = (
            f"{retriever} nDCG@10 {figure.value:.3f} (95% {figure.low:.3f}–{figure.high:.3f})"
        )
        diff = comparison.differences.get(f"{retriever}.ndcg_at_10") if comparison else None
        if diff is not None:
            verdict = (
                "within the noise" if diff.low <= 0 <= diff.high else "outside the noise"
            )
            text += (
                f"; vs baseline {diff.value:+.3f} (paired 95% {diff.low:+.3f}–{diff.high:+.3f}, "
                f"{verdict})"
            )
        lines.append(text)
        n = sum(1 for q in outcome.report.queries if q.retriever == retriever)
        lines.append(too_small_note(n, outcome.intervals, retriever))
    if markdown:  # query texts and area names are in there: literal text, not Markdown
        return ["- " + md_text(line) for line in lines]
    return lines
