"""`brain-pipeline materialize` is a Dagster run, and Dagster tells the truth about it.

Through the command's own entry point (`cli.main`), against the persistent instance the
UI reads: an edit makes one SUCCESS run that owns the latest materialisation and
observation; nothing changed starts no run; a blocking check that fails to run (raises)
blocks publishing exactly as one that fails; a WARN check that raises does not.
"""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.observation import corpus_digest
from brain_pipeline.lib.steps import latest_corpus_observation
from brain_pipeline_tests.defs.conftest import Project, cli_sees, edit_corpus, make_tiny_project

CHUNKS = dg.AssetKey("knowledge_chunks")
PUBLISHED = dg.AssetKey("published_local")


@pytest.fixture
def tiny_project(tmp_path: Path) -> Project:
    return make_tiny_project(tmp_path)


def _run_id(err: str) -> str:
    found = re.search(r"^(?:succeeded|FAILED): run ([0-9a-f-]{36}) ", err, re.MULTILINE)
    assert found, err
    return found.group(1)


def _instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.get()  # DAGSTER_HOME: the project's, set by cli_sees


def test_an_edit_makes_one_dagster_run_that_owns_the_latest_materialisation(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = cli_sees(tiny_project, monkeypatch)
    assert main(["materialize"]) == 0
    first = _run_id(capsys.readouterr().err)
    edit_corpus(project)
    assert main(["materialize"]) == 0
    second = _run_id(capsys.readouterr().err)
    assert second != first

    instance = _instance()
    try:
        run = instance.get_run_by_id(second)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        latest = instance.get_latest_materialization_event(CHUNKS)
        assert latest is not None and latest.run_id == second
        digest, observed_by = latest_corpus_observation(instance)
        assert digest == corpus_digest(project.corpus) and observed_by == second
        assert instance.get_latest_materialization_event(PUBLISHED).run_id == second  # type: ignore[union-attr]
        runs = len(instance.get_runs())

        # Nothing changed: no run starts.
        assert main(["materialize"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"up to date: nothing changed since run {second}")
        assert len(instance.get_runs()) == runs
    finally:
        instance.dispose()


def _raise(*_args: object, **_kwargs: object) -> object:
    raise RuntimeError("the check itself broke")


@pytest.mark.parametrize(
    ("check", "target"),
    [
        ("fits_agent_string_limit", "brain_pipeline.steps.health.fits_agent_string_limit"),
        ("retrieval_eval", "brain_pipeline.defs.checks.evaluate_for_check"),
    ],
)
def test_a_raising_blocking_check_publishes_nothing(
    tiny_project: Project,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    check: str,
    target: str,
) -> None:
    project = cli_sees(tiny_project, monkeypatch)
    monkeypatch.setattr(target, _raise)
    assert main(["materialize"]) == 1
    err = capsys.readouterr()
    summary = err.out + err.err
    assert "blocked  published_local" in summary, summary
    assert "blocked  published_s3" in summary, summary
    assert not project.publish_root.exists() or not any(project.publish_root.rglob("*.json"))

    instance = _instance()
    try:
        run = instance.get_run_by_id(_run_id(err.err))
        assert run is not None and run.status == dg.DagsterRunStatus.FAILURE
        assert instance.get_latest_materialization_event(PUBLISHED) is None
    finally:
        instance.dispose()


def _live(project: Project) -> dict[str, bytes]:
    root = project.publish_root
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_selection_below_a_failed_blocking_check_publishes_nothing(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Dagster blocks only in the run the check failed in; the next run, selecting what is
    below the store, meets the publish step's own gate."""
    project = cli_sees(tiny_project, monkeypatch)
    assert main(["materialize"]) == 0
    before = _live(project)
    project.write_config(**{"publish.agent_string_limit": 100})  # the store is ~600 units
    edit_corpus(project, "An edit that makes the store too long for this agent.")
    capsys.readouterr()

    assert main(["materialize"]) == 1
    assert "fits_agent_string_limit" in capsys.readouterr().out
    assert main(["materialize", "--select", "embeddings*"]) != 0
    said = capsys.readouterr()
    assert "fits_agent_string_limit failed on this data" in said.out + said.err
    assert _live(project) == before


def test_a_raising_warn_check_is_reported_and_blocks_nothing(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = cli_sees(tiny_project, monkeypatch)
    monkeypatch.setattr("brain_pipeline.steps.health.embedding_gaps", _raise)
    assert main(["materialize"]) == 0
    out = capsys.readouterr().out
    assert (
        "check    embedding_gaps: WARN the check could not run: RuntimeError: "
        "the check itself broke" in out
    ), out
    assert (project.published() / "knowledge-store.json").exists()


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        (None, "brain-pipeline materialize, from a script or cron (no terminal)"),
        ("nightly crontab on build-host", "nightly crontab on build-host"),
    ],
)
def test_a_command_line_run_says_who_started_it(
    tiny_project: Project,
    monkeypatch: pytest.MonkeyPatch,
    variable: str | None,
    expected: str,
) -> None:
    """Not "by hand" for a run cron started: without a terminal the command says so, and
    BRAIN_TRIGGER (set in the crontab line) names the caller."""
    cli_sees(tiny_project, monkeypatch)
    if variable is None:
        monkeypatch.delenv("BRAIN_TRIGGER", raising=False)
    else:
        monkeypatch.setenv("BRAIN_TRIGGER", variable)
    assert main(["materialize"]) == 0
    instance = _instance()
    try:
        event = instance.get_latest_materialization_event(CHUNKS)
        assert event is not None and event.asset_materialization is not None
        assert event.asset_materialization.metadata["triggered_by"].value == expected  # type: ignore[attr-defined]
    finally:
        instance.dispose()
