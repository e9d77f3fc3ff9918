"""`brain-pipeline status` through the real command dispatcher."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.publishing.local import publish_local
from brain_pipeline.publishing.manifest import build_manifest, corpus_digest, sha256_hex
from brain_pipeline_tests.publishing.conftest import AGENT_MODEL, SampleBuild


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "aws-tutor").mkdir(parents=True)
    (root / "aws-tutor" / "vpc.md").write_text("# VPC\n\nA virtual private cloud is a network.\n")
    (root / "python-tutor").mkdir()
    (root / "python-tutor" / "lists.md").write_text("Lists are mutable sequences in Python.\n")
    return root


def publish_from(build: SampleBuild, root: Path, corpus: Path) -> None:
    manifest = build_manifest(
        build.store_bytes,
        build.embeddings_bytes,
        build.chunks,
        {"bm25": {"ndcg@10": 0.75}},
        corpus_digest(corpus),
        "run-42",
    )
    publish_local(
        build.store_bytes,
        build.embeddings_bytes,
        root,
        agent_query_model=AGENT_MODEL,
        manifest=manifest,
    )


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_nothing_published(publish_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = status(capsys, "--root", str(publish_root))
    assert code == 1
    assert "nothing published" in err and str(publish_root) in err


def test_shows_what_is_live(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (publish_root / "dist").mkdir()
    publish_from(build, publish_root, corpus)
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus))
    assert code == 0
    assert "run-42" in out
    assert re.search(r"^\s+aws-tutor\s+3$", out, re.MULTILINE)
    assert re.search(r"^\s+python-tutor\s+2$", out, re.MULTILINE)
    assert f"Chunks: {len(build.chunks)}" in out
    assert AGENT_MODEL in out and "coverage 100.0%" in out
    assert "bm25.ndcg@10: 0.75" in out
    assert sha256_hex(build.store_bytes) in out and sha256_hex(build.embeddings_bytes) in out
    assert out.count("matches manifest") == 2
    assert "Corpus: unchanged" in out


def test_json_output(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish_from(build, publish_root, corpus)
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["published"] is True
    assert report["manifest"]["chunks_per_area"] == {"aws-tutor": 3, "python-tutor": 2}
    assert report["manifest"]["store"]["sha256"] == sha256_hex(build.store_bytes)
    assert report["corpus"]["state"] == "unchanged"
    assert all(copy["matches"] for copy in report["copies"].values())


def test_json_output_when_nothing_is_published(
    publish_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = status(capsys, "--root", str(publish_root), "--json")
    assert code == 1
    assert json.loads(out)["published"] is False


def test_mtime_only_change_is_not_a_corpus_change(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish_from(build, publish_root, corpus)
    page = corpus / "aws-tutor" / "vpc.md"
    stat = page.stat()
    os.utime(page, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**10))
    _, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus), "--json")
    assert json.loads(out)["corpus"]["state"] == "unchanged"


def test_content_change_is_reported(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish_from(build, publish_root, corpus)
    (corpus / "python-tutor" / "lists.md").write_text("Lists are mutable; tuples are not.\n")
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus))
    assert code == 0
    assert "Corpus: CHANGED" in out


def test_a_copy_that_no_longer_matches_exits_3(
    build: SampleBuild, publish_root: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (publish_root / "dist").mkdir()
    publish_from(build, publish_root, corpus)
    (publish_root / "dist" / "storage" / "knowledge-store.json").write_bytes(b"[]")
    code, out, _ = status(capsys, "--root", str(publish_root), "--corpus", str(corpus))
    assert code == 3
    assert "MISMATCH" in out and "knowledge-store.json" in out


def test_defaults_come_from_the_configuration(
    build: SampleBuild,
    publish_root: Path,
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    publish_from(build, publish_root, corpus)
    monkeypatch.chdir(tmp_path)  # no corpus_config.yaml here: built-in defaults + env
    monkeypatch.setenv("BRAIN_PUBLISH_ROOT", str(publish_root))
    monkeypatch.setenv("CURATED_CONTENT_PATH", str(corpus))
    code, out, _ = status(capsys, "--json")
    assert code == 0
    report = json.loads(out)
    assert Path(report["root"]) == publish_root
    assert report["corpus"]["state"] == "unchanged"
