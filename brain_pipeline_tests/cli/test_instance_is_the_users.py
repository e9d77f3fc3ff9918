"""`materialize` on an instance the user owns: as a person would run it, in a subprocess.

- a `dagster.yaml` with a comment and a legacy `run_coordinator` (`max_concurrent_runs`):
  the run publishes, `dagster instance info` still reads the file, and the file is
  byte-identical afterwards;
- a DAGSTER_HOME the user cannot write (its storages made before): the run publishes.
  Tests run as root, which ignores permission bits; the run is started without the
  capabilities that let root do so (`setpriv --bounding-set -dac_override,...`), so the
  read-only folder is refused to it exactly as to any user;
- under `-W error::DeprecationWarning`, the run succeeds: nothing we do makes Dagster
  use a deprecated API.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from brain_pipeline_tests.defs.conftest import make_project, tiny_fixture, write_tiny_corpus

REPO = Path(__file__).resolve().parents[2]
LEGACY_YAML = b"""\
# my team's instance: keep the queue small
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 2   # the laptop has two cores
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """(config file, publish root) of a tiny project with lexical retrieval."""
    corpus = tmp_path / "corpus"
    project = make_project(tmp_path, corpus, tiny_fixture(write_tiny_corpus(corpus)))
    project.instance.dispose()
    return project.config_path, project.publish_root


def _materialize(
    config: Path, home: Path, *prefix: str, python_flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "BRAIN_CONFIG": str(config),
        "DAGSTER_HOME": str(home),
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [*prefix, sys.executable, *python_flags, "-m", "brain_pipeline.cli", "materialize"],
        capture_output=True,
        text=True,
        cwd=config.parent,
        env=env,
        timeout=300,
    )


def _published(publish_root: Path) -> Path:
    return publish_root / "src" / "storage" / "knowledge-store.json"


def test_a_legacy_run_coordinator_with_comments_works_and_is_left_byte_identical(
    tmp_path: Path,
) -> None:
    config, publish_root = _project(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes(LEGACY_YAML)
    done = _materialize(config, home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _published(publish_root).is_file()
    assert (home / "dagster.yaml").read_bytes() == LEGACY_YAML
    assert sorted(p.name for p in home.iterdir() if p.is_file()) == ["dagster.yaml"]
    dagster = shutil.which("dagster")
    assert dagster is not None
    info = subprocess.run(
        [dagster, "instance", "info"],
        capture_output=True,
        text=True,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=120,
    )
    assert info.returncode == 0, info.stderr[-2000:]
    assert "Instance configuration" in info.stdout and "Error" not in info.stderr
    # The project's pool got its one slot, for that pool only, as the CLI shows it.
    pool = subprocess.run(
        [dagster, "instance", "concurrency", "get", "--all"],
        capture_output=True,
        text=True,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=120,
    )
    assert pool.returncode == 0, pool.stderr[-2000:]
    assert '"gemini_embedding": 0 / 1 slots' in pool.stdout, pool.stdout
    assert (home / "dagster.yaml").read_bytes() == LEGACY_YAML


def _read_only(folder: Path) -> None:
    """The folder and the files at its top: no write bit for anyone."""
    for path in [folder, *folder.iterdir()]:
        if path.is_file() or path == folder:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_a_read_only_dagster_home_with_its_storages_works(tmp_path: Path) -> None:
    """The user's instance, made by Dagster itself (`dagster instance migrate` creates its
    storages), then made read-only: nothing of ours may need to be written there."""
    setpriv = shutil.which("setpriv")
    dagster = shutil.which("dagster")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop root's override"
    assert dagster is not None
    unprivileged = (setpriv, "--bounding-set", "-dac_override,-dac_read_search")
    config, publish_root = _project(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes(b"# the team's instance\ntelemetry:\n  enabled: false\n")
    made = subprocess.run(
        [dagster, "instance", "migrate"],
        capture_output=True,
        text=True,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        timeout=120,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    _read_only(home)
    try:
        # The simulation is real: without the override, this process cannot write there.
        probe = subprocess.run([*unprivileged, "touch", str(home / "probe")], capture_output=True)
        assert probe.returncode != 0 and not (home / "probe").exists()
        before = {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()}
        names = sorted(p.name for p in home.iterdir())
        done = _materialize(config, home, *unprivileged)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "succeeded: run" in done.stderr
        assert _published(publish_root).is_file()
        assert sorted(p.name for p in home.iterdir()) == names
        assert {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()} == before
    finally:
        home.chmod(home.stat().st_mode | stat.S_IWUSR)


@pytest.mark.parametrize("how", ["python -W", "PYTHONWARNINGS"])
def test_a_run_is_clean_under_deprecation_warnings_as_errors(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, publish_root = _project(tmp_path)
    home = tmp_path / "home"
    if how == "python -W":
        done = _materialize(config, home, python_flags=("-W", "error::DeprecationWarning"))
    else:
        monkeypatch.setenv("PYTHONWARNINGS", "error::DeprecationWarning")
        done = _materialize(config, home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DeprecationWarning" not in done.stderr
    assert _published(publish_root).is_file()
