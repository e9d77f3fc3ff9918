"""The docs (cli.md): "Only the commands that launch Dagster runs (`materialize` when it
runs, `rollback`) and `ui` import Dagster, so the others start fast." (`materialize` with
nothing to do: cli/test_materialize_up_to_date.py.)

Each other command runs for real in a fresh interpreter (on the CLI tests' small
project) and then lists the Dagster modules it loaded; what is imported is checked, not
how long it took. (`fixture`, `history` and `search --help` have their own probes.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain_pipeline_tests.cli.conftest import Project

REPO = Path(__file__).resolve().parents[2]


def _dagster_modules_after(args: list[str], cwd: Path) -> tuple[list[str], int, str]:
    probe = (
        "import json, sys\n"
        "from brain_pipeline.cli import main\n"
        f"code = main({args!r})\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'dagster')\n"
        "print('DAGSTER', json.dumps(loaded))\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("DAGSTER ")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[-1].removeprefix("DAGSTER ")), done.returncode, done.stderr


@pytest.mark.parametrize(
    ("command", "codes"),
    [
        (["status", "--root", "agent"], {1}),  # nothing published yet
        (["eval"], {0, 1}),
        (["search", "private network", "--area", "aws"], {0}),
        (["gc"], {0}),
        (["chunk", "corpus", "-o", "out.json"], {0}),
        (["publications", "--json"], {0}),
    ],
    ids=["status", "eval", "search", "gc", "chunk", "publications"],
)
def test_commands_that_launch_no_run_do_not_import_dagster(
    project: Project, command: list[str], codes: set[int]
) -> None:
    (project.root / "corpus" / "aws").mkdir(parents=True)
    (project.root / "corpus" / "aws" / "vpc.md").write_text("A VPC is a private network.\n")
    loaded, code, err = _dagster_modules_after(command, project.root)
    assert code in codes, err
    assert loaded == []


@pytest.mark.parametrize(
    "command", [["rollback"], ["rollback", "--release"]], ids=["rollback", "release"]
)
def test_a_refused_rollback_is_one_line_and_a_failed_dagster_run(
    project: Project, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing published, nothing held: refused in one line, exit 1, and the refusal is a
    FAILURE run of rollback_job (release_hold_job) in the instance the UI reads."""
    import dagster as dg

    home = project.root / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    loaded, code, err = _dagster_modules_after(command, project.root)
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("brain-pipeline rollback: ")]
    assert len(lines) == 1, err
    assert "refused" in lines[0] or "nothing" in lines[0]
    assert "dagster" in loaded
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        (run,) = instance.get_runs()
        job = "release_hold_job" if "--release" in command else "rollback_job"
        assert run.job_name == job and run.status == dg.DagsterRunStatus.FAILURE
    finally:
        instance.dispose()
