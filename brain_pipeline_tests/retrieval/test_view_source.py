"""A Retriever's chunks straight from a store view: the same chunks, in the same order,
as the parsed store, found by id without parsing an area."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.retrieval import view_source
from brain_pipeline.retrieval.hybrid import Retriever
from brain_pipeline.retrieval.view_source import ViewSource
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.retrieval.random_store import QUERIES, random_chunks, write_store


def _chunk(text: str, area: str) -> Chunk:
    return Chunk(chunk_id(text), text, area, f"{area}/notes.md", "Notes")


SHARED = _chunk("the same paragraph twice", "a")
CHUNKS = [
    _chunk("apple banana", "a"),
    SHARED,
    _chunk("cherry data", "b"),
    _chunk("zeta box", "a"),
    Chunk(SHARED.id, SHARED.content, "a", "a/copy.md", "Copy"),  # undeduplicated store
    _chunk("matrices", "b"),
]


@pytest.fixture
def source(layout: StateLayout) -> ViewSource:
    layout.store_file.write_bytes(serialize_store(CHUNKS))
    return ViewSource(open_store_view(layout.store_file, layout), layout)


def test_areas_ids_and_chunks_in_store_order(source: ViewSource) -> None:
    assert source.areas() == ["a", "b"] and source.count() == 6
    for area in ("a", "b"):
        mine = [c for c in CHUNKS if c.area == area]
        assert list(source.area_chunks(area)) == mine
        assert source.area_ids(area) == [c.id for c in mine]
        assert source.area_id_array(area).tolist() == [c.id.encode() for c in mine]
    assert source.area_chunks_at("a", [3, 0]) == [CHUNKS[4], CHUNKS[0]]
    assert source.area_chunks_at("b", np.array([1])) == [CHUNKS[5]]


def test_a_chunk_by_id_is_the_first_of_its_area_holding_it(source: ViewSource) -> None:
    assert source.chunk("a", SHARED.id) == SHARED  # not the later copy
    assert source.chunk("b", CHUNKS[5].id) == CHUNKS[5]
    with pytest.raises(KeyError):
        source.chunk("b", SHARED.id)  # exists, but in another area
    with pytest.raises(KeyError):
        source.chunk("a", "feedfacecafe")


def test_chunks_with_ids_across_areas(source: ViewSource) -> None:
    assert source.with_ids({CHUNKS[5].id, CHUNKS[0].id, "feedfacecafe"}) == [CHUNKS[0], CHUNKS[5]]
    assert source.with_ids({SHARED.id}) == [SHARED, CHUNKS[4]]
    assert source.with_ids(set()) == []


def test_the_bm25_cache_lives_in_the_build_directory_only_with_a_layout(
    source: ViewSource, layout: StateLayout, tmp_path: Path
) -> None:
    assert source.cache_dir() == layout.bm25_dir
    store = tmp_path / "elsewhere.json"
    store.write_bytes(serialize_store(CHUNKS))
    assert ViewSource(open_store_view(store), None).cache_dir() is None


def test_retriever_over_the_view_answers_like_one_over_chunks(layout: StateLayout) -> None:
    chunks = random_chunks(random.Random(4), 200)
    write_store(layout, chunks)
    plain = Retriever(chunks)
    viewed = Retriever(ViewSource(open_store_view(layout.store_file, layout), layout))
    assert viewed.areas() == plain.areas()
    for area in plain.areas():
        for query in QUERIES:
            got = viewed.search(query, area, limit=7, mode="lexical")
            want = plain.search(query, area, limit=7, mode="lexical")
            assert [(h.chunk, h.score) for h in got.hits] == [(h.chunk, h.score) for h in want.hits]


@pytest.mark.parametrize("hexadecimal", [True, False])
def test_sorted_ids_find_the_first_position_of_an_id(hexadecimal: bool) -> None:
    """Chunk ids are searched as integers, other ids as bytes: the same answers."""
    rng = random.Random(5)
    pool = [chunk_id(str(k)) if hexadecimal else f"doc-{k}" for k in range(50)]
    ids = [rng.choice(pool) for _ in range(200)]  # with repeats
    finder = view_source._SortedIds(np.array([i.encode() for i in ids]))
    for wanted in pool:
        expected = ids.index(wanted) if wanted in ids else None
        assert finder.first(wanted.encode()) == expected
    for absent in (b"", b"zzzzzzzzzzzz", b"0" * 12, b"0" * 13, "é".encode()):
        assert absent.decode() not in ids
        assert finder.first(absent) is None
