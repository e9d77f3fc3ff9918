"""`brain-pipeline materialize` with nothing to do (issue #26, item 1), as a person runs it:
a real process, whose fast path must not import Dagster nor start a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from brain_pipeline.corpus.store import chunk_id
from brain_pipeline_tests.tiny_corpus import PARAGRAPHS, write_tiny_corpus

REPO = Path(__file__).resolve().parents[2]
PROBE = (
    "import sys\n"
    "from brain_pipeline.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('dagster imported:', 'dagster' in sys.modules)\n"
    "sys.exit(code)\n"
)


def _project(tmp_path: Path) -> dict[str, str]:
    write_tiny_corpus(tmp_path / "corpus")
    fixture = tmp_path / "fixture.json"
    relevant = [chunk_id(PARAGRAPHS["networks"][2])]
    query = {"query": "stateful firewalls", "area": "networks", "relevant": relevant}
    fixture.write_text(json.dumps({"queries": [query]}), encoding="utf-8")
    config = tmp_path / "corpus_config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "corpus": {"path": str(tmp_path / "corpus"), "candidates": []},
                "build_dir": str(tmp_path / "build"),
                "embedding": {"provider": "none"},
                "evaluation": {"fixture": str(fixture), "thresholds": {}},
                "publish": {"root": str(tmp_path / "agent")},
                "schedule": {"enabled": False, "sensor_enabled": False},
            }
        ),
        encoding="utf-8",
    )
    drop = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "S3_BUCKET_NAME", "AWS_S3_BUCKET")
    return {
        **{k: v for k, v in os.environ.items() if k not in drop},
        "BRAIN_CONFIG": str(config),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "PYTHONPATH": str(REPO),
    }


def _materialize(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, "materialize", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _runs(home: Path) -> int:
    """Runs the instance holds (its SQLite run storage, read without Dagster)."""
    import sqlite3

    with sqlite3.connect(home / "history" / "runs.db") as db:
        return int(db.execute("select count(*) from runs").fetchone()[0])


def test_nothing_changed_skips_the_run_without_importing_dagster(tmp_path: Path) -> None:
    env = _project(tmp_path)
    home = tmp_path / "dagster_home"
    first = _materialize(env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "dagster imported: True" in first.stdout  # every run that builds is a Dagster run
    assert "succeeded: run" in first.stderr
    assert _runs(home) == 1

    again = _materialize(env, tmp_path)
    assert again.returncode == 0, again.stderr
    line = again.stdout.splitlines()[0]
    assert line.startswith("up to date: nothing changed since run ")
    assert "(published 20" in line
    assert "dagster imported: False" in again.stdout
    assert _runs(home) == 1  # no run started

    forced = _materialize(env, tmp_path, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "dagster imported: True" in forced.stdout and "succeeded: run" in forced.stderr
    assert _runs(home) == 2

    everything = _materialize(env, tmp_path, "--select", "*")
    assert everything.returncode == 0, everything.stderr
    assert "dagster imported: True" in everything.stdout
    runs = _runs(home)
    assert runs == 3
    selected = _materialize(env, tmp_path, "--select", "knowledge_store")
    assert selected.returncode == 0, selected.stderr
    assert "dagster imported: True" in selected.stdout
    assert _runs(home) == runs + 1
