"""Search through the store view and cached indexes answers exactly as over parsed chunks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.store import load_store, serialize_store
from brain_pipeline.embedding.store_file import read_embeddings
from brain_pipeline.evaluation.store_search import open_store
from brain_pipeline.retrieval.hybrid import Retriever
from brain_pipeline.retrieval.vectors import decode_embeddings, encode_embeddings, quantize
from brain_pipeline_tests.corpus.corpora import build_random_corpus
from brain_pipeline_tests.corpus.views import clear_views

DIM = 24
QUERIES = ["network roadmap", "the data", "heading text paragraph", "zzz", "role topic level"]


def _embed(query: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(query.encode()).digest()[:4], "little")
    return np.random.default_rng(seed).normal(size=DIM)


@pytest.fixture
def build(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    build_random_corpus(root, 11, files=80)
    chunks = ingest_corpus(root).chunks
    out = tmp_path / "build"
    out.mkdir()
    (out / "knowledge-store.json").write_bytes(serialize_store(chunks))
    vectors = quantize(np.random.default_rng(3).normal(size=(len(chunks), DIM)))
    keep = [i for i in range(len(chunks)) if i % 5]  # some chunks have no vector
    data = encode_embeddings("m", [chunks[i].id for i in keep], vectors[keep])
    (out / "embeddings.bin").write_bytes(data)
    clear_views()
    return out


def test_view_retriever_equals_the_parsed_one_in_every_mode(build: Path) -> None:
    chunks = load_store(build / "knowledge-store.json")
    decoded = decode_embeddings((build / "embeddings.bin").read_bytes())
    mapped = read_embeddings(build / "embeddings.bin", mapped=True)
    assert mapped is not None and mapped.ids == decoded.ids
    assert np.array_equal(mapped.vectors, decoded.vectors)
    assert not mapped.vectors.flags.owndata  # a view of the mapped file, not a copy
    plain = Retriever(chunks, decoded, _embed)
    for run in range(2):  # the second run loads every index from state/
        clear_views()
        opened = open_store(build, build_dir=build)
        viewed = Retriever(opened.source(), opened.embeddings, _embed)
        assert viewed.areas() == plain.areas()
        for area in plain.areas():
            for query in QUERIES:
                for mode in ("lexical", "hybrid", "dense"):
                    got = viewed.search(query, area, limit=6, mode=mode)
                    want = plain.search(query, area, limit=6, mode=mode)
                    assert [(h.chunk.id, h.chunk.source, h.score) for h in got.hits] == [
                        (h.chunk.id, h.chunk.source, h.score) for h in want.hits
                    ], (run, area, query, mode)
        if run == 0:
            assert list((build / "state" / "index").glob("area-*"))


def test_cli_answers_are_the_same_cold_and_warm(
    build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "corpus_config.yaml"
    config.write_text(f"build_dir: {build}\nembedding:\n  provider: none\n")
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    chunks = load_store(build / "knowledge-store.json")
    area = chunks[0].area
    query = " ".join(next(c for c in chunks if c.area == area).content.split()[:4])
    want = Retriever(chunks).search(query, area, limit=5, mode="lexical").hits
    assert want  # words of one of the area's chunks: the search has hits to compare
    outputs = []
    for _ in range(2):  # cold (indexes built and written), then warm (loaded)
        clear_views()
        assert main(["search", query, "--area", area, "--json", "--limit", "5"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    hits = json.loads(outputs[0])["hits"]
    assert [(h["id"], h["score"]) for h in hits] == [(h.chunk.id, h.score) for h in want]


def test_a_store_outside_the_build_directory_is_searched_without_writing(build: Path) -> None:
    before = sorted(p.name for p in build.iterdir())
    opened = open_store(build)  # not the build directory, and no state/ of its own
    assert opened.layout is None
    plain = Retriever(load_store(build / "knowledge-store.json"))
    for area in opened.view.areas:
        got = Retriever(opened.source()).search("role data", area, mode="lexical").hits
        want = plain.search("role data", area, mode="lexical").hits
        assert [(h.chunk, h.score) for h in got] == [(h.chunk, h.score) for h in want]
    assert sorted(p.name for p in build.iterdir()) == before
