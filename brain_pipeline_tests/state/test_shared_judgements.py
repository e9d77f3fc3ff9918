"""The judgements (evaluation outcomes, blocking verdicts, the regression and known-item
baselines, the history) are the same from every worker: two build directories sharing
a real PostgreSQL ledger and moto's S3 bucket, and nothing else. Plus the upgrade: a
build directory made by main before the ledger keeps its baselines and history."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import tarfile
from pathlib import Path

import boto3
import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.baseline import (
    NO_KNOWN_ITEMS,
    load_baseline,
    load_known_items,
    publications,
)
from brain_pipeline.evaluation.service import (
    evaluate_store_dir,
    judgement_memory,
    record_as_baseline,
    stored_verdict,
)
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Verdict
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.health import string_limit_key
from brain_pipeline.steps.publish import evaluation_of_build, gate
from brain_pipeline_tests.corpus.views import clear_views
from brain_pipeline_tests.evaluation.known_item_corpus import corpus
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.peers.postgres import PostgresServer
from brain_pipeline_tests.state.conftest import postgres_url
from brain_pipeline_tests.steps.conftest import StepLog
from brain_pipeline_tests.steps.handed import build_of

FIXTURE_TAR = Path(__file__).parents[1] / "fixtures" / "build-by-main-5d65fac.tar.gz"
BUCKET = "brain-judgements"
_databases = itertools.count()


@pytest.fixture
def shared(postgres_server: PostgresServer, s3: MotoS3Server) -> dict[str, str]:
    """BRAIN_STATE_LEDGER and BRAIN_STATE_BLOBS of a fresh PostgreSQL database and bucket."""
    database = postgres_server.create_database(f"judgements_{next(_databases)}")
    boto3.client("s3", endpoint_url=s3.endpoint_url).create_bucket(Bucket=BUCKET)
    return {
        "BRAIN_STATE_LEDGER": postgres_url(postgres_server, database),
        "BRAIN_STATE_BLOBS": f"s3://{BUCKET}/team/state",
    }


def worker(root: Path, name: str, env: dict[str, str]) -> BrainConfig:
    """A worker: its own empty build directory, the shared fixture, ledger and bucket."""
    fixture = root / "fixture.json"
    if not fixture.exists():
        fixture.write_text(json.dumps({"queries": []}))
    build = root / name / "build"
    build.mkdir(parents=True)
    config = root / name / "corpus_config.yaml"
    config.write_text(
        f"build_dir: {build}\nembedding:\n  provider: none\n"
        f"evaluation:\n  fixture: {fixture}\n  thresholds:\n    bm25:\n"
        "      min_ndcg_at_10: 0.9\n  known_items:\n    sample_per_area: 12\n"
    )
    return load_config(config, env=env)


def store(cfg: BrainConfig, chunks: list[Chunk]) -> None:
    cfg.build_dir.mkdir(parents=True, exist_ok=True)
    (cfg.build_dir / "knowledge-store.json").write_bytes(serialize_store(chunks))
    clear_views()


def publish_on(cfg: BrainConfig, chunks: list[Chunk]) -> str:
    """Evaluate `chunks` on this worker and record the evaluation as published."""
    store(cfg, chunks)
    outcome = evaluate_store_dir(cfg, cfg.build_dir)
    record = eval_record.lookup(judgement_memory(cfg), str(outcome.record_key))
    assert record is not None and outcome.verdict.severity == "PASS"
    record_as_baseline(cfg, record, kind="published")
    return str(outcome.record_key)


def test_a_fresh_worker_judges_against_the_baselines_another_worker_published(
    tmp_path: Path, shared: dict[str, str]
) -> None:
    a, b = worker(tmp_path, "a", shared), worker(tmp_path, "b", shared)
    chunks = corpus()
    published = publish_on(a, chunks)

    memory_b = judgement_memory(b)
    assert not list(StateLayout.of(b.build_dir).state_dir.glob("*.json"))  # nothing local
    found = load_baseline(memory_b)
    assert found.baseline is not None and found.baseline.key == published
    assert not isinstance(load_known_items(memory_b), str)
    rows, _ = publications(memory_b)
    assert [r["evaluation_key"] for r in rows] == [published]

    store(b, [c for c in chunks if c.area != "beta"])
    outcome = evaluate_store_dir(b, b.build_dir)
    assert NO_KNOWN_ITEMS not in outcome.verdict.line()
    assert "no baseline yet" not in outcome.verdict.line()
    assert outcome.verdict.severity == "ERROR"
    assert outcome.verdict.failures[0].startswith("known items: area beta disappeared")


def test_a_failed_evaluation_on_one_worker_refuses_a_publish_only_launch_on_another(
    tmp_path: Path, shared: dict[str, str]
) -> None:
    a, b = worker(tmp_path, "a", shared), worker(tmp_path, "b", shared)
    chunks = corpus()
    publish_on(a, chunks)
    store(a, [c for c in chunks if c.area != "beta"])
    failed = evaluate_store_dir(a, a.build_dir)
    assert failed.verdict.severity == "ERROR"
    layout_a = StateLayout.of(a.build_dir)
    sha = hashlib.sha256(layout_a.store_file.read_bytes()).hexdigest()
    judgement_memory(a).ledger.record_verdict(
        Verdict("fits_agent_string_limit", sha, string_limit_key(a, sha), "PASS", "fits")
    )

    layout_b = StateLayout.of(b.build_dir)
    shutil.copyfile(layout_a.store_file, layout_b.store_file)  # the same bytes on B
    clear_views()
    key, record = evaluation_of_build(b, build_of(b))
    assert key == failed.record_key
    verdict = stored_verdict(record)
    assert verdict is not None and verdict.severity == "ERROR"
    with pytest.raises(StepFailure) as refused:
        gate(b, build_of(b), False, record, StepLog())
    assert "retrieval_eval failed on this data" in str(refused.value)
    assert "fits_agent_string_limit" not in str(refused.value)  # A's verdict counts on B


def test_an_upgraded_build_directory_keeps_its_baselines_and_history(tmp_path: Path) -> None:
    with tarfile.open(FIXTURE_TAR) as archive:
        archive.extractall(tmp_path, filter="data")
    state = tmp_path / "build" / "state"
    old = json.loads((state / "eval-baseline.json").read_text())
    old_known = json.loads((state / "known-items" / "baseline.json").read_text())
    cfg = load_config(tmp_path / "brain.yaml", env={})

    memory = judgement_memory(cfg)
    found = load_baseline(memory)
    assert found.baseline is not None
    assert found.baseline.key == old["baseline"]["record"]["key"]
    known = load_known_items(memory)
    assert not isinstance(known, str) and known.candidate == old_known["candidate"]
    rows, _ = publications(memory)
    assert [r["evaluation_key"] for r in rows] == [p["evaluation_key"] for p in old["publications"]]
    for name in ("eval.json", "eval-baseline.json", "check-verdicts.json"):
        assert not (state / name).exists() and (state / f"{name}.imported").is_file()
    # the live build's verdicts came along: its outcome and the size check's
    live = eval_record.lookup(memory, old["baseline"]["record"]["key"])
    assert live is not None and stored_verdict(live) is not None

    # Imported once: a second worker process (a fresh memory) imports nothing more.
    from brain_pipeline.evaluation import judgements

    judgements._imported.clear()
    assert len(publications(judgement_memory(cfg))[0]) == len(old["publications"])

    # The first new evaluation judges against the imported baselines.
    outcome = evaluate_store_dir(cfg, cfg.build_dir)
    assert NO_KNOWN_ITEMS not in outcome.verdict.line()
    assert outcome.known_item_run is not None
    assert outcome.known_item_run.baseline_candidate == old_known["candidate"]


KILLED_MID_IMPORT = """
import os, signal, sys
from brain_pipeline.config import load_config, memory_of
from brain_pipeline.evaluation import judgements
from brain_pipeline.state.ledger import Ledger

