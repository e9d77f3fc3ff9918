"""Our store bytes against the independent JavaScript reference, run by Node.js."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline_tests.corpus.corpora import build_edge_corpus, build_random_corpus


def _first_difference(ours: bytes, theirs: bytes) -> str:
    pairs = zip(ours, theirs, strict=False)
    at = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(ours), len(theirs)))
    window = slice(max(at - 80, 0), at + 80)
    return f"first difference at byte {at}: ours {ours[window]!r} vs {theirs[window]!r}"


def test_edge_case_corpus_matches_reference(
    tmp_path: Path, reference: Callable[[Path], bytes]
) -> None:
    root = tmp_path / "corpus"
    build_edge_corpus(root, tmp_path / "outside")
    ours = ingest_corpus(root).store_bytes()
    theirs = reference(root)
    assert ours == theirs, _first_difference(ours, theirs)
    assert len(ours) > 10_000  # the corpus really produced a store worth comparing


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_corpus_matches_reference(
    tmp_path: Path, reference: Callable[[Path], bytes], seed: int
) -> None:
    root = tmp_path / "corpus"
    build_random_corpus(root, seed)
    result = ingest_corpus(root)
    ours = result.store_bytes()
    theirs = reference(root)
    assert ours == theirs, _first_difference(ours, theirs)
    assert result.duplicates_collapsed > 0 and len(result.chunks) > 100


def test_sample_corpus_matches_reference(reference: Callable[[Path], bytes]) -> None:
    sample = Path(__file__).resolve().parents[2] / "examples" / "curated-content"
    result = ingest_corpus(sample)
    ours = result.store_bytes()
    theirs = reference(sample)
    assert ours == theirs, _first_difference(ours, theirs)
    assert len(result.chunks) > 100
