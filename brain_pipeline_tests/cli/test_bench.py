"""`brain-pipeline bench` run in-process on a tiny generated BEIR collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.cli.conftest import Project
from brain_pipeline_tests.evaluation.helpers import write_beir

FIGURES = ("nDCG@10", "Recall@10", "Recall@100", "MRR@10", "build", "queries/s")


def test_lexical_prints_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_beir(tmp_path / "tiny")
    assert main(["bench", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny (test): 3 queries, 5 documents, mode lexical")
    labels = [line.split()[0] for line in out.splitlines()[1:]]
    assert tuple(labels) == FIGURES
    assert main(["bench", str(dataset), "--split", "train", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["split"] == "train" and figures["queries"] == 1


def test_dense_caches_vectors_under_the_build_dir(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_beir(tmp_path / "tiny")
    assert main(["bench", str(dataset), "--mode", "hybrid", "--provider", "local", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["embedded_documents"] == 4 and first["model"] == "all-MiniLM-L6-v2-int8"
    assert first["fallback"] is None
    assert (project.build / "bench" / "tiny" / "embeddings.bin").is_file()
    assert main(["bench", str(dataset), "--mode", "dense", "--provider", "local", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["embedded_documents"] == 0 and second["mode"] == "dense"


def test_not_a_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(tmp_path)]) == 2
    assert "no corpus file" in capsys.readouterr().err
