"""`brain-pipeline materialize --force-publish` and `publish.force`, through the CLI.

The README: run on their own, the publish steps refuse a build whose evaluation did not
pass; `--force-publish` (or `publish.force: true`) overrides that, loudly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.defs.conftest import (
    IMPOSSIBLE,
    TINY_PARAGRAPHS,
    Project,
    cli_sees,
    make_project,
    make_tiny_project,
    tiny_fixture,
)


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
    assert main(["materialize", "--select", "published_local", "--force-publish"]) == 0
    out, err = capsys.readouterr()
    assert _published(failed_build) == failed_build.store_file.read_bytes()
    assert "FORCED PUBLISH" in out + err


def test_publish_force_in_the_configuration_does_the_same(
    failed_build: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    failed_build.write_config(**IMPOSSIBLE, **{"publish.force": True})
    capsys.readouterr()
    assert main(["materialize", "--select", "published_local"]) == 0
    out, err = capsys.readouterr()
    assert _published(failed_build) == failed_build.store_file.read_bytes()
    assert "FORCED PUBLISH" in out + err


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
    project.write_config(**{"publish.force": True})
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    assert main(["materialize", "--force-publish"]) == 1
    assert project.store_file.read_bytes().strip() == b"[]"
    assert main(["materialize", "--select", "published_local", "--force-publish"]) == 1
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
