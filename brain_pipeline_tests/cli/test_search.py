"""`brain-pipeline search` run in-process, and once as a subprocess for start-up cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.embedding.builder import build_embeddings
from brain_pipeline.embedding.local import LocalEmbedder
from brain_pipeline_tests.cli.conftest import Project


def test_passages_under_provenance_lines(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "private network VPC", "--area", "aws", "--mode", "lexical"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "--- passage 1 — aws/vpc.md § VPC ---\nAmazon VPC gives you a private network.\n"
    )
    assert main(["search", "buckets", "--area", "aws", "--mode", "lexical"]) == 0
    assert capsys.readouterr().out == "--- passage 1 — aws/s3.md ---\nS3 buckets hold objects.\n"


def test_hybrid_without_usable_vectors_notes_why(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "buckets", "--area", "aws", "--mode", "hybrid", "--limit", "1"]) == 0
    captured = capsys.readouterr()
    assert "searching lexically: no readable embeddings.bin" in captured.err
    assert captured.out.count("--- passage") == 1


def test_hybrid_with_matching_local_vectors(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    build_embeddings(project.chunks, project.build / "embeddings.bin", LocalEmbedder())
    project.configure(provider="local")
    assert main(["search", "virtual private network", "--area", "aws", "--json"]) == 0
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["mode"] == "hybrid" and answer["fallback"] is None
    assert answer["hits"][0]["id"] == project.chunks[0].id
    assert answer["hits"][0]["heading"] == "VPC"
    assert captured.err == ""


def test_batch_queries_in_and_answers_out(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "queries.jsonl"
    batch.write_text(
        '{"qid": "a", "query": "buckets", "area": "aws"}\n'
        '{"qid": "b", "query": "ordered lists", "area": "python"}\n'
    )
    code = main(["search", "--queries", str(batch), "--store", str(project.build), "--json"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["qid"] for line in lines] == ["a", "b"]
    assert lines[0]["ids"][0] == project.chunks[1].id
    assert lines[1]["ids"] == [project.chunks[3].id]
    assert all(len(line["ids"]) == len(line["scores"]) for line in lines)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "x", "--area", "gcp"], "no area 'gcp'; areas: aws, python"),
        (["search", "x"], "--area is required"),
        (["search"], "give either QUERY or --queries FILE"),
        (["search", "x", "--area", "aws", "--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_usage_errors(
    project: Project, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_help_does_not_import_dagster_or_the_core() -> None:
    probe = (
        "import sys\n"
        "from brain_pipeline.cli import main\n"
        "try:\n"
        "    main(['search', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = [m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')\n"
        "          or m.startswith('brain_pipeline.evaluation')\n"
        "          or m.startswith('brain_pipeline.retrieval')]\n"
        "print('LOADED', loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "--mode {hybrid,lexical}" in done.stdout
    assert "LOADED []" in done.stdout


def test_control_characters_in_the_corpus_never_reach_the_terminal_raw(
    project: Project,
) -> None:
    """`ESC ]0;...BEL` would retitle the terminal, `ESC [2K` + CR forge a line."""
    from brain_pipeline.corpus.store import serialize_store
    from brain_pipeline_tests.evaluation.helpers import make_chunk

    hostile = make_chunk(
        "Buckets\x1b]0;owned\x07 hold\x1b[2K\rforged: all tests passed\x9b31m",
        source="aws/\x1b[31mred.md",
        heading="S3\x1b[2K\r",
    )
    (project.build / "knowledge-store.json").write_bytes(serialize_store([hostile]))
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "brain_pipeline.cli", "search", "buckets", "--area", "aws"]
            + ["--mode", "lexical", *extra],
            capture_output=True,
            timeout=120,
            check=True,
        )
        for control in (b"\x1b", b"\x07", b"\r", "\x9b".encode()):
            assert control not in done.stdout + done.stderr
        assert b"Buckets\\u001b]0;owned\\u0007 hold\\u001b[2K" in done.stdout
    assert json.loads(done.stdout)["hits"][0]["content"] == hostile.content
