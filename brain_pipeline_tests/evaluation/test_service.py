"""The evaluation record keeps the whole verdict: judged once, read back by the gate."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.service import (
    EvaluationOutcome,
    accept_evaluation,
    evaluate_store_dir,
    record_as_baseline,
    stored_verdict,
)
from brain_pipeline.publishing.gate import decide
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus.views import clear_views
from brain_pipeline_tests.evaluation.helpers import make_chunk, memory_at

ANSWER = make_chunk("Security groups are stateful: return traffic is allowed automatically.")
BASE = [ANSWER, *(make_chunk(f"Filler paragraph {i} about routing tables.") for i in range(5))]
DECOYS = [
    make_chunk(f"Security groups, stateful security groups, security groups again #{i}.")
    for i in range(10)
]


class Build:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "build"
        self.dir.mkdir()
        self.layout = StateLayout.of(self.dir)
        self.memory = memory_at(self.dir)
        fixture = tmp_path / "fixture.json"
        query = {"query": "stateful security groups", "area": "aws", "relevant": [ANSWER.id]}
        fixture.write_text(json.dumps({"queries": [query]}))
        config = tmp_path / "corpus_config.yaml"
        config.write_text(
            f"build_dir: {self.dir}\nembedding:\n  provider: none\n"
            f"evaluation:\n  fixture: {fixture}\n"
        )
        self.cfg: BrainConfig = load_config(config, env={})

    def store(self, chunks: list[Chunk]) -> None:
        tmp = self.dir / ".store.tmp"
        tmp.write_bytes(serialize_store(chunks))
        os.replace(tmp, self.dir / "knowledge-store.json")
        clear_views()  # as a new process would see it

    def evaluate(self) -> EvaluationOutcome:
        return evaluate_store_dir(self.cfg, self.dir)


@pytest.fixture
def build(tmp_path: Path) -> Build:
    return Build(tmp_path)


def test_the_record_holds_the_verdict_the_evaluation_judged(build: Build) -> None:
    build.store(BASE)
    outcome = build.evaluate()
    assert outcome.record_key is not None
    stored = stored_verdict(eval_record.lookup(build.memory, outcome.record_key))
    assert stored == outcome.verdict and stored.severity == "PASS"


def test_a_record_from_before_verdicts_lends_its_report_and_gains_a_verdict(
    build: Build,
) -> None:
    build.store(BASE)
    key = build.evaluate().record_key
    assert key is not None
    old = dict(eval_record.lookup(build.memory, key) or {})
    old.pop("verdict")
    eval_record.save(build.memory, key, {**old, "passed": True, "failures": []})
    # Until the check judges it again, a publish gate finds no verdict and refuses.
    assert stored_verdict(eval_record.lookup(build.memory, key)) is None
    assert not decide(None, force=False, store_chunk_count=len(BASE)).allowed
    again = build.evaluate()
    assert again.reused and again.verdict.severity == "PASS"
    assert stored_verdict(eval_record.lookup(build.memory, key)) == again.verdict


def test_an_accepted_regression_is_stored_as_accepted_and_may_be_published(
    build: Build,
) -> None:
    build.store(BASE)
    first = build.evaluate()
    record = eval_record.lookup(build.memory, str(first.record_key))
    assert record is not None
    record_as_baseline(build.cfg, record, kind="published")

    build.store([*BASE, *DECOYS])  # buries the answer: a new miss of the agent's retriever
    regressed = build.evaluate()
    assert regressed.verdict.severity == "ERROR"
    assert [r.query for r in regressed.verdict.regressions] == ["stateful security groups"]
    key = str(regressed.record_key)
    refused = decide(
        stored_verdict(eval_record.lookup(build.memory, key)), force=False, store_chunk_count=16
    )
    assert not refused.allowed and "became a miss" in refused.reason

    accepted = accept_evaluation(build.cfg, key, "decoys are the better answer")
    assert accepted is not None and accepted.severity == "PASS"
    stored = stored_verdict(eval_record.lookup(build.memory, key))
    assert stored == accepted and stored.accepted == "decoys are the better answer"
    assert decide(stored, force=False, store_chunk_count=16).allowed
