"""retrieval_eval against the baseline of the last publication, on a real instance."""

from __future__ import annotations

from typing import Any

import dagster as dg

from brain_pipeline.evaluation.baseline import load_baseline
from brain_pipeline_tests.defs.conftest import Project
from brain_pipeline_tests.evaluation.helpers import memory_at

CHECK = dg.AssetCheckKey(dg.AssetKey("embeddings"), "retrieval_eval")


def _evaluation(project: Project) -> Any:
    record = project.instance.get_latest_asset_check_evaluation_record(CHECK)
    assert record is not None and record.event is not None and record.event.dagster_event
    return record.event.dagster_event.event_specific_data


def _bury_gliders(project: Project) -> None:
    """The planted edit: ten paragraphs that out-score the glider answer in area beta."""
    guide = project.corpus / "beta" / "guide.md"
    lines = [f"Patterns travel diagonally; diagonally travel patterns, {i}." for i in range(10)]
    guide.write_text(guide.read_text() + "\n" + "\n\n".join(lines) + "\n", encoding="utf-8")


def test_a_new_miss_blocks_the_publish_and_names_the_query(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    baseline = load_baseline(memory_at(tiny_project.build)).baseline
    assert baseline is not None and baseline.kind == "published"
    live = (tiny_project.published() / "knowledge-store.json").read_bytes()

    _bury_gliders(tiny_project)
    outcome = tiny_project.materialize()
    assert not outcome.success
    evaluation = _evaluation(tiny_project)
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert "'patterns that travel diagonally' (beta) became a miss" in evaluation.description
    assert "displaced by" in evaluation.description and "beta/guide.md" in evaluation.description
    assert (tiny_project.published() / "knowledge-store.json").read_bytes() == live

    metadata = evaluation.metadata
    assert sorted(metadata)[0] == "Summary"
    assert "became a miss" in metadata["Summary"].value
    changes = metadata["changes"]
    assert isinstance(changes, dg.TableMetadataValue) and changes.schema is not None
    columns = {c.name: c.type for c in changes.schema.columns}
    assert columns["rank_before"] == "int" and columns["change"] == "string"
    assert any(r.data["change"] == "became a miss" for r in changes.records)
    assert metadata["bm25.ndcg_at_10.delta"].value < 0
    low, high = metadata["bm25.ndcg_at_10.ci_low"].value, metadata["bm25.ndcg_at_10.ci_high"].value
    assert low <= metadata["bm25.ndcg_at_10"].value <= high

    # Publishing on its own refuses the same regression.
    alone = tiny_project.materialize("published_local")
    assert not alone.success
    assert (tiny_project.published() / "knowledge-store.json").read_bytes() == live


def test_warn_publishes_with_a_warning_naming_the_query(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    _bury_gliders(tiny_project)
    tiny_project.write_config(**{"evaluation.on_regression": "warn"})
    live = (tiny_project.published() / "knowledge-store.json").read_bytes()
    assert tiny_project.materialize().success
    evaluation = _evaluation(tiny_project)
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert "'patterns that travel diagonally' (beta) became a miss" in evaluation.description
    assert (tiny_project.published() / "knowledge-store.json").read_bytes() != live
    # The published store's evaluation is the new baseline: the next run is clean.
    assert tiny_project.materialize().success
    assert _evaluation(tiny_project).passed
