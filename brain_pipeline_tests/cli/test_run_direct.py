"""`brain-pipeline materialize` without --select: a run made without Dagster, through the
real command (in-process `main`), with what a person or a cron job sees and gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.plan import PLAN
from brain_pipeline.steps.run_journal import journal_paths, latest_journal
from brain_pipeline.steps.up_to_date import record_path
from brain_pipeline_tests.defs.conftest import IMPOSSIBLE, Project, cli_sees, make_tiny_project
from brain_pipeline_tests.peers.notify_peers import WebhookServer


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.chdir(tmp_path)
    return cli_sees(make_tiny_project(tmp_path), monkeypatch)


def test_a_full_run_prints_the_summary_and_keeps_its_journal(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["materialize"]) == 0
    out, err = capsys.readouterr()
    journal = latest_journal(StateLayout.of(project.build))
    assert journal is not None and journal.succeeded
    assert out.splitlines()[0] == "run summary (embedding: none, lexical only):"
    assert "  ok       published_local" in out.splitlines()
    assert f"succeeded: run {journal.run_id} in " in err
    assert [step.name for step in journal.steps] == [node.name for node in PLAN]
    # The run that proved the build current is the journal's run.
    assert json.loads(record_path(StateLayout.of(project.build)).read_bytes())["run_id"] == (
        journal.run_id
    )
    assert (project.published() / "knowledge-store.json").exists()


def test_a_blocked_run_exits_1_publishes_nothing_and_notifies_once(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    with WebhookServer.start() as webhook:
        project.write_config(**IMPOSSIBLE, notify={"webhook_url": webhook.url + "/hook"})
        assert main(["materialize"]) == 1
        out, err = capsys.readouterr()
        assert "  blocked  published_local: not run" in out
        assert "  check    retrieval_eval: FAILED bm25: nDCG@10" in out
        assert "FAILED: run " in err
        assert "notification: blocked message: " in err
        assert not (project.published() / "knowledge-store.json").exists()
        assert len(webhook.bodies) == 1
        assert "retrieval_eval" in json.dumps(webhook.bodies[0])
        # A failed run proves nothing: the next one runs, is blocked again, and says so.
        assert main(["materialize"]) == 1
        assert len(webhook.bodies) == 2
        # Thresholds it can meet: it publishes, and the channel hears it recovered.
        project.write_config(notify={"webhook_url": webhook.url + "/hook"})
        assert main(["materialize"]) == 0
        assert len(webhook.bodies) == 3
        assert "recovered" in json.dumps(webhook.bodies[2])
        assert len(journal_paths(StateLayout.of(project.build))) == 3


def test_a_run_made_without_dagster_leaves_the_dagster_instance_alone(
    project: Project, tmp_path: Path
) -> None:
    assert main(["materialize"]) == 0
    assert not (tmp_path / "dagster-home").exists()


def test_a_journal_that_cannot_be_written_costs_the_ui_not_the_run(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = StateLayout.of(project.build).run_journal_dir
    runs.parent.mkdir(parents=True)
    runs.write_text("a file where the journal folder should be")
    assert main(["materialize"]) == 0
    _out, err = capsys.readouterr()
    assert "could not keep this run's journal" in err and "the UI will not show it" in err
    assert (project.published() / "knowledge-store.json").exists()
    assert runs.read_text() == "a file where the journal folder should be"


def test_damage_found_during_a_run_is_one_warning_on_stderr(project: Project) -> None:
    """In a process of its own, as a person runs it: no Dagster layer is loaded there,
    so the command's own handler is what prints the line."""
    import os
    import subprocess
    import sys

    from brain_pipeline_tests.defs.conftest import edit_corpus

    assert main(["materialize"]) == 0
    target = sorted(project.build.glob("state/index/tokens-v1/*.npz"))[0]
    target.write_bytes(b"not an npz archive")
    edit_corpus(project)
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "brain_pipeline.cli", "materialize"],
        env={**os.environ, "PYTHONPATH": str(repo)}, cwd=project.root,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if str(target) in line]
    assert len(warned) == 1, done.stderr
    assert warned[0].startswith("brain-pipeline: warning: damaged BM25 token counts")
