"""`python -m pytest` does its own set-up on a fresh machine: `tools/system_deps.sh`,
the script `.ci/run` runs too, called at the session's start (conftest.py).

Chromium, Node.js and PostgreSQL are installed on the machines that run this suite, so
"missing" is made real by running the script with a PATH where they are not found; the
package manager is the one thing replaced (a recorder named `apt-get`), never the
machine's own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from brain_pipeline_tests.conftest import SYSTEM_DEPS, system_set_up

REPO = Path(__file__).resolve().parents[1]


def _bin(tmp_path: Path, *, apt: bool) -> Path:
    """A PATH holding `id` (and a recording `apt-get`) but no chromium or node."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("id", "mkdir", "useradd"):
        found = shutil.which(tool)
        assert found is not None
        (folder / tool).symlink_to(found)
    if apt:
        recorder = folder / "apt-get"
        recorder.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "apt.log"}\n')
        recorder.chmod(0o755)
    return folder


def _run(tmp_path: Path, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run(
        [bash, str(SYSTEM_DEPS), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(folder)},
    )


def test_the_check_lists_what_is_missing_and_installs_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path, _bin(tmp_path, apt=True), "--check")
    assert done.returncode == 1
    assert done.stdout.split() == ["chromium", "nodejs"]  # PostgreSQL is found by its path
    assert not (tmp_path / "apt.log").exists()


def test_without_a_package_manager_it_fails_with_the_exact_command(tmp_path: Path) -> None:
    done = _run(tmp_path, _bin(tmp_path, apt=False))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "the tests need chromium nodejs: run as root: "
        "apt-get install -y --no-install-recommends chromium nodejs"
    ]


def test_as_root_with_apt_it_installs_what_is_missing(tmp_path: Path) -> None:
    assert os.geteuid() == 0, "the suite runs as root (as .ci/run does)"
    done = _run(tmp_path, _bin(tmp_path, apt=True))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update -qq",
        "install -y -qq --no-install-recommends chromium nodejs",
    ]


def test_on_this_machine_nothing_is_missing_and_the_session_hook_passes() -> None:
    assert subprocess.run(["bash", str(SYSTEM_DEPS), "--check"]).returncode == 0
    assert system_set_up() is None


def test_the_session_hook_stops_pytest_with_that_one_line(tmp_path: Path) -> None:
    failing = tmp_path / "system_deps.sh"
    failing.write_text(
        'echo "noise" >&2\necho "the tests need chromium: run as root: x" >&2\nexit 1\n'
    )
    assert system_set_up(failing) == "the tests need chromium: run as root: x"


def test_ci_and_the_readme_command_share_the_script() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "tools/system_deps.sh" in ci and "apt-get install" not in ci
    conftest = (REPO / "brain_pipeline_tests" / "conftest.py").read_text()
    assert "def pytest_sessionstart" in conftest
