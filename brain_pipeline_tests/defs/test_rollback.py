"""`rollback_job`: a real in-process Dagster run on the project's ephemeral instance.

Pins that the job runs the same core as `brain-pipeline rollback` (the earlier bytes
live again in src, dist and the bucket, recorded as a restore with the job as its
trigger), that a refused rollback fails the run and changes nothing, and that
`release_hold_job` ends the hold. The restored publication is `published_local`'s own
materialisation (public API: a data version, not a hand-set tag), so its checks run on it.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from brain_pipeline.defs.rollback import rollback_run_config
from brain_pipeline_tests.defs.conftest import Project
from brain_pipeline_tests.defs.rollback_project import (
    live_everywhere,
    make_rollback_project,
    publications,
    publish_twice,
)
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server


@pytest.fixture
def project(tmp_path: Path, s3: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> Project:
    return make_rollback_project(tmp_path, monkeypatch)


def test_the_rollback_job_runs_the_same_core_from_dagster(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from brain_pipeline.definitions import build_definitions

    first, _ = publish_twice(project)
    job = build_definitions(str(project.config_path)).resolve_job_def("rollback_job")
    result = job.execute_in_process(
        run_config=rollback_run_config(1),
        instance=project.instance,
    )
    assert result.success
    assert set(live_everywhere(project)) == {first}
    listed = publications(capsys)
    assert listed["publications"][0]["restores"] == 1
    assert listed["publications"][0]["trigger"].startswith("rollback_job")
    refused = job.execute_in_process(
        run_config=rollback_run_config(1),
        instance=project.instance,
        raise_on_error=False,
    )
    assert not refused.success  # already live: refused, nothing changed
    assert set(live_everywhere(project)) == {first}


def test_release_hold_job_ends_the_hold(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    from brain_pipeline.definitions import build_definitions

    publish_twice(project)
    defs = build_definitions(str(project.config_path))
    rolled = defs.resolve_job_def("rollback_job").execute_in_process(
        run_config=rollback_run_config(), instance=project.instance
    )
    assert rolled.success and publications(capsys)["hold"] == 2
    released = defs.resolve_job_def("release_hold_job").execute_in_process(
        instance=project.instance
    )
    assert released.success
    listed = publications(capsys)
    assert listed["hold"] is None and listed["live"] == 3  # nothing was published by it


def test_the_catalog_shows_the_restored_publication_as_live(project: Project) -> None:
    """The rollback run materialises published_local (and published_s3) with the restored
    publication's own data version: the UI never shows the replaced store as live."""
    from brain_pipeline.definitions import build_definitions
    from brain_pipeline.lib.dagster_private import DATA_VERSION_TAG

    instance = project.instance

    def latest(asset: str) -> tuple[str | None, str | None]:
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
        assert event is not None and event.asset_materialization is not None
        return event.run_id, event.asset_materialization.tags.get(DATA_VERSION_TAG)

    project.materialize()
    first_version = {asset: latest(asset)[1] for asset in ("published_local", "published_s3")}
    publish_twice(project)
    assert latest("published_local")[1] != first_version["published_local"]
    job = build_definitions(str(project.config_path)).resolve_job_def("rollback_job")
    result = job.execute_in_process(
        run_config=rollback_run_config(1),
        instance=instance,
    )
    assert result.success
    for asset in ("published_local", "published_s3"):
        assert latest(asset) == (result.run_id, first_version[asset])


def test_the_restored_publication_is_judged_by_the_checks_of_published_local(
    project: Project,
) -> None:
    """The rollback run is a materialisation of `published_local` from its own step: its
    checks (vectors_reach_agent, published_store_is_current) evaluate the restored
    publication in the same run, and the catalog's data version is the restored one."""
    from brain_pipeline.definitions import build_definitions

    first, _ = publish_twice(project)
    job = build_definitions(str(project.config_path)).resolve_job_def("rollback_job")
    result = job.execute_in_process(run_config=rollback_run_config(1), instance=project.instance)
    assert result.success and set(live_everywhere(project)) == {first}
    checked = {
        evaluation.asset_check_key.name
        for evaluation in result.get_asset_check_evaluations()
        if evaluation.asset_key == dg.AssetKey("published_local")
    }
    assert {"vectors_reach_agent", "published_store_is_current"} <= checked, checked
    (materialised,) = result.asset_materializations_for_node("published_local")
    assert materialised.metadata["restored_publication"].value == 1
    assert materialised.metadata["status"].value == "rolled back"


def test_a_forced_rollback_without_a_reason_is_refused_by_the_job(project: Project) -> None:
    """The Launchpad path of a rollback: `force` without `reason` changes nothing."""
    from brain_pipeline.definitions import build_definitions

    _, second = publish_twice(project)
    job = build_definitions(str(project.config_path)).resolve_job_def("rollback_job")
    result = job.execute_in_process(
        run_config=rollback_run_config(1, force=True),
        instance=project.instance,
        raise_on_error=False,
    )
    assert not result.success and set(live_everywhere(project)) == {second}
