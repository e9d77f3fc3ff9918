"""The tables people read: per-query results, changes, past publications, and the summary
lines; each is checked cell by cell from plain report values."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from brain_pipeline.evaluation.bootstrap import Interval
from brain_pipeline.evaluation.compare import (
    BECAME_HIT,
    BECAME_MISS,
    LOST_HITS,
    MOVED_DOWN,
    ChunkOrigin,
    Comparison,
    QueryChange,
)
from brain_pipeline.evaluation.reports import (
    CHANGES_COLUMNS,
    changes_frame,
    changes_rows,
    history_frame,
    per_query_frame,
    summary_lines,
)
from brain_pipeline.evaluation.runner import EvaluationReport, QueryResult
from brain_pipeline.evaluation.verdict import EvaluationVerdict, Regression


def _result(query: str, rank: int | None, retriever: str = "bm25") -> QueryResult:
    return QueryResult(
        query=query,
        area="aws",
        retriever=retriever,
        first_relevant_rank=rank,
        recall=0.0 if rank is None else 1.0,
        rr=0.0 if rank is None else 1.0 / rank,
        ndcg=0.0 if rank is None else 0.5,
        top_ids=["aaaaaaaaaaaa", "bbbbbbbbbbbb"],
        mode="lexical",
        relevant_ranks={"bbbbbbbbbbbb": rank, "cccccccccccc": None},
        miss=rank is None,
    )


def _report(*queries: QueryResult) -> EvaluationReport:
    return EvaluationReport([], list(queries), [], [], 10, "eval.json")


def test_per_query_rows_keep_ranks_as_integers_and_ids_in_one_cell() -> None:
    frame = per_query_frame(_report(_result("vpc", 2), _result("s3", None)))
    assert list(frame.columns) == [
        "query", "area", "retriever", "first_rank", "miss", "ndcg_at_10", "recall_at_10",
        "rr", "relevant_ranks", "top_ids", "mode",
    ]  # fmt: skip
    assert str(frame["first_rank"].dtype) == "Int64"  # a miss does not turn ranks to floats
    assert frame["first_rank"].iloc[0] == 2 and frame["first_rank"].iloc[1] is pd.NA
    assert frame["relevant_ranks"].tolist() == [
        "bbbbbbbbbbbb:2 cccccccccccc:-",
        "bbbbbbbbbbbb:- cccccccccccc:-",
    ]
    assert frame["top_ids"].iloc[0] == "aaaaaaaaaaaa bbbbbbbbbbbb"
    assert frame["miss"].tolist() == [False, True] and frame["rr"].iloc[0] == 0.5


def test_no_queries_is_an_empty_table() -> None:
    frame = per_query_frame(_report())
    assert frame.empty and list(frame.columns) == ["query"]


def _change(query: str, kind: str, before: int | None, after: int | None) -> QueryChange:
    entered = (
        ChunkOrigin("dddddddddddd", "aws/new.md", new_since_baseline=True),
        ChunkOrigin("eeeeeeeeeeee", "aws/old.md", new_since_baseline=False),
    )
    return QueryChange("bm25", query, "aws", kind, before, after, ("bbbbbbbbbbbb",), (), entered)


def test_changes_put_regressions_first_in_order_of_harm() -> None:
    comparison = Comparison(
        shared=4,
        only_now=0,
        only_baseline=0,
        changes=(
            _change("up", BECAME_HIT, None, 1),
            _change("down", MOVED_DOWN, 1, 6),
            _change("gone", BECAME_MISS, 1, None),
            _change("lost", LOST_HITS, 1, 2),
        ),
        differences={},
    )
    frame = changes_frame(comparison)
    assert frame["query"].tolist() == ["gone", "lost", "down", "up"]
    assert str(frame["rank_before"].dtype) == "Int64" == str(frame["rank_after"].dtype)
    assert frame["rank_after"].iloc[0] is pd.NA and frame["rank_after"].iloc[2] == 6
    assert frame["entered_new"].tolist() == [1, 1, 1, 1] and frame["lost"].iloc[0] == "bbbbbbbbbbbb"
    assert frame["entered"].iloc[0] == (
        "dddddddddddd (new since the baseline, aws/new.md); eeeeeeeeeeee (older, aws/old.md)"
    )


def test_change_rows_are_plain_values_in_the_frames_order() -> None:
    comparison = Comparison(
        shared=3,
        only_now=0,
        only_baseline=0,
        changes=(
            _change("up", BECAME_HIT, None, 1),
            _change("gone", BECAME_MISS, 1, None),
            _change("down", MOVED_DOWN, 1, 6),
        ),
        differences={},
    )
    rows = changes_rows(comparison)
    names = [name for name, _ in CHANGES_COLUMNS]
    assert [row[names.index("query")] for row in rows] == ["gone", "down", "up"]
    assert rows[0][names.index("rank_after")] is None and rows[1][names.index("rank_after")] == 6
    assert all(len(row) == len(names) for row in rows)
    # the frame for `eval --csv` holds the same cells, under the same column types
    frame = changes_frame(comparison)
    assert frame.columns.tolist() == names
    assert frame.astype(object).where(frame.notna(), None).values.tolist() == rows
    kinds = {"Int64": "int", "int64": "int", "object": "string", "str": "string"}
    assert [(n, kinds[str(t)]) for n, t in frame.dtypes.items()] == list(CHANGES_COLUMNS)


def test_change_rows_import_no_pandas() -> None:
    # the evaluation check builds this table on every run: pandas (about a second to
    # import) must stay off that path
    program = (
        "import sys\n"
        "from brain_pipeline.evaluation.compare import Comparison\n"
        "from brain_pipeline.evaluation.reports import changes_rows\n"
        "import brain_pipeline.steps.evaluate\n"
        "assert changes_rows(Comparison(3, 0, 0, (), {})) == []\n"
        "print('pandas' in sys.modules)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", program], cwd=repo, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_no_changes_is_an_empty_table_with_its_columns() -> None:
    frame = changes_frame(Comparison(3, 0, 0, (), {}))
    assert frame.empty and "entered_new" in frame.columns


def test_history_rows_round_figures_and_show_intervals() -> None:
    frame = history_frame(
        [
            {
                "when": "2026-03-02T00:00:00Z",
                "kind": "publish",
                "figures": {"queries": 20.0, "bm25.ndcg_at_10": 0.81234, "bm25.misses": 2.0},
                "intervals": {"bm25.ndcg_at_10": [0.7, 0.9123], "bm25.misses": "broken"},
                "store_sha256": "0123456789abcdef0123",
                "note": "first",
            },
            {"when": "2026-03-01T00:00:00Z", "kind": "baseline"},  # an old, sparse entry
        ]
    )
    first = frame.iloc[0].to_dict()
    assert first["queries"] == 20 and first["bm25.ndcg_at_10"] == 0.812
    assert first["bm25.misses"] == 2 and first["bm25.ndcg_at_10.ci"] == "0.7–0.912"
    assert "bm25.misses.ci" not in frame.columns and "hybrid.ndcg_at_10" not in frame.columns
    assert first["store"] == "0123456789ab" and first["note"] == "first"
    second = frame.iloc[1]
    assert second["store"] == "" and second["note"] == "" and pd.isna(second["queries"])


@dataclass
class _Regression:
    """What summary_lines reads of service.RegressionOutcome."""

    status: str
    comparison: Comparison | None
    retriever: str | None = "bm25"


@dataclass
class _Outcome:
    """What summary_lines reads of service.EvaluationOutcome."""

    report: EvaluationReport | None
    regression: _Regression | None
    intervals: dict[str, Interval] = field(default_factory=dict)
    verdict: EvaluationVerdict = field(default_factory=lambda: EvaluationVerdict("PASS"))


def _outcome(*, diff: Interval) -> _Outcome:
    comparison = Comparison(
        shared=2,
        only_now=0,
        only_baseline=0,
        changes=(_change("gone", BECAME_MISS, 1, None), _change("down", MOVED_DOWN, 1, 6)),
        differences={"bm25.ndcg_at_10": diff},
        notes=("bm25 answered in mode lexical now",),
    )
    regression = _Regression("compared 2 queries with the baseline of 2026-03-01", comparison)
    # the verdict judged "gone" a blocking regression and could not read the history
    verdict = EvaluationVerdict(
        "ERROR",
        failures=("regression: gone",),
        warnings=("could not read the history",),
        regressions=(Regression("bm25", "gone", "aws", "regression: gone", blocking=True),),
    )
    intervals = {"bm25.ndcg_at_10": Interval(0.5, 0.4, 0.6)}
    report = _report(_result("gone", None), _result("down", 6))
    return _Outcome(report, regression, intervals, verdict)


def test_summary_for_the_terminal_names_warnings_other_changes_and_the_noise() -> None:
    lines = summary_lines(_outcome(diff=Interval(-0.1, -0.2, 0.05)))
    assert lines[:4] == [
        "compared 2 queries with the baseline of 2026-03-01",
        "could not read the history",  # the failures are on the verdict line already
        "1 other per-query change(s) (1 for the worse), see the changes table (--per-query)",
        "bm25 answered in mode lexical now",
    ]
    assert lines[4] == (
        "bm25 nDCG@10 0.500 (95% 0.400–0.600); vs baseline -0.100 "
        "(paired 95% -0.200–+0.050, within the noise)"
    )
    assert lines[5].startswith("2 queries: ±0.10 on bm25 nDCG@10")
    assert len(lines) == 6


def test_summary_in_markdown_lists_failures_as_bullets_and_a_real_difference() -> None:
    lines = summary_lines(_outcome(diff=Interval(-0.3, -0.4, -0.2)), markdown=True)
    assert lines[1:3] == ["- regression: gone", "- could not read the history"]
    assert lines[3].endswith("see the changes table")
    assert all(line.startswith("- ") for line in lines)
    assert "outside the noise" in lines[5]
    touching = summary_lines(_outcome(diff=Interval(-0.1, -0.2, 0.0)), markdown=True)
    assert "within the noise" in touching[5]  # an interval reaching 0 cannot rule it out


def test_no_summary_without_a_regression_outcome() -> None:
    assert summary_lines(_Outcome(None, None)) == []
    no_report: Any = _Outcome(None, _Regression("no baseline", None))
    assert summary_lines(no_report) == []
