"""`brain-pipeline eval` with no labels: the known-item table is the evaluation."""

from __future__ import annotations

import json

import pytest

from brain_pipeline.cli import main
from brain_pipeline.config import load_config
from brain_pipeline.corpus.store import serialize_store
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.service import evaluate_store_dir, record_as_baseline
from brain_pipeline_tests.cli.conftest import Project
from brain_pipeline_tests.evaluation.helpers import memory_at


def test_no_labels_print_the_known_item_table_and_pass(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.fixture.write_text(json.dumps({"queries": []}))
    assert main(["eval"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"0 queries from {project.fixture}, 4 chunks"
    assert not any(line.startswith("retriever") for line in out)  # no figures of nothing
    assert any(line.startswith("known items (no known-item baseline yet") for line in out)
    assert out[-1].startswith(
        f"PASSED: no labelled queries in {project.fixture}: the labelled thresholds are skipped"
    )

    # Published: the next evaluation prints found@10 per area.
    cfg = load_config(project.config, env={})
    outcome = evaluate_store_dir(cfg, project.build)
    record = eval_record.lookup(memory_at(project.build), str(outcome.record_key))
    assert record is not None
    record_as_baseline(cfg, record, kind="published")
    assert main(["eval"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(out) if line.strip().startswith("area "))
    assert out[header].split()[:5] == ["area", "items", "found", "before", "found"]
    rows = {line.split()[0]: line.split() for line in out[header + 1 : header + 3]}
    assert set(rows) == {"aws", "python"}
    assert rows["aws"][-1] == "pass"


def test_json_and_history_carry_the_known_item_figures(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """found@10 overall and per area, and per area the chunks and known items lost: in
    `eval --json`, and in each `eval --history` entry (and its table)."""
    project.fixture.write_text(json.dumps({"queries": []}))
    cfg = load_config(project.config, env={})
    layout = memory_at(project.build)
    first = evaluate_store_dir(cfg, project.build)
    record_as_baseline(cfg, eval_record.lookup(layout, str(first.record_key)) or {},
                       kind="published")
    kept = [c for c in project.chunks if c.source != "aws/iam.md"]  # aws: 3 -> 2 chunks
    (project.build / "knowledge-store.json").write_bytes(serialize_store(kept))
    capsys.readouterr()

    assert main(["eval", "--json"]) == 1  # a third of aws is gone: the check blocks
    document = json.loads(capsys.readouterr().out)
    known = document["known_items"]
    areas = known["areas"]
    assert set(areas) == {"aws", "python"}
    aws = areas["aws"]
    assert (aws["chunks_before"], aws["chunks_now"], aws["chunk_loss"]) == (3, 2, 0.3333)
    assert aws["verdict"] == "block" and areas["python"]["verdict"] == "pass"
    # Every chunk was a known item: the one whose file went is lost content, not found.
    assert (aws["items"], aws["found_now"], aws["lost_content"]) == (3, 2, 1)
    assert (aws["found_at_10"], aws["found_at_10_before"], aws["known_item_loss"]) == (
        0.6667, 1.0, 0.3333
    )
    assert (known["found"], known["asked"], known["found_at_10"]) == (3, 4, 0.75)
    assert any("area aws lost 33% of its chunks" in f for f in known["failures"])
    assert document["verdict"]["severity"] == "ERROR"
    assert document["verdict"]["rule"]["baseline"] == first.record_key

    # Accepted, then listed: the history entry carries the figures it went out on.
    assert main(["eval", "--accept", "--note", "iam notes moved out"]) == 0
    capsys.readouterr()
    assert main(["eval", "--history", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["kind"] for e in entries] == ["accepted", "published"]
    assert entries[0]["known_items"]["areas"]["aws"]["chunks_now"] == 2
    assert entries[0]["known_items"]["areas"]["aws"]["chunk_loss"] == 0.3333
    assert entries[1]["known_items"]["areas"] == {}  # the first: nothing to compare with
    assert entries[1]["known_items"]["baseline"].startswith("no known-item baseline yet")
    assert main(["eval", "--history"]) == 0
    table = capsys.readouterr().out.splitlines()
    columns = table[0].split()
    assert {"known_items.found_at_10", "known_items.lost_content"} <= set(columns)
    assert table[1].split()[columns.index("known_items.lost_content")] == "1"
    assert table[1].split()[columns.index("known_items.blocked_areas")] == "1"
