"""Known-item queries and their sample: made from the store, deterministic, cached by id."""

from __future__ import annotations

from collections.abc import Sequence

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.evaluation.known_items import id_order, learner_query, sample_area
from brain_pipeline.retrieval.hybrid import ListSource
from brain_pipeline_tests.evaluation.known_item_corpus import area_chunks, corpus, passage


def test_a_query_is_the_opening_retyped_lower_case_without_stopwords_or_markup() -> None:
    query = learner_query("## Multi-AZ deployments\n\nmore text.", lambda t: 1, 100)
    assert query == "multi az deployments"


def test_a_long_opening_keeps_the_six_rarest_words_in_reading_order() -> None:
    text = "Alpha bravo charlie delta echo foxtrot golf hotel india juliet."
    frequencies = {"alpha": 50, "bravo": 1, "charlie": 50, "delta": 2, "echo": 3,
                   "foxtrot": 50, "golf": 4, "hotel": 5, "india": 6, "juliet": 50}
    query = learner_query(text, lambda t: frequencies[t], 100)
    assert query == "bravo delta echo golf hotel india"


def test_a_chunk_with_no_distinctive_word_gets_no_query() -> None:
    common = learner_query("Click here for more information.", lambda t: 90, 100)
    assert common is None
    one_word = learner_query("## Summary", lambda t: 1, 100)
    assert one_word is None


def test_the_same_chunk_always_gets_the_same_query() -> None:
    text = passage("alpha", 3)
    assert learner_query(text, lambda t: 1, 10) == learner_query(text, lambda t: 1, 10)


class Reader:
    """Decodes chunks by id and counts what it was asked to read."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.by_id = {c.id: c for c in chunks}
        self.read: list[str] = []

    def __call__(self, ids: Sequence[str]) -> list[Chunk]:
        self.read.extend(ids)
        return [self.by_id[i] for i in ids]


def _sample(chunks: list[Chunk], cache: dict[str, str | None], size: int = 10) -> list[str]:
    source = ListSource(chunks)
    reader = Reader(chunks)
    index = source.bm25("alpha")
    sample = sample_area("alpha", [c.id for c in chunks], reader, index.document_frequency,
                         cache, size)
    return [item.target for item in sample.items]


def test_the_sample_is_stable_and_unchanged_chunks_keep_their_query_and_place() -> None:
    chunks = area_chunks("alpha")
    cache: dict[str, str | None] = {}
    first = _sample(chunks, cache)
    assert len(first) == 10
    queries = {i: cache[i] for i in first}
    # An edit elsewhere in the area: one chunk replaced by a new one.
    edited_text = passage("alpha", 999)
    victim = next(c for c in chunks if c.id not in first)
    edited = [
        Chunk(chunk_id(edited_text), edited_text, "alpha", c.source, c.heading)
        if c.id == victim.id else c
        for c in chunks
    ]
    second = _sample(edited, cache)
    kept = [i for i in first if i in second]
    assert len(kept) >= 9  # at most the new chunk takes one place
    assert all(cache[i] == queries[i] for i in kept)


def test_cached_queries_are_not_read_again() -> None:
    chunks = area_chunks("alpha")
    cache: dict[str, str | None] = {}
    _sample(chunks, cache)
    source = ListSource(chunks)
    reader = Reader(chunks)
    sample_area("alpha", [c.id for c in chunks], reader, source.bm25("alpha").document_frequency,
                cache, 10)
    assert len(reader.read) == 10  # only the picked chunks, for their file and text


def test_the_sample_follows_the_id_hash_order_and_the_configured_size() -> None:
    chunks = area_chunks("alpha")
    picked = _sample(chunks, {}, size=5)
    assert picked == id_order(c.id for c in chunks)[:5]


def test_a_tiny_area_and_an_area_with_nothing_distinctive_say_so_in_one_line() -> None:
    tiny = area_chunks("alpha", files=1, per_file=3)
    source = ListSource(tiny)
    sample = sample_area("alpha", [c.id for c in tiny], Reader(tiny),
                         source.bm25("alpha").document_frequency, {}, 10)
    assert len(sample.items) == 3
    assert sample.note == (
        "area alpha: only 3 of its 3 chunk(s) have distinctive words to ask about "
        "(sample_per_area is 10)"
    )
    dull_text = [f"The same words again and again, number {n} of many." for n in range(30)]
    dull = [Chunk(chunk_id(t), t, "dull", "dull/a.md") for t in dull_text]
    source = ListSource(dull)
    sample = sample_area("dull", [c.id for c in dull], Reader(dull),
                         source.bm25("dull").document_frequency, {}, 10)
    assert sample.items == ()
    assert sample.note is not None and "none of its 30 chunk(s) has distinctive words" in (
        sample.note
    )


def test_every_sampled_query_finds_its_passage_first_in_the_test_corpus() -> None:
    chunks = corpus()
    source = ListSource(chunks)
    for area in ("alpha", "beta"):
        ids = source.area_ids(area)
        sample = sample_area(area, ids, Reader(chunks), source.bm25(area).document_frequency,
                             {}, 8)
        for item in sample.items:
            assert source.bm25(area).search(item.query, 1)[0][0] == item.target
