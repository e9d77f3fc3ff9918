"""The README: a failed step is one line with its root cause, and `-v` shows Dagster's
own logs. The same run, with and without `-v`: Dagster's per-event lines appear only
with it, and the summary's verdict is there either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.defs.conftest import cli_sees, make_tiny_project

DAGSTER_EVENT = "STEP_START"  # Dagster's own console line for a step starting


@pytest.mark.parametrize("verbose", [False, True], ids=["plain", "verbose"])
def test_dagsters_own_logs_only_with_v(
    verbose: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cli_sees(make_tiny_project(tmp_path), monkeypatch)
    args = ["materialize", "--select", "group:ingest", *(["-v"] if verbose else [])]
    assert main(args) == 0
    out, err = capfd.readouterr()
    assert "succeeded: run" in err
    assert "knowledge_store" in out  # the summary names the steps either way
    assert (DAGSTER_EVENT in out + err) is verbose
