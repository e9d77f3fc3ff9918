"""BEIR loading and benchmarking on a tiny generated collection."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from brain_pipeline.corpus.store import chunk_id
from brain_pipeline.evaluation.beir import (
    BeirFormatError,
    document_chunks,
    load_beir,
    run_bench,
)
from brain_pipeline_tests.evaluation.helpers import WordHashEmbedder, write_beir


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "tiny")


def test_load_indexes_title_space_text_and_keeps_judged_queries(dataset_dir: Path) -> None:
    data = load_beir(dataset_dir)
    assert data.name == "tiny" and data.split == "test"
    assert data.doc_ids == ["d1", "d2", "d3", "d4", "d5"]
    assert data.documents[0] == "Vitamin D Vitamin D deficiency and bone fractures."
    assert data.documents[4] == " Astronomy of distant stars."
    assert data.query_ids == ["q1", "q2", "q3"]  # q4 unjudged, q5 judged only 0
    assert data.qrels[0] == {"d1": 2.0, "d5": 0.0}


def test_split_selects_its_own_files(dataset_dir: Path) -> None:
    train = load_beir(dataset_dir, "train")
    assert train.query_ids == ["t1"] and train.queries == ["stars"]
    with pytest.raises(BeirFormatError, match="qrels/dev.tsv, qrels_dev.tsv"):
        load_beir(dataset_dir, "dev")


def test_format_errors_name_file_and_line(dataset_dir: Path) -> None:
    (dataset_dir / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1 d1 1\n")
    with pytest.raises(BeirFormatError, match=r"qrels.tsv:2: expected query-id"):
        load_beir(dataset_dir)
    (dataset_dir / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td1\t1\n")
    with pytest.raises(BeirFormatError, match="absent from queries.jsonl, e.g. q9"):
        load_beir(dataset_dir)
    with (dataset_dir / "corpus.jsonl").open("a") as handle:
        handle.write('{"title": "no id"}\n')
    with pytest.raises(BeirFormatError, match=r"corpus.jsonl:6: expected an object"):
        load_beir(dataset_dir)


def test_duplicate_texts_share_one_chunk(dataset_dir: Path) -> None:
    chunks, docs_of = document_chunks(load_beir(dataset_dir))
    assert len(chunks) == 4
    sleep = chunk_id("Sleep Sleep deprivation harms memory.")
    assert docs_of[sleep] == ["d3", "d4"]
    assert {c.area for c in chunks} == {"tiny"}


def test_lexical_figures_match_the_hand_computation(dataset_dir: Path) -> None:
    result = run_bench(load_beir(dataset_dir), "lexical")
    # q1, q2: the judged document first. q3: d3 and d4 tie and ties go by id, so the
    # relevant d4 is second: nDCG 1/log2(3), RR 1/2.
    assert result.ndcg_at_10 == pytest.approx((1 + 1 + 1 / math.log2(3)) / 3)
    assert result.mrr_at_10 == pytest.approx((1 + 1 + 0.5) / 3)
    assert result.recall_at_10 == 1.0 and result.recall_at_100 == 1.0
    assert (result.queries, result.documents) == (3, 5)
    assert result.build_seconds >= 0 and result.queries_per_second > 0
    assert "nDCG@10      " in result.to_text()
    assert result.timing == "warm: median of 3 passes after a warm-up pass, top 100"
    assert f"queries/s    {result.queries_per_second:.1f} (warm: median of 3" in result.to_text()


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_vector_modes_cache_document_vectors(dataset_dir: Path, tmp_path: Path, mode: str) -> None:
    data = load_beir(dataset_dir)
    cache = tmp_path / "bench" / "tiny" / "embeddings.bin"
    embedder = WordHashEmbedder()
    first = run_bench(data, mode, embedder=embedder, cache_path=cache)
    assert first.embedded_documents == 4  # five documents, one duplicate text
    assert embedder.documents_embedded == 4
    assert cache.is_file()
    assert first.fallback is None and first.model == "word-hash-16"
    assert first.recall_at_100 == 1.0  # four chunks: everything is retrieved
    second = run_bench(data, mode, embedder=embedder, cache_path=cache)
    assert second.embedded_documents == 0 and embedder.documents_embedded == 4
    assert second.ndcg_at_10 == first.ndcg_at_10


def test_vector_modes_need_an_embedder(dataset_dir: Path) -> None:
    with pytest.raises(ValueError, match="needs an embedder"):
        run_bench(load_beir(dataset_dir), "dense")
    with pytest.raises(ValueError, match="mode must be one of"):
        run_bench(load_beir(dataset_dir), "fuzzy")
