"""The publish gate holds on every launch path, not only inside the run a check failed in.

Dagster skips the steps below a failed blocking check only in that check's run. A later
run that selects the publish asset without the check (a UI launch of the asset, a job
run of it alone, a selection below the store) must still publish nothing the check
failed: the publish step refuses unless every blocking check recorded a pass on exactly
the bytes it would publish. Here the store is over the agent's string limit, set low in
the project's configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from brain_pipeline.definitions import build_definitions
from brain_pipeline.steps.health import BLOCKING_CHECK_KEYS
from brain_pipeline_tests.defs.conftest import Project, edit_corpus, make_tiny_project
from brain_pipeline_tests.defs.gate_job import reingest_job

PUBLISHED = dg.AssetKey("published_local")
LIMIT = "publish.agent_string_limit"
TOO_SMALL = 100
"""UTF-16 units: every store of the tiny corpus is longer."""
EDIT = "A paragraph of the edit that the agent cannot load while the limit is low."


def _live_files(project: Project) -> dict[str, bytes]:
    """What the agent reads: the files of its storage folder."""
    root = project.published()
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _refusal(result: Any) -> str:
    """The publish step's failure, as Dagster recorded it."""
    (failure,) = [
        event
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.STEP_FAILURE
    ]
    assert failure.step_key == "published_local", failure.step_key
    return str(failure.step_failure_data.error.message)  # type: ignore[union-attr]


def test_every_blocking_check_of_the_definitions_is_required_by_the_gate() -> None:
    """A blocking check the gate does not know would be blocking in its own run only."""
    graph = build_definitions().resolve_asset_graph()
    blocking = {key.name for key in graph.asset_check_keys if graph.get_check_spec(key).blocking}
    assert blocking == {"retrieval_eval", *BLOCKING_CHECK_KEYS}


def test_a_launch_of_the_publish_asset_alone_is_refused_after_a_failed_blocking_check(
    tmp_path: Path,
) -> None:
    project = make_tiny_project(tmp_path)
    assert project.materialize().success
    before = _live_files(project)
    assert before, "the first run published nothing"

    project.write_config(**{LIMIT: TOO_SMALL})
    edit_corpus(project, EDIT)
    blocked = project.materialize()
    assert not blocked.success
    assert "fits_agent_string_limit" in " ".join(blocked.failed_checks)

    # As the UI launches one asset: the asset job, only published_local selected.
    defs = build_definitions(str(project.config_path))
    job = defs.resolve_implicit_global_asset_job_def()
    alone = job.execute_in_process(
        instance=project.instance, asset_selection=[PUBLISHED], raise_on_error=False
    )
    assert not alone.success
    refusal = _refusal(alone)
    assert (
        "publishing refused: refusing to publish: fits_agent_string_limit failed on this "
        "data: knowledge-store.json is " in refusal
    ), refusal
    assert refusal.rstrip().endswith("the agent cannot load it (force does not override it)")

    # A selection below the failed check: the evaluation runs and passes, the gate refuses.
    below = project.materialize("embeddings*")
    assert not below.success
    assert any(
        "fits_agent_string_limit failed on this data" in line for line in below.lines
    ), below.lines
    assert _live_files(project) == before

    # The limit raised again, a plain run publishes the edit: the gate is not stuck.
    project.write_config()
    assert project.materialize().success
    live = project.published() / "knowledge-store.json"
    assert EDIT in live.read_text(encoding="utf-8")


def test_force_publish_does_not_publish_a_store_the_agent_cannot_load(tmp_path: Path) -> None:
    project = make_tiny_project(tmp_path)
    project.write_config(**{LIMIT: TOO_SMALL})
    assert not project.materialize().success
    forced = project.materialize("embeddings*", force_publish=True, force_reason="test")
    assert not forced.success
    assert any("(force does not override it)" in line for line in forced.lines), forced.lines
    assert _live_files(project) == {}


def _raise(*_args: object, **_kwargs: object) -> object:
    raise RuntimeError("the check itself broke")


def test_force_publish_overrides_a_size_check_that_could_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check that raised measured nothing: refused, and what `--force-publish` is for."""
    project = make_tiny_project(tmp_path)
    monkeypatch.setattr("brain_pipeline.steps.health.fits_agent_string_limit", _raise)
    assert not project.materialize().success
    below = project.materialize("embeddings*")
    assert not below.success
    assert any(
        "fits_agent_string_limit failed on this data: the check could not run: RuntimeError"
        in line
        for line in below.lines
    ), below.lines
    assert _live_files(project) == {}
    assert project.materialize("embeddings*", force_publish=True, force_reason="test").success
    assert (project.published() / "knowledge-store.json").read_bytes() == (
        project.store_file.read_bytes()
    )


def test_a_re_execution_of_the_publish_step_of_a_failed_run_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schedule's job blocked by the size check, then the UI's "re-execute" of its
    publish step alone: the check is not part of the re-execution, its verdict is."""
    project = make_tiny_project(tmp_path)
    project.write_config(**{LIMIT: TOO_SMALL})
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config_path))
    job = dg.reconstructable(reingest_job)
    with dg.instance_for_test() as instance:
        with dg.execute_job(job, instance, raise_on_error=False) as failed:
            assert not failed.success
            started = {
                event.step_key
                for event in failed.all_events
                if event.event_type == dg.DagsterEventType.STEP_START
            }
            assert "published_local" not in started  # Dagster's blocking, in this run
        options = dg.ReexecutionOptions(failed.run_id, step_selection=["published_local"])
        with dg.execute_job(
            job, instance, reexecution_options=options, raise_on_error=False
        ) as again:
            assert not again.success
            assert "fits_agent_string_limit failed on this data" in _refusal(again)
    assert _live_files(project) == {}
