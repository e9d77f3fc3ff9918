"""`brain-pipeline materialize --force-publish --reason`, through the CLI.

The README: run on their own, the publish steps refuse a build whose evaluation did not
pass; `--force-publish --reason "..."` overrides that in one command, loudly, and the
forced publication is marked so with its reason (`publications`, `status`, the UI). A
force without a reason, or where `publish.allow_force` is false, is refused in one line
before any work; `publish.force: true` (a standing force) is refused at load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.defs.conftest import (
    IMPOSSIBLE,
    TINY_PARAGRAPHS,
    Project,
    cli_sees,
    edit_corpus,
    make_project,
    make_tiny_project,
    tiny_fixture,
)
from brain_pipeline_tests.evaluation.helpers import memory_at


@pytest.fixture
def failed_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A tiny project whose full run built everything and failed the evaluation."""
    project = cli_sees(make_tiny_project(tmp_path), monkeypatch)
    project.write_config(**IMPOSSIBLE)
    assert main(["materialize"]) == 1
    assert not (project.published() / "knowledge-store.json").exists()
    return project


def _published(project: Project) -> bytes | None:
    path = project.published() / "knowledge-store.json"
    return path.read_bytes() if path.exists() else None


def test_publishing_alone_is_refused_then_forced_by_the_flag_loudly(
    failed_build: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["materialize", "--select", "published_local"]) == 1
    assert _published(failed_build) is None
    capsys.readouterr()
    forced = ["--force-publish", "--reason", "demo at nine"]
    assert main(["materialize", "--select", "published_local", *forced]) == 0
    out, err = capsys.readouterr()
    assert _published(failed_build) == failed_build.store_file.read_bytes()
    assert "FORCED PUBLISH" in out + err and "(reason: demo at nine)" in out + err


def _runs(project: Project) -> int:
    import dagster as dg

    with dg.DagsterInstance.from_config(str(project.root / "dagster-home")) as instance:
        return len(instance.get_run_records())


def test_force_publish_publishes_in_one_command_and_is_marked_forced_everywhere(
    failed_build: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where users type it: the whole graph, its evaluation failing, forced in one command;
    `publications`, `status` and the UI's materialisation say it was forced, and why."""
    import dagster as dg

    capsys.readouterr()
    reason = "the agent demo needs the new area; labels follow tomorrow"
    assert main(["materialize", "--force-publish", "--reason", reason]) == 0
    out, err = capsys.readouterr()
    assert _published(failed_build) == failed_build.store_file.read_bytes()
    said = [line for line in err.splitlines() if "--force-publish: run" in line]
    assert len(said) == 1 and "retrieval_eval" in said[0] and reason in said[0], err

    assert main(["publications", "--json"]) == 0
    (live,) = json.loads(capsys.readouterr().out)["publications"]
    assert live["forced"]["reason"] == reason and "retrieval_eval" in live["forced"]["overrode"]
    assert main(["publications"]) == 0
    assert f"FORCED (reason: {reason})" in capsys.readouterr().out

    assert main(["status"]) in (0, 2)
    shown = capsys.readouterr().out
    assert "FORCED: published over retrieval_eval" in shown and reason in shown

    with dg.DagsterInstance.from_config(str(failed_build.root / "dagster-home")) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("published_local"))
        assert event is not None and event.asset_materialization is not None
        # The notification read from the forced run: a FORCED message with the reason.
        from brain_pipeline.defs.notify import run_facts
        from brain_pipeline.publishing.run_alerts import build_message, classify

        run = instance.get_run_by_id(event.run_id)
        assert run is not None
        said = classify(run_facts(instance, run), "blocked")
    metadata = event.asset_materialization.metadata
    assert metadata["forced"].value is True and metadata["force_reason"].value == reason
    assert said is not None and said.kind == "forced"
    assert reason in build_message(said).text and "retrieval_eval" in said.cause


@pytest.mark.parametrize("select", [None, "published_local"])
def test_force_without_a_reason_is_refused_in_one_line_before_any_work(
    failed_build: Project, capfd: pytest.CaptureFixture[str], select: str | None
) -> None:
    runs = _runs(failed_build)
    capfd.readouterr()
    chosen = ["--select", select] if select else []
    assert main(["materialize", *chosen, "--force-publish"]) == 2
    _, err = capfd.readouterr()
    assert err.splitlines() == [
        "brain-pipeline materialize: force needs a reason, recorded with the publication: "
        '--force-publish --reason "why this build must go out"'
    ]
    assert _runs(failed_build) == runs and _published(failed_build) is None


def test_allow_force_false_refuses_force_from_the_command_line_and_the_run_config(
    failed_build: Project, capfd: pytest.CaptureFixture[str]
) -> None:
    """A shared deployment turns force off: the CLI says so in one line before any run, and
    a launch with the publish asset's force config (what the UI's Launchpad, a schedule or
    a re-execution sends) is refused by the step, the publish root untouched."""
    failed_build.write_config(**IMPOSSIBLE, **{"publish.allow_force": False})
    runs = _runs(failed_build)
    capfd.readouterr()
    assert main(["materialize", "--force-publish", "--reason", "please"]) == 2
    _, err = capfd.readouterr()
    assert len(err.splitlines()) == 1 and "publish.allow_force: false" in err, err
    assert _runs(failed_build) == runs and _published(failed_build) is None

    launched = failed_build.materialize(
        "published_local", force_publish=True, force_reason="from the Launchpad"
    )
    assert not launched.success
    assert any("force is turned off" in line for line in launched.lines), launched.lines
    assert not failed_build.published().exists() or not any(failed_build.published().iterdir())


