"""`brain-pipeline eval` run in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline_tests.cli.conftest import Project


def test_prints_the_table_and_passes(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"3 queries from {project.fixture}, 4 chunks")
    header = next(line for line in out.splitlines() if line.startswith("retriever"))
    assert header.split() == ["retriever", "recall@10", "MRR", "nDCG@10", "misses"]
    for name in ("legacy", "bm25", "hybrid (= bm25)"):
        row = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert row.split()[-4:] == ["1.000", "1.000", "1.000", "0/3"]
    assert "hybrid answered 3/3 queries with BM25" in out


def test_failed_thresholds_exit_non_zero_and_say_which(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.configure("  thresholds:\n    legacy:\n      max_misses: 0\n")
    project.write_fixture(project.fixture, [("kubernetes", "aws", [project.chunks[2].id])])
    assert main(["eval"]) == 1
    err = capsys.readouterr().err
    assert "evaluation FAILED" in err and "legacy: 1 misses > maximum 0" in err


def test_stale_ids_are_listed_and_fail(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.write_fixture(project.fixture, [("buckets", "aws", ["feedfacecafe"])])
    assert main(["eval"]) == 1
    captured = capsys.readouterr()
    assert "stale ids (1): feedfacecafe" in captured.out
    assert "stale fixture" in captured.err


def test_fixture_option_beats_environment_beats_config(
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from_env = tmp_path / "from-env.json"
    monkeypatch.setenv("BRAIN_EVAL_FIXTURE", str(from_env))
    assert main(["eval"]) == 2
    assert f"{from_env}: fixture file not found" in capsys.readouterr().err
    explicit = project.write_fixture(tmp_path / "explicit.json", [("buckets", "aws", [])])
    assert main(["eval", "--fixture", str(explicit)]) == 2
    assert "explicit.json: queries[0]: 'relevant' must be" in capsys.readouterr().err


def test_json_and_store_option(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", "--json", "--store", str(project.build)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in report["retrievers"]] == ["legacy", "bm25", "hybrid"]
    assert report["chunks"] == 4
    assert main(["eval", "--store", str(tmp_path / "nowhere")]) == 2
    assert "nowhere/knowledge-store.json" in capsys.readouterr().err


def test_unreadable_vectors_are_a_warning(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    (project.build / "embeddings.bin").write_bytes(b"JUNKJUNK" + bytes(40))
    assert main(["eval"]) == 0
    assert "bad magic" in capsys.readouterr().err
