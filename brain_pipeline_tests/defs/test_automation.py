"""reingest_schedule and corpus_changed_sensor, evaluated with Dagster's own helpers."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import dagster as dg

from brain_pipeline.defs.definitions import build_definitions
from brain_pipeline_tests.defs.conftest import Project


def _tick(
    defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None
) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def("corpus_changed_sensor")
    context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def _defs(project: Project) -> dg.Definitions:
    return build_definitions(str(project.config_path))


def test_schedule_requests_a_reingest_run(tiny_project: Project) -> None:
    defs = _defs(tiny_project)
    schedule = defs.resolve_schedule_def("reingest_schedule")
    when = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    context = dg.build_schedule_context(
        instance=tiny_project.instance, scheduled_execution_time=when
    )
    data = schedule.evaluate_tick(context)
    assert data.run_requests is not None and len(data.run_requests) == 1
    assert schedule.job_name == "reingest_job"
    # Every asset and the check run: the job materialises the graph end to end.
    result = defs.resolve_job_def("reingest_job").execute_in_process(
        instance=tiny_project.instance, tags=data.run_requests[0].tags
    )
    assert result.success
    checks = [
        e.event_specific_data.asset_check_key.name  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    assert checks == ["retrieval_eval"]
    assert (tiny_project.published() / "knowledge-store.json").exists()


def test_sensor_baseline_then_no_change_then_one_run_per_change(tiny_project: Project) -> None:
    defs = _defs(tiny_project)
    instance = tiny_project.instance
    first = _tick(defs, instance, None)
    assert not first.run_requests
    assert first.skip_reason is not None and "baseline" in str(first.skip_reason.skip_message)

    quiet = _tick(defs, instance, first.cursor)
    assert not quiet.run_requests
    assert "no corpus change" in str(quiet.skip_reason.skip_message if quiet.skip_reason else "")

    notes = tiny_project.corpus / "alpha" / "notes.md"
    notes.write_text(notes.read_text() + "\nA newly added paragraph about route tables.\n")
    changed = _tick(defs, instance, quiet.cursor)
    assert changed.run_requests is not None and len(changed.run_requests) == 1
    request = changed.run_requests[0]
    assert request.run_key and request.run_key.startswith("corpus-")

    # The same state seen from the same starting cursor gives the same run key (dedupe).
    again = _tick(defs, instance, quiet.cursor)
    assert again.run_requests and again.run_requests[0].run_key == request.run_key
    # After the change is recorded, nothing more is requested.
    after = _tick(defs, instance, changed.cursor)
    assert not after.run_requests


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
    assert not result.run_requests