def test_force_in_the_run_config_without_a_reason_is_refused_by_the_step(
    failed_build: Project,
) -> None:
    """The UI's Launchpad path: `{"force": true}` alone publishes nothing."""
    launched = failed_build.materialize("published_local", force_publish=True)
    assert not launched.success
    assert any("force needs a reason" in line for line in launched.lines), launched.lines
    assert _published(failed_build) is None


def test_a_standing_force_in_the_configuration_is_refused_at_load(
    failed_build: Project, capfd: pytest.CaptureFixture[str]
) -> None:
    failed_build.write_config(**IMPOSSIBLE, **{"publish.force": True})
    capfd.readouterr()
    assert main(["materialize", "--select", "published_local"]) == 2
    _, err = capfd.readouterr()
    assert "a standing force is no longer honoured" in err and "--reason" in err
    assert _published(failed_build) is None


def test_a_failed_evaluation_of_an_earlier_run_refuses_a_publish_only_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Item 10: inside one run Dagster stops the publish step before the gate is asked, so
    only a run without the checks shows whether the gate itself refuses. A good
    publication is live; the next build fails its evaluation in one run; a publish-only
    launch then is refused, and so is one with the evaluation's record gone (a missing
    verdict); the live files stay byte-identical."""
    project = cli_sees(make_tiny_project(tmp_path), monkeypatch)
    assert main(["materialize"]) == 0
    live = {p.name: p.read_bytes() for p in project.published().iterdir()}
    edit_corpus(project)
    project.write_config(**IMPOSSIBLE)
    assert main(["materialize"]) == 1
    assert project.store_file.read_bytes() != live["knowledge-store.json"]
    capfd.readouterr()
    assert main(["materialize", "--select", "published_local"]) == 1
    out, err = capfd.readouterr()
    assert "publishing refused: refusing to publish: retrieval_eval failed on this data" in out
    assert {p.name: p.read_bytes() for p in project.published().iterdir()} == live
    memory_at(project.build).ledger.execute("DELETE FROM eval_outcomes")
    capfd.readouterr()
    assert main(["materialize", "--select", "published_local"]) == 1
    out, err = capfd.readouterr()
    assert "retrieval_eval has not run on this data" in out, out + err
    assert {p.name: p.read_bytes() for p in project.published().iterdir()} == live


def test_another_build_directory_is_refused_until_rebind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """An instance serves one build directory; `--rebind` moves it (README, scenarios)."""
    project = cli_sees(make_tiny_project(tmp_path), monkeypatch)
    assert main(["materialize", "--select", "group:ingest"]) == 0
    moved = tmp_path / "build-2"
    project.write_config(build_dir=str(moved))
    capfd.readouterr()
    assert main(["materialize", "--select", "group:ingest"]) == 1
    out, err = capfd.readouterr()
    assert "--rebind" in out + err
    assert not (moved / "knowledge-store.json").exists()
    assert main(["materialize", "--select", "group:ingest", "--rebind"]) == 0
    out, err = capfd.readouterr()
    assert f"this instance now serves {moved}" in err
    assert (moved / "knowledge-store.json").read_bytes() == project.store_file.read_bytes()


def test_force_never_publishes_an_empty_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: nothing overrides an empty store. Every paragraph is under the chunk floor."""
    corpus = tmp_path / "corpus"
    (corpus / "alpha").mkdir(parents=True)
    (corpus / "alpha" / "short.md").write_text("too short\n\nalso short\n", encoding="utf-8")
    unknown = {p: "000000000000" for ps in TINY_PARAGRAPHS.values() for p in ps}
    project = make_project(tmp_path, corpus, tiny_fixture(unknown))
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    forced = ["--force-publish", "--reason", "try it"]
    assert main(["materialize", *forced]) == 1
    assert project.store_file.read_bytes().strip() == b"[]"
    assert main(["materialize", "--select", "published_local", *forced]) == 1
    assert _published(project) is None
    assert not (project.publish_root / "src" / "storage").exists() or not any(
        (project.publish_root / "src" / "storage").iterdir()
    )


def test_a_bad_selection_is_usage_exit_2_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    project = cli_sees(make_tiny_project(tmp_path), monkeypatch)
    capfd.readouterr()
    assert main(["materialize", "--select", "no_such_asset"]) == 2
    _, err = capfd.readouterr()
    refusals = [line for line in err.splitlines() if "bad --select" in line]
    assert len(refusals) == 1 and "knowledge_store" in refusals[0], err
    assert not project.store_file.exists()


def test_a_misspelt_selection_is_one_line_with_dagsters_suggestion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    cli_sees(make_tiny_project(tmp_path), monkeypatch)
    capfd.readouterr()
    assert main(["materialize", "--select", "knowlege_store"]) == 2
    _, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    refusal = lines[-1]
    assert refusal.startswith("brain-pipeline materialize: bad --select: 'knowlege_store'"), err
    assert 'did you mean one of the following? ["knowledge_store"]' in refusal, err
    assert all(line.startswith("brain-pipeline materialize: ") for line in lines), err


def test_a_reason_without_force_publish_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    project = cli_sees(make_tiny_project(tmp_path), monkeypatch)
    capfd.readouterr()
    assert main(["materialize", "--reason", "just because"]) == 2
    _, err = capfd.readouterr()
    assert err.splitlines() == [
        "brain-pipeline materialize: --reason goes with --force-publish (it is the forced "
        "publication's record)"
    ]
    assert not project.store_file.exists()
