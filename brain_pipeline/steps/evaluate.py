"""The `retrieval_eval` check's step: evaluate the build (or reuse the recorded report
for identical inputs) and show its verdict, as plain values.

`evaluation.service.evaluate_store_dir` is the one code path, shared with `brain-pipeline
eval`, and `evaluation.verdict.EvaluationVerdict` the one judgement; this module only maps the
verdict's severity onto the check's and lays out what the check shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.steps.report import CheckVerdict, Markdown, Table

if TYPE_CHECKING:
    from brain_pipeline.steps.contract import Build


def evaluate_for_check(cfg: BrainConfig, build: Build, run_id: str) -> CheckVerdict:
    """The blocking check's result on `build` (as the hand-off passes it), read off the
    verdict: PASS passes; WARN fails as a WARN (shown and named, not blocking); ERROR
    fails and blocks."""
    from brain_pipeline.evaluation.service import evaluate_store_dir

    outcome = evaluate_store_dir(cfg, build.layout.build_dir, run_id=run_id)
    verdict = outcome.verdict
    description = "; ".join(verdict.failures or verdict.warnings) or "passed"
    return CheckVerdict(
        passed=verdict.passed,
        severity="WARN" if verdict.severity == "WARN" else "ERROR",
        description=description[:1500]
        + (" (unchanged inputs: result reused)" if outcome.reused else ""),
        metadata=check_metadata(cfg, outcome),
        errors=list(verdict.failures),
        warnings=list(verdict.warnings),
    )


def _repair_proposal(cfg: BrainConfig) -> dict[str, Any]:
    """What `brain-pipeline fixture repair` would do, for the failing check's metadata."""
    from brain_pipeline.corpus.store_reader import open_store_view
    from brain_pipeline.evaluation.fixture.model import load_fixture
    from brain_pipeline.evaluation.fixture.repair import propose_for_build
    from brain_pipeline.evaluation.fixture.repair_render import proposal_metadata, proposal_rows
    from brain_pipeline.publishing.local import live_store_file

    layout = cfg.layout
    proposal = propose_for_build(
        layout,
        open_store_view(layout.store_file, layout).all_chunks(),
        load_fixture(cfg.evaluation.fixture),
        fallback_stores=[live_store_file(cfg.publish_root())],
    )
    return {"metadata": proposal_metadata(proposal), "rows": proposal_rows(proposal)}


def _threshold_table(outcome: Any, values: dict[str, Any]) -> Table:
    verdicts = []
    for row in outcome.verdict.thresholds:
        name = f"{row.retriever}.{row.metric}"
        values[f"{name}.{row.kind}"] = float(row.bound)
        values[f"{name}.margin"] = round(float(row.margin), 4)
        verdicts.append(
            [
                row.retriever,
                row.metric,
                round(float(row.value), 4),
                f"{'≥' if row.kind == 'min' else '≤'} {row.bound:g}",
                round(float(row.margin), 4),
                "pass" if row.passed else "FAIL",
            ]
        )
    columns = [
        ("retriever", "string"),
        ("metric", "string"),
        ("value", "float"),
        ("bound", "string"),
        ("margin", "float"),
        ("verdict", "string"),
    ]
    return Table(columns, verdicts)


def _per_query_table(outcome: Any) -> Table:
    from brain_pipeline.evaluation.reports import query_rows

    report = outcome.report
    names = [s.name for s in report.retrievers] if report is not None else []
    rows = query_rows(report) if report is not None else []
    return Table(
        [("query", "string"), ("area", "string")]
        + [(f"{n}_rank", "int") for n in names]
        + [("stale_label", "bool")],
        [[q["query"], q["area"], *[q.get(n) for n in names], bool(q.get("stale_label"))]
         for q in rows],
    )


