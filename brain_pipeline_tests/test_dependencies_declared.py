"""`deptry .` is clean: every imported distribution is declared, and every declared one is
imported or listed (with the reason) in pyproject's [tool.deptry]."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_deptry_reports_no_issue() -> None:
    deptry = shutil.which("deptry")
    assert deptry is not None, "deptry is in the dev extra"
    done = subprocess.run([deptry, "."], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "No dependency issues found" in done.stdout + done.stderr
