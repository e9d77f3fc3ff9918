"""The README: "When several `status` conditions hold, the first of 4, 1, 3, 5, 6, 2 wins."

Each case sets up two conditions at once and expects the earlier one's code. (3 over 2
is in publishing/test_status_cli.py; 4 over the rest in publishing/test_fault_injection.py
needs an interrupted commit.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.observation import corpus_digest
from brain_pipeline.publishing.local import publish_local
from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline_tests.publishing.conftest import AGENT_MODEL, make_build


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No configuration (so no bucket) and a small corpus under tmp_path."""
    for name in ("BRAIN_CONFIG", "S3_BUCKET_NAME", "AWS_S3_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus" / "aws-tutor").mkdir(parents=True)
    (tmp_path / "corpus" / "aws-tutor" / "vpc.md").write_text("A VPC is a private network.\n")
    (tmp_path / "agent").mkdir()
    return tmp_path


def _publish(place: Path) -> None:
    build = make_build()
    manifest = build_manifest(
        build.store,
        build.embeddings,
        build.chunks,
        {"bm25": {"ndcg@10": 0.75}},
        corpus_digest(place / "corpus"),
        "run-7",
    )
    publish_local(
        build.store, build.embeddings, place / "agent", agent_query_model=AGENT_MODEL,
        manifest=manifest,
    )


def _status(place: Path, *extra: str) -> int:
    return main(["status", "--root", str(place / "agent"), "--corpus", str(place / "corpus"),
                 *extra])


def test_nothing_published_wins_over_an_unreadable_corpus(place: Path) -> None:
    shutil.rmtree(place / "corpus")
    assert _status(place) == 1


def test_a_mismatched_copy_wins_over_a_bucket_that_differs(place: Path) -> None:
    _publish(place)
    (place / "agent" / "src" / "storage" / "embeddings.bin").write_bytes(b"PATBEMB1")
    assert _status(place, "--s3") == 3


def test_a_bucket_that_differs_wins_over_an_unreadable_corpus(place: Path) -> None:
    _publish(place)
    shutil.rmtree(place / "corpus")
    assert _status(place) == 6  # alone, the corpus says 6
    assert _status(place, "--s3") == 5


def test_an_unreadable_corpus_is_never_current_nor_stale(place: Path) -> None:
    _publish(place)
    assert _status(place) == 0
    (place / "corpus" / "aws-tutor" / "vpc.md").write_text("edited\n")
    assert _status(place) == 2
    shutil.rmtree(place / "corpus")
    assert _status(place) == 6