real_sql, real_execute = Ledger.sql, Ledger.execute

def die_at_history(statement):
    if statement.startswith("INSERT INTO eval_history"):
        os.kill(os.getpid(), signal.SIGKILL)  # mid-import: outcomes and verdicts written

Ledger.sql = lambda self, statement: die_at_history(statement) or real_sql(self, statement)
Ledger.execute = lambda self, statement, params=(): (
    die_at_history(statement) or real_execute(self, statement, params))
judgements.ready(memory_of(load_config(sys.argv[1], env={})))
"""


def test_an_import_killed_midway_leaves_nothing_and_the_next_run_imports_all(
    tmp_path: Path,
) -> None:
    import signal
    import subprocess
    import sys

    with tarfile.open(FIXTURE_TAR) as archive:
        archive.extractall(tmp_path, filter="data")
    state = tmp_path / "build" / "state"
    old = json.loads((state / "eval-baseline.json").read_text())
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MID_IMPORT, str(tmp_path / "brain.yaml")],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL
    assert (state / "eval-baseline.json").is_file()  # not renamed: nothing was imported
    import sqlite3

    with sqlite3.connect(state / "ledger.sqlite") as db:
        assert db.execute("SELECT count(*) FROM claims").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM eval_outcomes").fetchone() == (0,)

    cfg = load_config(tmp_path / "brain.yaml", env={})
    memory = judgement_memory(cfg)
    found = load_baseline(memory)
    assert found.baseline is not None
    assert found.baseline.key == old["baseline"]["record"]["key"]
    assert len(publications(memory)[0]) == len(old["publications"])
    assert (state / "eval-baseline.json.imported").is_file()
