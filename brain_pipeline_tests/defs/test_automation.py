"""The schedule, the observation sensor and declarative automation, driven by Dagster's helpers."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import dagster as dg

from brain_pipeline.definitions import build_definitions
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
    assert not first.run_requests
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
    assert not changed.run_requests  # the automation sensor launches runs, not this one

    after = _tick(defs, instance, changed.cursor)
    assert not after.asset_events


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


def _requested(result: dg.EvaluateAutomationConditionsResult) -> set[str]:
    return {key for key in MATERIALIZED if result.get_num_requested(dg.AssetKey(key))}


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
