"""A failed step's summary line names the root cause, with its path, in one line."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest

from brain_pipeline.lib.runner import materialize_selection
from brain_pipeline_tests.defs.conftest import Project


def _failure_line(project: Project) -> str:
    """The one FAILED line of an ingest run (whichever step meets the problem first)."""
    outcome = project.materialize("group:ingest")
    assert not outcome.success
    failed = [line for line in outcome.lines if line.startswith("  FAILED   ")]
    assert len(failed) == 1, outcome.lines
    return failed[0]


def test_a_missing_corpus_is_named_with_its_path(tiny_project: Project) -> None:
    missing = tiny_project.root / "no-such-corpus"
    tiny_project.write_config(**{"corpus.path": str(missing)})
    line = _failure_line(tiny_project)
    # The run's first step runs the preflight: the same line `materialize` refuses with.
    assert f"corpus {missing} does not exist" in line
    assert "CURATED_CONTENT_PATH" in line
    assert "DagsterExecutionStepExecutionError" not in line
    assert "Error occurred while executing" not in line
    assert "\n" not in line


def test_a_build_dir_that_cannot_be_created_names_the_os_error(tiny_project: Project) -> None:
    blocker = tiny_project.root / "a-file"
    blocker.write_text("not a directory\n", encoding="utf-8")
    tiny_project.write_config(build_dir=str(blocker / "sub"))
    line = _failure_line(tiny_project)
    # The OS's own words and the offending path, whatever the writer that hit it (the
    # ledger in the build directory, opened before any step, meets it first).
    assert "[Errno 20] Not a directory" in line, line
    assert str(blocker) in line
    assert "DagsterExecutionStepExecutionError" not in line


# ---- the summary line on small graphs of our own, one way of failing each ----------


@dg.asset
def wraps_an_os_error() -> None:
    try:
        Path("/no/such/dir/file.txt").read_text()
    except OSError as exc:
        raise RuntimeError("could not load the notes") from exc


@dg.asset
def fails_on_purpose() -> None:
    try:
        Path("/no/such/secret-bearing/detail").read_text()
    except OSError as exc:
        raise dg.Failure(description="publishing refused: the gate did not pass") from exc


@dg.asset
def fails_while_handling() -> None:
    try:
        {}["missing"]  # noqa: B018 - the KeyError is the context of what follows
    except KeyError:
        os.rmdir("/no/such/dir")


@dg.asset
def fails_without_a_message() -> None:
    raise ValueError


def _line(asset: dg.AssetsDefinition) -> str:
    outcome = materialize_selection(
        "*", definitions=dg.Definitions(assets=[asset]), instance=dg.DagsterInstance.ephemeral()
    )
    assert not outcome.success
    [line] = [line for line in outcome.lines if line.startswith("  FAILED")]
    return line


def test_the_raised_error_and_its_root_cause_share_the_line() -> None:
    assert _line(wraps_an_os_error) == (
        "  FAILED   wraps_an_os_error: RuntimeError: could not load the notes (caused by "
        "FileNotFoundError: [Errno 2] No such file or directory: '/no/such/dir/file.txt')"
    )


def test_a_dagster_failure_shows_its_description_only() -> None:
    line = _line(fails_on_purpose)
    assert line == "  FAILED   fails_on_purpose: publishing refused: the gate did not pass"


def test_an_error_raised_while_handling_another_is_the_one_shown() -> None:
    assert _line(fails_while_handling) == (
        "  FAILED   fails_while_handling: FileNotFoundError: [Errno 2] No such file or "
        "directory: '/no/such/dir'"
    )


def test_an_error_without_a_message_still_names_its_class() -> None:
    assert _line(fails_without_a_message) == "  FAILED   fails_without_a_message: ValueError"


def test_the_materialize_command_prints_the_cause_in_its_summary(
    tiny_project: Project,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from brain_pipeline.cli import main

    missing = tiny_project.root / "gone"
    tiny_project.write_config(**{"corpus.path": str(missing)})
    monkeypatch.setenv("BRAIN_CONFIG", str(tiny_project.config_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tiny_project.root / "dagster-home"))
    # The preflight refuses before any run starts: exit 2 (bad configuration), one line.
    assert main(["materialize", "--select", "group:ingest"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"brain-pipeline materialize: corpus {missing} does not exist")


@dg.asset
def gated() -> None:
    return None


@dg.asset_check(asset=gated, blocking=True)
def always_refuses() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, description="the labels are stale")


@dg.asset(deps=[gated])
def downstream_of_gated() -> None:
    return None


def test_a_failed_blocking_check_is_one_line_and_blocks_what_follows() -> None:
    outcome = materialize_selection(
        "*",
        definitions=dg.Definitions(
            assets=[gated, downstream_of_gated], asset_checks=[always_refuses]
        ),
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert not outcome.success
    about_the_check = [line for line in outcome.lines if "always_refuses" in line]
    assert about_the_check == ["  check    always_refuses: FAILED the labels are stale"]
    [downstream] = [line for line in outcome.lines if "downstream_of_gated" in line]
    assert downstream.split()[0] in ("blocked", "skipped"), outcome.lines
