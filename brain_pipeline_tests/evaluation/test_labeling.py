"""The labelling assistant: both top lists merged for a person to judge, labels added and
removed in the fixture file without a stale id ever getting in, and chunks found by text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.evaluation.fixture import Fixture, LabelledQuery, load_fixture
from brain_pipeline.evaluation.labeling import (
    LabelError,
    edit_labels,
    find_by_text,
    label_candidates,
    labelled_ids,
)
from brain_pipeline.retrieval.vectors import EmbeddingStore, quantize
from brain_pipeline_tests.evaluation.helpers import WordHashEmbedder, make_chunk

VPC = make_chunk(
    "A VPC is a private network.\n\nSubnets split the VPC.\nRoute tables steer traffic.",
    source="aws/vpc.md",
    heading="VPC",
)
NAT = make_chunk("A NAT gateway lets private subnets reach the internet.", source="aws/nat.md")
BUCKETS = make_chunk("Buckets hold objects; versioning keeps old copies.", source="aws/s3.md")
LISTS = make_chunk("Python lists are ordered and mutable.", area="python", source="py/l.md")
CHUNKS = [VPC, NAT, BUCKETS, LISTS]


def _fixture(*queries: tuple[str, str, list[str]]) -> Fixture:
    return Fixture(tuple(LabelledQuery(q, a, tuple(r)) for q, a, r in queries))


def test_without_vectors_both_lists_are_bm25_and_say_so() -> None:
    fixture = _fixture(("private network", "aws", [NAT.id]))
    found = label_candidates(
        CHUNKS, "private network", "aws", fixture=fixture, hybrid_note="no vectors here"
    )
    assert found.hybrid_mode == "lexical" and found.hybrid_note == "no vectors here"
    assert [c.id for c in found.candidates] == [VPC.id, NAT.id]  # BUCKETS shares no word
    assert [(c.bm25_rank, c.hybrid_rank) for c in found.candidates] == [(1, 1), (2, 2)]
    first, second = found.candidates
    assert (first.source, first.heading, first.labelled) == ("aws/vpc.md", "VPC", False)
    assert first.first_lines == "A VPC is a private network.\nSubnets split the VPC."
    assert second.labelled and found.labelled == [NAT.id]


def test_with_vectors_the_hybrid_list_adds_what_bm25_misses() -> None:
    embedder = WordHashEmbedder()
    aws = [c for c in CHUNKS if c.area == "aws"]
    vectors = quantize(embedder.embed_documents([c.content for c in aws]))
    store = EmbeddingStore(embedder.name, embedder.dimension, [c.id for c in aws], vectors)
    found = label_candidates(
        CHUNKS,
        "private network",
        "aws",
        embeddings=store,
        query_embedder=embedder.embed_query,
        query_model=embedder.name,
        hybrid_note="not used: hybrid answered",
    )
    assert found.hybrid_mode == "hybrid" and found.hybrid_note is None
    ranks = {c.id: (c.bm25_rank, c.hybrid_rank) for c in found.candidates}
    assert set(ranks) == {VPC.id, NAT.id, BUCKETS.id}
    assert ranks[BUCKETS.id][0] is None and ranks[BUCKETS.id][1] is not None
    assert found.candidates[-1].id == BUCKETS.id  # ranked by its best rank: last
    text = found.to_text()
    assert f"   —      3  {BUCKETS.id}  aws/s3.md" in text


def test_candidates_are_merged_by_their_best_rank_in_either_list() -> None:
    """A paraphrase hybrid ranks first sits beside BM25's first, not after BM25's list."""
    texts = [
        "the private network is the VPC",
        "a private bucket",
        "network private gateway the",
        "the the the is a an",
        "is it the one",
        "private private private",
        "what is in the network",
        "an elastic network interface",
    ]
    chunks = CHUNKS + [make_chunk(t, source=f"aws/x{n}.md") for n, t in enumerate(texts)]
    embedder = WordHashEmbedder()
    aws = [c for c in chunks if c.area == "aws"]
    vectors = quantize(embedder.embed_documents([c.content for c in aws]))
    store = EmbeddingStore(embedder.name, embedder.dimension, [c.id for c in aws], vectors)
    found = label_candidates(
        chunks,
        "the network",
        "aws",
        embeddings=store,
        query_embedder=embedder.embed_query,
        query_model=embedder.name,
        limit=3,
    )
    ranks = [(c.bm25_rank, c.hybrid_rank) for c in found.candidates]
    assert ranks == [(1, 3), (3, 1), (2, 2)]


def test_an_unknown_area_or_a_bad_limit_is_refused() -> None:
    with pytest.raises(LabelError, match="no area 'gcp' in the store; areas: aws, python"):
        label_candidates(CHUNKS, "network", "gcp")
    with pytest.raises(LabelError, match="none: the store is empty"):
        label_candidates([], "network", "aws")
    with pytest.raises(LabelError, match="--limit must be at least 1"):
        label_candidates(CHUNKS, "network", "aws", limit=0)


def test_text_and_json_show_ranks_marks_and_what_is_labelled() -> None:
    fixture = _fixture(("private network", "aws", [VPC.id, "deaddeaddead"]))
    found = label_candidates(
        CHUNKS, "private network", "aws", fixture=fixture, hybrid_note="provider none"
    )
    lines = found.to_text().splitlines()
    assert lines[0] == "'private network' in aws: 2 candidate(s)"
    assert lines[1] == "note: hybrid answered lexically (provider none)"
    assert lines[3] == f"   1      1  {VPC.id}  aws/vpc.md § VPC  [labelled]"
    assert lines[4] == f"{'':14}A VPC is a private network."
    assert lines[-1] == f"already labelled: {VPC.id}, deaddeaddead"
    data = json.loads(found.to_json())
    assert data["labelled"] == [VPC.id, "deaddeaddead"]
    assert data["candidates"][0]["bm25_rank"] == 1


def test_labelled_ids_are_those_of_the_same_query_in_the_same_area() -> None:
    fixture = _fixture(("q", "aws", [VPC.id]), ("q", "python", [LISTS.id]))
    assert labelled_ids(fixture, "q", "python") == [LISTS.id]
    assert labelled_ids(fixture, "other", "aws") == [] and labelled_ids(None, "q", "aws") == []


def test_the_first_label_creates_the_fixture(tmp_path: Path) -> None:
    path = tmp_path / "eval.json"
    edited = edit_labels(path, "private network", "aws", CHUNKS, add=[VPC.id], when="T0")
    assert edited.created and edited.backup is None
    document = json.loads(path.read_text())
    assert document["$comment"][0].startswith("T0: started by `brain-pipeline fixture label`")
    (query,) = load_fixture(path).queries
    assert (query.query, query.area, query.relevant) == ("private network", "aws", (VPC.id,))


def test_labels_are_added_and_removed_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "eval.json"
    edit_labels(path, "private network", "aws", CHUNKS, add=[VPC.id], when="T0")
    first = path.read_bytes()
    edited = edit_labels(
        path, "private network", "aws", CHUNKS, add=[NAT.id], remove=[VPC.id], when="T1"
    )
    assert edited.backup == str(path) + ".bak" and Path(edited.backup).read_bytes() == first
    assert load_fixture(path).queries[0].relevant == (NAT.id,)
    again = edit_labels(path, "private network", "aws", CHUNKS, add=[NAT.id], when="T2")
    assert again.backup is None  # already labelled: the file is not rewritten


@pytest.mark.parametrize(
    ("add", "remove", "query", "message"),
    [
        ([], [], "q", "no ids to add or remove"),
        ([VPC.id], [], "  ", "the query is empty"),
        ([VPC.id], [VPC.id], "q", f"both added and removed: {VPC.id}"),
        ([LISTS.id], [], "q", f"not live chunk ids of area 'aws': {LISTS.id}"),
        (["deaddeaddead"], [], "q", "fixture find"),
    ],
)
def test_a_bad_edit_changes_nothing(
    tmp_path: Path, add: list[str], remove: list[str], query: str, message: str
) -> None:
    path = tmp_path / "eval.json"
    edit_labels(path, "q", "aws", CHUNKS, add=[NAT.id], when="T0")
    before = path.read_bytes()
    with pytest.raises(LabelError, match=message):
        edit_labels(path, query, "aws", CHUNKS, add=add, remove=remove, when="T1")
    assert path.read_bytes() == before and not (tmp_path / "eval.json.bak").exists()


def test_nothing_to_remove_from_a_fixture_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(LabelError, match="does not exist: there is nothing to remove"):
        edit_labels(tmp_path / "eval.json", "q", "aws", CHUNKS, remove=[VPC.id], when="T0")
    assert list(tmp_path.iterdir()) == []


def test_find_by_text_ignores_case_and_line_breaks() -> None:
    (found,) = find_by_text(CHUNKS, "SUBNETS   split\nthe vpc")
    assert (found.id, found.area, found.heading) == (VPC.id, "aws", "VPC")
    assert (
        found.excerpt
        == "A VPC is a private network. Subnets split the VPC. Route tables steer traffic."
    )
    assert [f.id for f in find_by_text(CHUNKS, "private")] == [VPC.id, NAT.id]
    assert find_by_text(CHUNKS, "private", area="python") == []
    assert len(find_by_text(CHUNKS, "a", limit=2)) == 2


def test_find_by_text_shows_the_piece_in_context() -> None:
    long = make_chunk(" ".join(f"word{n}" for n in range(100)) + " needle " + "tail " * 30)
    (found,) = find_by_text([long, long], "NEEDLE")  # one chunk, listed once
    assert found.excerpt.startswith("…") and found.excerpt.endswith("…")
    assert "needle" in found.excerpt and len(found.excerpt) <= 60 + 6 + 60 + 2


def test_find_by_text_refuses_empty_text_and_unknown_areas() -> None:
    with pytest.raises(LabelError, match="the text to find is empty"):
        find_by_text(CHUNKS, " \n ")
    with pytest.raises(LabelError, match="no area 'gcp'"):
        find_by_text(CHUNKS, "vpc", area="gcp")
