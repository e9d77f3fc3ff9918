"""`brain-pipeline eval` against a baseline: regressions, --accept, --history, --csv."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.store import serialize_store
from brain_pipeline.evaluation import judgements
from brain_pipeline_tests.cli.conftest import Project
from brain_pipeline_tests.evaluation.helpers import make_chunk, memory_at


def bury_buckets(project: Project) -> None:
    """The planted edit: eleven new paragraphs out-score the labelled answer to "buckets"."""
    decoys = [
        make_chunk(f"Buckets, buckets and more buckets: note {i}.", source="aws/new.md")
        for i in range(11)
    ]
    (project.build / "knowledge-store.json").write_bytes(serialize_store(project.chunks + decoys))


def accept(note: str) -> int:
    return main(["eval", "--accept", "--note", note])


def test_without_a_baseline_it_says_so_in_one_line_and_passes(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "baseline:" in line]
    assert len(lines) == 1 and lines[0].startswith("no baseline: nothing has been published")


def test_a_new_miss_fails_names_the_query_and_what_displaced_it(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert accept("the first store") == 0
    bury_buckets(project)
    capsys.readouterr()
    assert main(["eval", "--per-query"]) == 1
    captured = capsys.readouterr()
    verdict = next(line for line in captured.out.splitlines() if line.startswith("FAILED:"))
    assert "'buckets' (aws) became a miss, rank 1 → miss" in verdict
    assert f"lost {project.chunks[1].id}" in verdict and "displaced by" in verdict
    assert "changes from the baseline:" in captured.out


def test_warn_mode_passes_with_a_warning(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert accept("the first store") == 0
    bury_buckets(project)
    project.configure("  on_regression: warn\n")
    assert main(["eval"]) == 0
    err = capsys.readouterr().err
    assert "warning: regression: hybrid: 'buckets' (aws) became a miss" in err


def test_accepting_records_the_note_and_clears_the_regression(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert accept("the first store") == 0
    bury_buckets(project)
    assert main(["eval", "--accept"]) == 2  # no note: refused
    assert accept("new bucket notes are the better answer") == 0
    assert main(["eval"]) == 0
    capsys.readouterr()
    assert main(["eval", "--history", "--csv", str(project.root / "history.csv")]) == 0
    out = capsys.readouterr().out
    assert "new bucket notes are the better answer" in out
    rows = list(csv.DictReader((project.root / "history.csv").open()))
    assert [r["kind"] for r in rows] == ["accepted", "accepted"]
    assert rows[0]["note"] == "new bucket notes are the better answer"
    assert float(rows[0]["bm25.ndcg_at_10"]) < float(rows[1]["bm25.ndcg_at_10"])
    assert rows[0]["bm25.ndcg_at_10.ci"]


def test_csv_holds_one_row_per_query_and_retriever(project: Project) -> None:
    out = project.root / "per-query.csv"
    assert main(["eval", "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 3 * 3
    row = next(r for r in rows if r["retriever"] == "bm25" and r["query"] == "buckets")
    assert row["first_rank"] == "1" and row["miss"] == "False"
    assert row["relevant_ranks"] == f"{project.chunks[1].id}:1"


@pytest.mark.parametrize("content", [b"{not json", b'{"format": 1, "baseline": 3}'])
def test_an_unreadable_old_baseline_file_is_no_baseline_not_a_crash(
    project: Project, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    state = project.build / "state"
    state.mkdir(exist_ok=True)
    (state / "eval-baseline.json").write_bytes(content)
    bury_buckets(project)
    assert main(["eval"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("no baseline: ") for line in out.splitlines())
    assert main(["eval", "--history"]) == 0
    assert "no publications recorded" in capsys.readouterr().err
    # read once on upgrade, kept for inspection, never read again
    assert (state / "eval-baseline.json.imported").read_bytes() == content


def test_a_damaged_baseline_blob_is_no_baseline(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert accept("v") == 0
    memory = memory_at(project.build)
    digest = str(memory.ledger.pointer(judgements.REGRESSION))
    next(memory.layout.blobs_dir.rglob(digest)).write_bytes(b"{damaged")
    bury_buckets(project)
    assert main(["eval"]) == 0
    assert "no baseline: its blob is unreadable" in capsys.readouterr().out


def test_history_without_publications_says_so(
    project: Project, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["eval", "--history"]) == 0
    assert "no publications recorded" in capsys.readouterr().err