def check_metadata(cfg: BrainConfig, outcome: Any) -> dict[str, Any]:
    """Figures as numbers (one plot each), bounds and margins, tables with schemas.

    Counters that only mean something for a run that evaluated (not for a reused
    result) are left out of reused results, so plots are not flattened by repeats.
    """
    from brain_pipeline.evaluation.reports import CHANGES_COLUMNS, changes_rows, summary_lines

    regression = outcome.regression
    comparison = regression.comparison if regression is not None else None
    verdict = outcome.verdict
    word = {"ERROR": "FAILED", "WARN": "WARN", "PASS": "PASSED"}[verdict.severity]
    # What a person reads before any table. Stored metadata comes back sorted by key, and
    # an upper-case key sorts before every lower-case one: "Summary" heads the list.
    values: dict[str, Any] = {
        "Summary": Markdown(
            "\n".join([f"**{word}**", "", *summary_lines(outcome, markdown=True)]) + "\n"
        )
    }
    values.update(outcome.flat_metrics)
    # Intervals and differences as numbers, so the UI plots them across runs.
    for name, interval in dict(outcome.intervals).items():
        values[f"{name}.ci_low"] = round(float(interval.low), 4)
        values[f"{name}.ci_high"] = round(float(interval.high), 4)
    if comparison is not None:
        for name, diff in dict(comparison.differences).items():
            values[f"{name}.delta"] = round(float(diff.value), 4)
            values[f"{name}.delta_low"] = round(float(diff.low), 4)
            values[f"{name}.delta_high"] = round(float(diff.high), 4)
        values["changes"] = Table(list(CHANGES_COLUMNS), changes_rows(comparison))
        values["regressions"] = len(verdict.regressions)
    _known_item_metadata(verdict.known_items, values)
    values["thresholds"] = _threshold_table(outcome, values)
    values["per_query"] = _per_query_table(outcome)
    values["evaluation"] = Markdown(str(outcome.markdown))
    if outcome.stale_ids:
        repair = _repair_proposal(cfg)
        figures = dict(repair["metadata"])
        values["repair_proposal"] = Markdown(str(figures.pop("repair_proposal")))
        values.update(figures)
        columns = ["query", "area", "old_id", "proposed_id", "similarity", "verdict"]
        values["repair_rows"] = Table(
            [(name, "float" if name == "similarity" else "string") for name in columns],
            [[row.get(name) for name in columns] for row in repair["rows"]],
        )
    values.update(
        {
            "verdict": "passed" if not verdict.failures else "failed",
            "severity": verdict.severity,
            "headline": verdict.headline(),
            "failures": "\n".join(verdict.failures) or "none",
            "stale_ids": ", ".join(outcome.stale_ids) or "none",
            "evaluation_key": outcome.record_key or "—",
            "reused": bool(outcome.reused),
            "evaluated_at": outcome.evaluated_at or "—",
            "fixture": str(cfg.evaluation.fixture),
            "baseline": (regression.status if regression is not None else None) or "—",
            "on_regression": cfg.evaluation.on_regression,
        }
    )
    inputs = dict(outcome.inputs or {})
    for name in ("store_sha256", "embeddings_sha256", "fixture_sha256"):
        if name in inputs:
            values[name] = inputs[name] or "—"
    return values


def known_item_figures(known: Any) -> dict[str, float]:
    """found@10 overall and per area as numbers: on the evaluation's check and on each
    publication (published_local), whose asset page plots them over publications. Areas
    with no known items (nothing distinctive to ask) get none."""
    if known is None or not known.asked:  # no items: no figure (a 0 would plot as a fall)
        return {}
    figures = {"known_items.found_at_10": round(known.found / known.asked, 4)}
    for area in known.areas:
        if area.items:
            figures[f"known_items.{area.area}.found_at_10"] = round(float(area.found_at_10), 4)
    return figures


def _known_item_metadata(known: Any, values: dict[str, Any]) -> None:
    """found@10 per area as numbers (the check's page plots each over evaluations), the
    per-area table, and the line naming the known-item baseline."""
    if known is None:
        return
    from brain_pipeline.evaluation.known_item_gate import TABLE_COLUMNS, table_rows

    values["known_items.baseline"] = known.status
    if not known.areas:
        return
    values.update(known_item_figures(known))
    for area in known.areas:
        values[f"known_items.{area.area}.lost_content"] = int(area.lost_content)
        values[f"known_items.{area.area}.lost_retrieval"] = int(area.lost_retrieval)
    values["known_items"] = Table(list(TABLE_COLUMNS), table_rows(known))
