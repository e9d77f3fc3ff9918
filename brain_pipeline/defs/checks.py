"""Checks: the blocking `retrieval_eval` gate, and the end-of-graph currency check."""


from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.steps import (
    EVAL_FIXTURE,
    claim_build_dir,
    layout_for,
    store_chunks,
    table,
    to_metadata,
)

CHECK_NAME = "retrieval_eval"
def _evaluate(cfg: BrainConfig, run_id: str) -> dict[str, Any]:
    """Evaluate (or reuse the recorded outcome for identical inputs) and flatten what the
    check shows. `services.evaluate_build` is the one code path, shared with the CLI."""
    from brain_pipeline.evaluation.reports import summary_lines
    from brain_pipeline.evaluation.service import evaluate_build

    outcome = evaluate_build(cfg, run_id=run_id)
    report = outcome.report
    regression = outcome.regression
    comparison = regression.comparison if regression is not None else None
    return {
        "summary": summary_lines(outcome, markdown=True),
        "intervals": dict(outcome.intervals),
        "differences": dict(comparison.differences) if comparison is not None else {},
        "comparison": comparison,
        "baseline": regression.status if regression is not None else "—",
        "regression_failures": list(regression.failures) if regression is not None else [],
        "regression_warnings": list(regression.warnings) if regression is not None else [],
        "failures": list(outcome.failures),
        "figures": dict(outcome.flat_metrics),
        "markdown": outcome.markdown,
        "stale_ids": list(outcome.stale_ids),
        "thresholds": [
            {
                "retriever": row.retriever,
                "metric": row.metric,
                "value": row.value,
                "bound": row.bound,
                "kind": row.kind,
                "margin": row.margin,
            }
            for row in outcome.thresholds
        ],
        "queries": report.query_rows() if report is not None else [],
        "retrievers": [s.name for s in report.retrievers] if report is not None else [],
        "repair": _repair_proposal(cfg) if outcome.stale_ids else None,
        "reused": outcome.reused,
        "evaluated_at": outcome.evaluated_at,
        "key": outcome.record_key,
        "inputs": outcome.inputs,
    }


def _repair_proposal(cfg: BrainConfig) -> dict[str, Any]:
    """What `brain-pipeline fixture repair` would do, for the failing check's metadata."""
    from brain_pipeline.evaluation.fixture import load_fixture
    from brain_pipeline.evaluation.repair import propose_for_build
    from brain_pipeline.publishing.local import live_store_file

    layout = layout_for(cfg)
    proposal = propose_for_build(
        layout,
        store_chunks(layout),
        load_fixture(cfg.evaluation.fixture),
        fallback_stores=[live_store_file(cfg.publish_root())],
    )
    return {"metadata": proposal.to_metadata(), "rows": proposal.to_rows()}


