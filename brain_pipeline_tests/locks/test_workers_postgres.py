"""Two workers started at once, each with its own empty build directory and DAGSTER_HOME,
sharing one PostgreSQL Dagster instance and one PostgreSQL ledger (issue 41).

The test holds the ledger's run lock itself first, so both commands are known to be
waiting (each says so, naming the holder) before either can start: no sleeps. Then one
builds, the other waits for it, and neither is refused for serving "another build
directory".
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.lock import make_holder
from brain_pipeline.state.run_lease import lease_holder
from brain_pipeline_tests.peers.postgres import PostgresServer

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "examples" / "curated-content"
SAMPLE_FIXTURE = REPO / "examples" / "retrieval-eval.json"


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer.running() as server:
        yield server


def _worker(
    root: Path, server: PostgresServer, instance_db: str, ledger_url: str
) -> dict[str, str]:
    root.mkdir()
    config = {
        "corpus": {"path": str(SAMPLE_CORPUS), "candidates": []},
        "build_dir": str(root / "build"),
        "embedding": {"provider": "none"},
        "evaluation": {
            "fixture": str(SAMPLE_FIXTURE),
            "thresholds": {"bm25": {"min_ndcg_at_10": 0.2, "max_misses": 100}},
        },
        "publish": {"root": str(root / "agent")},
    }
    (root / "corpus_config.yaml").write_text(yaml.safe_dump(config))
    home = root / "dagster_home"
    home.mkdir()
    settings = {"storage": server.dagster_storage(instance_db), "telemetry": {"enabled": False}}
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "BRAIN_CONFIG": str(root / "corpus_config.yaml"),
        "DAGSTER_HOME": str(home),
        "BRAIN_STATE_LEDGER": ledger_url,
    }


def _wait_for_line(proc: subprocess.Popen[str], marker: str) -> str:
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if marker in line:
            return line
    proc.wait()
    pytest.fail(f"exit {proc.returncode} without {marker!r}:\n{''.join(seen)[-3000:]}")


def test_two_fresh_workers_on_one_instance_and_ledger_take_turns(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    instance_db = postgres_server.create_database("workers_instance")
    ledger_db = postgres_server.create_database("workers_ledger")
    server = postgres_server
    url = f"postgresql://{server.superuser}@{server.host}:{server.port}/{ledger_db}"
    envs = [_worker(tmp_path / name, server, instance_db, url) for name in ("w1", "w2")]
    procs = []
    with Ledger(url) as ledger, ledger.run_lock(make_holder("gate", "run-gate"), wait_seconds=0):
        for env in envs:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "brain_pipeline.cli", "materialize"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    cwd=tmp_path, env=env,
                )  # fmt: skip
            )
        for proc in procs:
            line = _wait_for_line(proc, "waiting up to 600s for the ledger postgresql://")
            assert f"pid {os.getpid()}" in line and "run run-gate" in line
    results = [proc.communicate() for proc in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, (out + err)[-3000:]
        assert "serves the" not in out + err

    for name in ("w1", "w2"):
        store = tmp_path / name / "build" / "knowledge-store.json"
        published = tmp_path / name / "agent" / "src" / "storage" / "knowledge-store.json"
        assert published.read_bytes() == store.read_bytes()
    with Ledger(url) as ledger:
        assert lease_holder(ledger) is None  # each command cleared the lease on its way out
    # One instance saw both runs, and they did not overlap.
    with dg.DagsterInstance.from_config(envs[0]["DAGSTER_HOME"]) as instance:
        records = sorted(instance.get_run_records(), key=lambda r: r.start_time or 0.0)
    assert [r.dagster_run.status for r in records] == [dg.DagsterRunStatus.SUCCESS] * 2
    assert records[0].end_time is not None and records[1].start_time is not None
    assert records[0].end_time <= records[1].start_time
