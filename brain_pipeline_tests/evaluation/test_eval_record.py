"""The evaluation record: unchanged inputs reuse the outcome and say so; a change re-runs."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.service import EvaluationOutcome, evaluate_store_dir
from brain_pipeline.retrieval.vectors import encode_embeddings, quantize
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus.views import clear_views
from brain_pipeline_tests.evaluation.helpers import make_chunk, memory_at

T1 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
T2 = datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.build = tmp_path / "build"
        self.build.mkdir()
        self.fixture = tmp_path / "fixture.json"
        self.chunks = [
            make_chunk("Amazon VPC gives you a private network.", source="aws/vpc.md"),
            make_chunk("S3 buckets hold objects.", source="aws/s3.md"),
            make_chunk("Python lists are ordered.", area="python", source="py/lists.md"),
        ]
        self.write_store(self.chunks)
        self.write_fixture([("private network", "aws", [self.chunks[0].id])])

    def write_store(self, chunks: list[Chunk]) -> None:
        tmp = self.build / ".store.tmp"
        tmp.write_bytes(serialize_store(chunks))
        os.replace(tmp, self.build / "knowledge-store.json")

    def write_fixture(self, queries: list[tuple[str, str, list[str]]]) -> None:
        rows = [{"query": q, "area": a, "relevant": r} for q, a, r in queries]
        self.fixture.write_text(json.dumps({"queries": rows}))

    def config(self, extra: str = "") -> BrainConfig:
        path = self.tmp / "corpus_config.yaml"
        path.write_text(
            f"build_dir: {self.build}\nembedding:\n  provider: none\n"
            f"evaluation:\n  fixture: {self.fixture}\n{extra}"
        )
        return load_config(path, env={})

    def evaluate(self, cfg: BrainConfig | None = None, now: datetime = T1) -> EvaluationOutcome:
        clear_views()  # every call stands for a new process
        return evaluate_store_dir(cfg or self.config(), self.build, now=lambda: now)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_unchanged_inputs_reuse_the_record_and_say_when(setup: Setup) -> None:
    first = setup.evaluate(now=T1)
    assert not first.reused and not first.failures
    assert first.evaluated_at == T1.isoformat(timespec="seconds")
    second = setup.evaluate(now=T2)
    assert second.reused
    assert second.evaluated_at == T1.isoformat(timespec="seconds")
    for field in ("failures", "stale_ids", "flat_metrics", "markdown", "record_key"):
        assert getattr(second, field) == getattr(first, field)
    assert second.report.to_dict() == first.report.to_dict()
    record = eval_record.lookup(memory_at(setup.build), None)
    assert record is not None and record["key"] == first.record_key


@pytest.mark.parametrize("change", ["store", "fixture", "thresholds", "embeddings"])
def test_any_changed_input_re_evaluates(setup: Setup, change: str) -> None:
    setup.evaluate(now=T1)
    cfg = setup.config()
    if change == "store":
        extra = make_chunk("EC2 instances run virtual machines.", source="aws/ec2.md")
        setup.write_store([*setup.chunks, extra])
    elif change == "fixture":
        setup.write_fixture([("buckets", "aws", [setup.chunks[1].id])])
    elif change == "thresholds":
        cfg = setup.config("  thresholds:\n    bm25:\n      max_misses: 0\n")
    else:
        matrix = quantize([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        data = encode_embeddings("m", [c.id for c in setup.chunks], matrix)
        (setup.build / "embeddings.bin").write_bytes(data)
    again = setup.evaluate(cfg, now=T2)
    assert not again.reused
    assert again.evaluated_at == T2.isoformat(timespec="seconds")


def test_a_failing_outcome_is_reused_as_failing(setup: Setup) -> None:
    setup.write_fixture([("buckets", "aws", ["feedfacecafe"])])
    first = setup.evaluate()
    second = setup.evaluate(now=T2)
    assert second.reused and second.failures == first.failures
    assert any("stale fixture" in f for f in second.failures)


def test_reuse_can_be_refused_and_a_missing_store_is_never_recorded(setup: Setup) -> None:
    setup.evaluate()
    forced = evaluate_store_dir(setup.config(), setup.build, reuse=False, now=lambda: T2)
    assert not forced.reused
    empty = setup.tmp / "empty"
    empty.mkdir()
    outcome = evaluate_store_dir(setup.config(), empty)
    assert outcome.failures and outcome.record_key is None
    latest = eval_record.lookup(memory_at(setup.build), None)
    assert latest is not None and latest["key"] == forced.record_key


def test_the_record_keeps_several_keys(setup: Setup) -> None:
    layout = memory_at(setup.build)
    keys: list[str] = []
    for n in range(3):
        setup.write_fixture([(f"private network {n}", "aws", [setup.chunks[0].id])])
        key = setup.evaluate().record_key
        assert key is not None
        keys.append(key)
    assert all(eval_record.lookup(layout, k) is not None for k in keys)
    assert eval_record.lookup(layout, "0" * 64) is None


def test_evaluation_inputs_name_the_record_of_the_current_bytes(setup: Setup) -> None:
    from brain_pipeline.evaluation.service import evaluation_inputs

    outcome = setup.evaluate()
    inputs = evaluation_inputs(setup.config(), setup.build)
    assert inputs is not None and inputs.key() == outcome.record_key
    layout = memory_at(setup.build)
    record = eval_record.lookup(layout, inputs.key())
    assert record is not None and record["verdict"]["severity"] == "PASS"
    setup.write_store([*setup.chunks[:2]])  # the bytes about to be published changed
    clear_views()
    changed = evaluation_inputs(setup.config(), setup.build)
    assert changed is not None and eval_record.lookup(layout, changed.key()) is None
    assert evaluation_inputs(setup.config(), setup.tmp / "nowhere") is None


def test_a_hash_the_writing_asset_stamped_is_not_computed_again(tmp_path: Path) -> None:
    """The embeddings step stamps embeddings.bin with its sha256; the evaluation takes it
    from there while the file is untouched, and hashes the file once it changed."""
    import hashlib

    from brain_pipeline.state.records import AssetRecord, FileStamp, write_record

    layout = StateLayout.of(tmp_path)
    vectors = layout.embeddings_file
    vectors.write_bytes(b"first vectors")
    stamped = "0" * 64  # not the file's hash: proves the stamp, not the bytes, answered
    record = AssetRecord(
        asset="embeddings",
        data_version="v",
        code_version="c",
        inputs={},
        outputs={vectors.name: FileStamp.of(vectors, stamped)},
    )
    write_record(layout, record)
    assert eval_record.known_sha256(layout, vectors) == stamped
    vectors.write_bytes(b"other vectors")  # same size would not matter: mtime/inode move
    os.utime(vectors, ns=(1, 1))
    fresh = hashlib.sha256(b"other vectors").hexdigest()
    assert eval_record.known_sha256(layout, vectors) == fresh
    assert eval_record.known_sha256(layout, tmp_path / "absent.bin") is None