def _check_metadata(cfg: BrainConfig, result: dict[str, Any]) -> dict[str, Any]:
    """Figures as numbers (one plot each), bounds and margins, tables with schemas.

    Counters that only mean something for a run that evaluated (not for a reused
    result) are left out of reused results, so plots are not flattened by repeats.
    """
    from brain_pipeline.lib.tables import frame_table

    verdict = (
        "FAILED" if result["failures"]
        else "WARN" if result.get("regression_warnings") else "PASSED"
    )
    # What a person reads before any table. Stored metadata comes back sorted by key, and
    # an upper-case key sorts before every lower-case one: "Summary" heads the list.
    metadata: dict[str, Any] = {
        "Summary": dg.MetadataValue.md(
            "\n".join([f"**{verdict}**", "", *result.get("summary", [])]) + "\n"
        )
    }
    metadata.update(to_metadata(dict(result["figures"])))
    # Intervals and differences as numbers, so the UI plots them across runs.
    for name, interval in dict(result.get("intervals") or {}).items():
        metadata[f"{name}.ci_low"] = dg.MetadataValue.float(round(interval.low, 4))
        metadata[f"{name}.ci_high"] = dg.MetadataValue.float(round(interval.high, 4))
    for name, diff in dict(result.get("differences") or {}).items():
        metadata[f"{name}.delta"] = dg.MetadataValue.float(round(diff.value, 4))
        metadata[f"{name}.delta_low"] = dg.MetadataValue.float(round(diff.low, 4))
        metadata[f"{name}.delta_high"] = dg.MetadataValue.float(round(diff.high, 4))
    comparison = result.get("comparison")
    if comparison is not None:
        from brain_pipeline.evaluation.reports import changes_frame

        metadata["changes"] = frame_table(changes_frame(comparison))
        metadata["regressions"] = dg.MetadataValue.int(
            len(result.get("regression_failures") or result.get("regression_warnings") or [])
        )
    verdicts = []
    for row in result["thresholds"]:
        name = f"{row['retriever']}.{row['metric']}"
        metadata[f"{name}.{row['kind']}"] = dg.MetadataValue.float(float(row["bound"]))
        metadata[f"{name}.margin"] = dg.MetadataValue.float(round(float(row["margin"]), 4))
        verdicts.append(
            [
                row["retriever"],
                row["metric"],
                round(float(row["value"]), 4),
                f"{'≥' if row['kind'] == 'min' else '≤'} {row['bound']:g}",
                round(float(row["margin"]), 4),
                "pass" if row["margin"] >= 0 else "FAIL",
            ]
        )
    metadata["thresholds"] = table(
        [
            ("retriever", "string"),
            ("metric", "string"),
            ("value", "float"),
            ("bound", "string"),
            ("margin", "float"),
            ("verdict", "string"),
        ],
        verdicts,
    )
    names = list(result.get("retrievers") or [])
    metadata["per_query"] = table(
        [("query", "string"), ("area", "string")]
        + [(f"{n}_rank", "int") for n in names]
        + [("stale_label", "bool")],
        [
            [q["query"], q["area"], *[q.get(n) for n in names], bool(q.get("stale_label"))]
            for q in result.get("queries") or []
        ],
    )
    metadata["evaluation"] = dg.MetadataValue.md(str(result["markdown"]))
    repair = result.get("repair")
    if repair:
        figures = dict(repair["metadata"])
        metadata["repair_proposal"] = dg.MetadataValue.md(str(figures.pop("repair_proposal")))
        metadata.update(to_metadata(figures))
        columns = ["query", "area", "old_id", "proposed_id", "similarity", "verdict"]
        metadata["repair_rows"] = table(
            [(name, "float" if name == "similarity" else "string") for name in columns],
            [[row.get(name) for name in columns] for row in repair["rows"]],
        )
    extra: dict[str, Any] = {
        "verdict": "passed" if not result["failures"] else "failed",
        "failures": "\n".join(result["failures"]) or "none",
        "stale_ids": ", ".join(result.get("stale_ids") or []) or "none",
        "evaluation_key": result.get("key") or "—",
        "reused": bool(result.get("reused")),
        "evaluated_at": result.get("evaluated_at") or "—",
        "fixture": str(cfg.evaluation.fixture),
        "baseline": result.get("baseline") or "—",
        "on_regression": cfg.evaluation.on_regression,
    }
    inputs = dict(result.get("inputs") or {})
    for name in ("store_sha256", "embeddings_sha256", "fixture_sha256"):
        if name in inputs:
            extra[name] = inputs[name] or "—"
    metadata.update(to_metadata(extra))
    return metadata


def build_retrieval_eval(cfg: BrainConfig) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset="embeddings",
        name=CHECK_NAME,
        blocking=True,
        additional_deps=[EVAL_FIXTURE],
        description=(
            "Runs the labelled fixture through the legacy baseline, BM25 and hybrid retrieval "
            "on the built store and vectors. Fails (ERROR, blocking) when a threshold from "
            "corpus_config.yaml is missed, when the fixture names chunks the store no longer "
            "has, when the store is empty, or when a query the agent's retriever answered at "
            "the last publication is now a miss (evaluation.on_regression: block; warn makes "
            "it a WARN) — and then nothing downstream is published. A "
            "result whose inputs (store, vectors, fixture, thresholds, code) are unchanged is "
            "reused and says so."
        ),
    )
    def retrieval_eval(
        context: dg.AssetCheckExecutionContext, settings: BrainSettings
    ) -> dg.AssetCheckResult:
        cfg = settings.load()
        claim_build_dir(context.instance, cfg.build_dir)
        result = _evaluate(cfg, context.run.run_id)
        failures: list[str] = list(result["failures"])
        warnings: list[str] = list(result.get("regression_warnings") or [])
        metadata = _check_metadata(cfg, result)
        # The reason goes last in the step's log, so it is what a person reads at the end of
        # the run page (Dagster's own trailing error cannot be changed).
        for warning in warnings:
            context.log.warning(f"retrieval_eval: {warning}")
        for failure in failures:
            context.log.error(f"retrieval_eval: {failure}")
        # on_regression: warn -> a WARN-severity failure: shown, named, but not blocking.
        severity = (
            dg.AssetCheckSeverity.WARN if warnings and not failures
            else dg.AssetCheckSeverity.ERROR
        )
        description = "; ".join(failures or warnings) or "passed"
        return dg.AssetCheckResult(
            passed=not failures and not warnings,
            severity=severity,
            metadata=metadata,
            description=description[:1500]
            + (" (unchanged inputs: result reused)" if result["reused"] else ""),
        )

    return retrieval_eval


@dg.definitions
def evaluation_definitions() -> dg.Definitions:
    """The blocking retrieval evaluation that gates publishing."""
    return dg.Definitions(asset_checks=[build_retrieval_eval(location_config())])
