"""`brain-pipeline eval` with no labels: the known-item table is the evaluation."""

from __future__ import annotations

import json

import pytest

from brain_pipeline.cli import main
from brain_pipeline.config import load_config
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.service import evaluate_store_dir, record_as_baseline
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.cli.conftest import Project


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
    record = eval_record.lookup(StateLayout.of(project.build), str(outcome.record_key))
    assert record is not None
    record_as_baseline(cfg, record, kind="published")
    assert main(["eval"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(out) if line.strip().startswith("area "))
    assert out[header].split()[:5] == ["area", "items", "found", "before", "found"]
    rows = {line.split()[0]: line.split() for line in out[header + 1 : header + 3]}
    assert set(rows) == {"aws", "python"}
    assert rows["aws"][-1] == "pass"
