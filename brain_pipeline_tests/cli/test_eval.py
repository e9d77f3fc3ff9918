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


def test_a_pass_ends_with_a_verdict_naming_each_bound(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.configure("  thresholds:\n    bm25:\n      min_ndcg_at_10: 0.5\n"
                      "      max_misses: 1\n    legacy:\n      min_recall_at_10: 0.9\n")
    assert main(["eval"]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last == ("PASSED: bm25 nDCG@10 1.000 >= 0.500, misses 0 <= 1; "
                    "legacy recall@10 1.000 >= 0.900")


def test_a_pass_without_thresholds_says_so(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval"]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == (
        "PASSED: no thresholds configured")


def test_a_failure_verdict_names_every_reason(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.configure("  thresholds:\n    legacy:\n      max_misses: 0\n"
                      "      min_ndcg_at_10: 0.1\n")
    project.write_fixture(project.fixture, [("kubernetes", "aws", [project.chunks[2].id]),
                                            ("buckets", "aws", ["feedfacecafe"])])
    assert main(["eval"]) == 1
    captured = capsys.readouterr()
    last = captured.out.rstrip().splitlines()[-1]
    assert last.startswith("FAILED: stale fixture: 1 labelled chunk id(s)")
    assert "feedfacecafe" in last
    assert last.endswith("; legacy: nDCG@10 0.000 < minimum 0.100; legacy: 2 misses > maximum 0")
    assert "evaluation FAILED:" in captured.err


def test_json_keeps_stdout_one_document_and_puts_the_verdict_on_stderr(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.configure("  thresholds:\n    bm25:\n      max_misses: 0\n")
    assert main(["eval", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["chunks"] == 4
    assert "PASSED: bm25 misses 0 <= 0" in captured.err.splitlines()


def test_progress_goes_to_stderr_one_line_per_retriever(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval"]) == 0
    captured = capsys.readouterr()
    assert "eval:" not in captured.out
    done = [line for line in captured.err.splitlines() if " done, " in line]
    assert [line.split()[1] for line in done] == ["legacy", "bm25", "hybrid"]
    assert all(line.startswith("eval: ") and "3 queries in " in line for line in done)


def test_progress_counts_only_every_few_seconds_of_the_clock() -> None:
    from brain_pipeline.cli.eval import EvalProgress

    now = [0.0]
    lines: list[str] = []
    progress = EvalProgress(lines.append, every=2.0, clock=lambda: now[0])
    progress("legacy", 0, 30)
    for done in range(1, 31):  # legacy: 1/64 s per query, never worth a count
        now[0] += 1 / 64  # (binary fractions: exact sums)
        progress("legacy", done, 30)
    progress("hybrid", 0, 30)
    for done in range(1, 31):  # hybrid: 0.5 s per query (query vectors from a service)
        now[0] += 0.5
        progress("hybrid", done, 30)
    assert lines == [
        "eval: legacy done, 30 queries in 0.5s",
        "eval: hybrid 4/30 queries",
        "eval: hybrid 8/30 queries",
        "eval: hybrid 12/30 queries",
        "eval: hybrid 16/30 queries",
        "eval: hybrid 20/30 queries",
        "eval: hybrid 24/30 queries",
        "eval: hybrid 28/30 queries",
        "eval: hybrid done, 30 queries in 15.0s",
    ]
