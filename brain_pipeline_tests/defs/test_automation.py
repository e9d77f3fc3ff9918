"""The schedule, the observation sensor and declarative automation, driven by Dagster's helpers."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import dagster as dg

from brain_pipeline.definitions import build_definitions
from brain_pipeline.lib.conditions import (
    UNCONSUMED_LABEL,
    consumed_corpus_version,
    true_labels,
)
from brain_pipeline.lib.dagster_private import evaluation_tree
from brain_pipeline.lib.steps import latest_corpus_observation
from brain_pipeline_tests.defs.conftest import Project, edit_corpus, observe_with_sensor

MATERIALIZED = ["knowledge_chunks", "knowledge_store", "embeddings", "published_local"]


def _tick(
    defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None
) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def("corpus_observation_sensor")
    context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def _observed(result: dg.SensorResult) -> dict[str, str]:
    return {
        event.asset_key.to_user_string(): str(event.tags["dagster/data_version"])
        for event in result.asset_events or []
        if isinstance(event, dg.AssetObservation)
    }


def _defs(project: Project) -> dg.Definitions:
    return build_definitions(str(project.config_path))


def test_schedule_runs_the_whole_job_with_both_observations(tiny_project: Project) -> None:
    defs = _defs(tiny_project)
    schedule = defs.resolve_schedule_def("reingest_schedule")
    when = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    context = dg.build_schedule_context(
        instance=tiny_project.instance, scheduled_execution_time=when
    )
    data = schedule.evaluate_tick(context)
    assert data.run_requests is not None and len(data.run_requests) == 1
    assert schedule.job_name == "reingest_job"
    result = defs.resolve_job_def("reingest_job").execute_in_process(
        instance=tiny_project.instance, tags=data.run_requests[0].tags
    )
    assert result.success
    checks = sorted(
        e.event_specific_data.asset_check_key.name  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    )
    assert checks == [
        "corpus_problems",
        "embedding_coverage",
        "embedding_gaps",
        "fits_agent_string_limit",
        "no_empty_area",
        "published_store_is_current",
        "retrieval_eval",
        "vectors_reach_agent",
    ]
    observed = {
        e.asset_key.to_user_string()  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    }
    assert observed == {"corpus", "eval_fixture"}
    assert (tiny_project.published() / "knowledge-store.json").exists()


def test_sensor_records_observations_only_when_a_digest_changes(tiny_project: Project) -> None:
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    first = _tick(defs, instance, None)
    assert set(_observed(first)) == {"corpus", "eval_fixture"}
    # The cursor holds two digests, never per-file state.
    assert first.cursor is not None and len(first.cursor) < 200

    quiet = _tick(defs, instance, first.cursor)
    assert not quiet.asset_events and not quiet.run_requests
    assert quiet.skip_reason is not None and "no change" in str(quiet.skip_reason.skip_message)

    notes = tiny_project.corpus / "alpha" / "notes.md"
    notes.write_text(notes.read_text() + "\nA newly added paragraph about route tables.\n")
    changed = _tick(defs, instance, quiet.cursor)
    assert set(_observed(changed)) == {"corpus"}
    assert _observed(changed)["corpus"] != _observed(first)["corpus"]
    # The observation records the versions before and after, for the tick and the UI.
    (event,) = changed.asset_events or []
    assert isinstance(event, dg.AssetObservation)
    assert event.metadata["data_version"].value == _observed(changed)["corpus"]
    assert event.metadata["previous_data_version"].value == _observed(first)["corpus"]

    after = _tick(defs, instance, changed.cursor)
    assert not after.asset_events


def test_one_edit_makes_one_run_launched_by_automation(tiny_project: Project) -> None:
    """The observation sensor only observes; automation is the one launcher, so an edit
    seen by the sensor and then by automation makes exactly one run, not two."""
    assert tiny_project.materialize().success
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    baseline = _tick(defs, instance, None)
    quiet = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert quiet.total_requested == 0

    edit_corpus(tiny_project)
    changed = _tick(defs, instance, baseline.cursor)
    assert set(_observed(changed)) == {"corpus"}
    assert not changed.run_requests  # the sensor launches nothing...
    assert changed.skip_reason is not None
    assert "automation_sensor launches" in str(changed.skip_reason.skip_message)
    # ...the tick's observation is stored as the daemon stores it...
    for event in changed.asset_events or []:
        instance.report_runless_asset_event(event)
    # ...and automation requests the one rebuild: every asset the edit affects, one run.
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=quiet.cursor)
    assert _requested(result) == set(MATERIALIZED)


def test_sensor_ignores_touches_and_files_the_pipeline_does_not_read(
    tiny_project: Project,
) -> None:
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    baseline = _tick(defs, instance, None)
    notes = tiny_project.corpus / "alpha" / "notes.md"
    stat = notes.stat()
    os.utime(notes, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    (tiny_project.corpus / "root-level-output.json").write_text("[]")
    (tiny_project.corpus / "alpha" / "raw").mkdir()
    (tiny_project.corpus / "alpha" / "raw" / "draft.md").write_text("draft text, skipped")
    (tiny_project.corpus / "alpha" / "image.png").write_bytes(b"\x89PNG")
    result = _tick(defs, instance, baseline.cursor)
    assert not result.asset_events


def test_a_corpus_change_makes_automation_rebuild_and_publish(tiny_project: Project) -> None:
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    assert tiny_project.materialize().success
    quiet = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert quiet.total_requested == 0
    edit_corpus(tiny_project)
    observe_with_sensor(tiny_project)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=quiet.cursor)
    assert _requested(result) == set(MATERIALIZED)
    # The evaluation joins that run: without it the publish step's gate refuses the edit.
    evaluation = dg.AssetCheckKey(dg.AssetKey("embeddings"), "retrieval_eval")
    (check,) = [r for r in result.results if r.key == evaluation]
    assert check.true_subset.size == 1


def _requested(result: dg.EvaluateAutomationConditionsResult) -> set[str]:
    return {key for key in MATERIALIZED if result.get_num_requested(dg.AssetKey(key))}


def test_an_observation_in_the_same_evaluation_as_a_materialisation_is_rebuilt(
    tiny_project: Project,
) -> None:
    """Issue 20: the previous run's materialisation of knowledge_chunks and the observation
    of an edit land between the same two evaluations. eager() counts the edit as handled
    by that materialisation (its reset wins over the dependency update) and requests
    nothing; the edit must still be rebuilt."""
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    assert tiny_project.materialize().success
    quiet = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert quiet.total_requested == 0

    assert tiny_project.materialize().success  # the previous run, read the old corpus
    edit_corpus(tiny_project)
    observe_with_sensor(tiny_project)  # the edit, observed before the next evaluation
    observed, _ = latest_corpus_observation(instance)
    assert observed is not None and observed != consumed_corpus_version(instance)

    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=quiet.cursor)
    assert _requested(result) == set(MATERIALIZED)
    (chunks,) = [r for r in result.results if r.key == dg.AssetKey("knowledge_chunks")]
    assert UNCONSUMED_LABEL in true_labels(evaluation_tree(chunks.serializable_evaluation))

    # Once a run has read the new version, nothing is requested again.
    assert tiny_project.materialize().success
    assert consumed_corpus_version(instance) == observed
    settled = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=result.cursor)
    assert settled.total_requested == 0


def test_an_observation_during_a_run_is_rebuilt_after_it(tiny_project: Project) -> None:
    """The edit is observed, and evaluated, while the chunks are being built (in progress,
    so nothing is requested); that run had read the old corpus. The evaluation after the
    run sees its materialisation (eager's reset) and must still request the rebuild."""
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    assert tiny_project.materialize().success
    quiet = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    edit_corpus(tiny_project)
    observe_with_sensor(tiny_project)
    during = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=quiet.cursor)
    assert _requested(during) == set(MATERIALIZED)  # requested here; say the run read v1:
    notes = tiny_project.corpus / "alpha" / "notes.md"
    edited = notes.read_text()
    notes.write_text(edited.replace("Route tables", "Route-tables"))  # what the run read
    assert tiny_project.materialize("knowledge_chunks+").success
    notes.write_text(edited)  # back to the observed version, which no run has read
    observe_with_sensor(tiny_project)
    after = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=during.cursor)
    assert "knowledge_chunks" in _requested(after)


def test_a_failed_chunk_run_is_not_relaunched_every_evaluation(tiny_project: Project) -> None:
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    assert tiny_project.materialize().success
    quiet = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    edit_corpus(tiny_project)
    observe_with_sensor(tiny_project)
    tiny_project.write_config(**{"corpus.path": str(tiny_project.root / "gone")})
    assert not tiny_project.materialize("knowledge_chunks").success
    tiny_project.write_config()
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=quiet.cursor)
    assert "knowledge_chunks" in _requested(first)  # eager, on the observation
    second = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert "knowledge_chunks" not in _requested(second)


def test_publishing_waits_for_the_blocking_check(tiny_project: Project) -> None:
    tiny_project.write_config(
        **{"evaluation.thresholds": {"bm25": {"min_ndcg_at_10": 1.0, "max_misses": 0}}}
    )
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    assert not tiny_project.materialize().success  # the check fails, publishing is blocked
    quiet = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    edit_corpus(tiny_project)
    observe_with_sensor(tiny_project)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=quiet.cursor)
    assert _requested(result) == {"knowledge_chunks", "knowledge_store", "embeddings"}
