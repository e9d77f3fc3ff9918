"""The README: "Only `ui` and `materialize --select ...` (or `--rebind`) import Dagster, so the
others start fast." (`materialize` without --select: cli/test_materialize_up_to_date.py.)

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
        (["rollback"], {1}),  # nothing published: refused in one line
        (["rollback", "--release"], {1}),  # nothing held
    ],
    ids=["status", "eval", "search", "gc", "chunk", "publications", "rollback", "release"],
)
def test_commands_other_than_materialize_and_ui_do_not_import_dagster(
    project: Project, command: list[str], codes: set[int]
) -> None:
    (project.root / "corpus" / "aws").mkdir(parents=True)
    (project.root / "corpus" / "aws" / "vpc.md").write_text("A VPC is a private network.\n")
    loaded, code, err = _dagster_modules_after(command, project.root)
    assert code in codes, err
    assert loaded == []
