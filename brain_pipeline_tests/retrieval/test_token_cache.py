"""Per-chunk term counts cached by chunk id: only new chunks are tokenised, and postings
assembled from the cache rank exactly like a fresh build."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.retrieval import token_cache
from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.retrieval.bm25_cache import BM25Cache
from brain_pipeline.retrieval.token_cache import TokenCache, tokens_code
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.code_copy import key_after_edit
from brain_pipeline_tests.corpus.views import clear_views
from brain_pipeline_tests.retrieval.random_store import (
    assert_ranks_like_a_fresh_build,
    random_chunks,
    write_store,
)


class Texts:
    """`texts_of` for `postings_for`, remembering which positions it was asked for."""

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks
        self.asked: list[list[int]] = []

    def __call__(self, positions: npt.NDArray[np.int64]) -> list[str]:
        self.asked.append([int(p) for p in positions])
        return [self.chunks[int(p)].content for p in positions]


def _ids(chunks: list[Chunk]) -> npt.NDArray[np.bytes_]:
    return np.array([c.id.encode() for c in chunks])


def _postings_index(cache: TokenCache, chunks: list[Chunk]) -> tuple[BM25Index, Texts]:
    texts = Texts(chunks)
    return BM25Index([cache.postings_for(_ids(chunks), texts)]), texts


def test_a_cold_cache_tokenises_everything_once_and_a_warm_one_nothing(tmp_path: Path) -> None:
    chunks = random_chunks(random.Random(1), 80)
    cold = TokenCache(tmp_path / "tokens")
    index, texts = _postings_index(cold, chunks)
    assert_ranks_like_a_fresh_build(index, chunks)
    assert texts.asked == [list(range(80))] and cold.tokenised == 80
    assert len(list((tmp_path / "tokens").glob("seg-*.npz"))) == 1

    warm = TokenCache(tmp_path / "tokens")  # another process, same directory
    index, texts = _postings_index(warm, list(reversed(chunks)))
    assert_ranks_like_a_fresh_build(index, list(reversed(chunks)))
    assert texts.asked == [] and warm.tokenised == 0


def test_only_ids_never_seen_are_tokenised(tmp_path: Path) -> None:
    old = random_chunks(random.Random(2), 60)
    TokenCache(tmp_path).postings_for(_ids(old), Texts(old))
    new = [c for c in random_chunks(random.Random(3), 30) if c.id not in {o.id for o in old}]
    mixed = old[::2] + new
    cache = TokenCache(tmp_path)
    index, texts = _postings_index(cache, mixed)
    assert_ranks_like_a_fresh_build(index, mixed)
    assert texts.asked == [list(range(len(old[::2]), len(mixed)))]
    assert cache.tokenised == len(new)


def test_a_repeated_id_is_tokenised_once_and_counted_for_each_document(tmp_path: Path) -> None:
    chunks = random_chunks(random.Random(4), 10)
    longest = max(range(10), key=lambda i: len(chunks[i].content))
    doubled = [*chunks, chunks[longest]]  # an undeduplicated store
    cache = TokenCache(tmp_path)
    texts = Texts(doubled)
    postings = cache.postings_for(_ids(doubled), texts)
    assert texts.asked == [list(range(10))] and len(postings) == 11
    assert postings.lengths[10] == postings.lengths[longest] > 0


def test_small_batches_make_several_segments_that_rank_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_cache, "_TOKENISE_BATCH", 7)
    chunks = random_chunks(random.Random(5), 30)
    cache = TokenCache(tmp_path)
    index, texts = _postings_index(cache, chunks)
    assert_ranks_like_a_fresh_build(index, chunks)
    assert [len(batch) for batch in texts.asked] == [7, 7, 7, 7, 2]
    assert len(list(tmp_path.glob("seg-*.npz"))) == 5


def test_an_unwritable_directory_still_gives_the_postings(tmp_path: Path) -> None:
    (tmp_path / "not-a-directory").write_text("x")
    chunks = random_chunks(random.Random(6), 20)
    cache = TokenCache(tmp_path / "not-a-directory" / "tokens")
    index, _ = _postings_index(cache, chunks)
    assert_ranks_like_a_fresh_build(index, chunks)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-directory"]


def test_a_damaged_segment_is_set_aside_and_its_chunks_tokenised_again(tmp_path: Path) -> None:
    chunks = random_chunks(random.Random(7), 25)
    TokenCache(tmp_path).postings_for(_ids(chunks), Texts(chunks))
    (segment,) = tmp_path.glob("seg-*.npz")
    segment.write_bytes(b"torn")
    cache = TokenCache(tmp_path)
    index, _ = _postings_index(cache, chunks)
    assert_ranks_like_a_fresh_build(index, chunks)
    assert cache.tokenised == 25
    assert (tmp_path / f"{segment.name}.damaged").read_bytes() == b"torn"


def test_segments_are_merged_and_dead_chunks_dropped(
    layout: StateLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_cache, "_MAX_SEGMENTS", 2)
    monkeypatch.setattr(token_cache, "_TOKENISE_BATCH", 7)  # several segments per area
    rng = random.Random(3)
    chunks = random_chunks(rng, 120)
    for step in range(5):
        more = random_chunks(random.Random(100 + step), 30)
        chunks = sorted(chunks[10:] + more, key=lambda c: c.area)
        write_store(layout, chunks)
        clear_views()
        cache = BM25Cache(open_store_view(layout.store_file, layout), layout)
        for area in ("a", "b", "c"):
            assert_ranks_like_a_fresh_build(
                cache.index(area), [c for c in chunks if c.area == area]
            )
    segments = list((layout.bm25_dir / f"tokens-{tokens_code()}").glob("seg-*.npz"))
    assert 1 <= len(segments) <= 3


def test_a_merge_keeps_only_live_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_cache, "_MAX_SEGMENTS", 1)
    first, second = random_chunks(random.Random(8), 20), random_chunks(random.Random(9), 20)
    TokenCache(tmp_path).postings_for(_ids(first), Texts(first))
    live = second + first[:5]
    TokenCache(tmp_path).postings_for(_ids(second), Texts(second), live=_ids(live))
    (merged,) = tmp_path.glob("seg-*.npz")
    with np.load(merged) as saved:
        assert sorted(saved["ids"].tolist()) == sorted(_ids(live).tolist())
    cache = TokenCache(tmp_path)
    index, texts = _postings_index(cache, first)
    assert_ranks_like_a_fresh_build(index, first)
    assert texts.asked == [list(range(5, 20))]  # the dropped ones come back as new


def test_a_segment_damaged_after_its_ids_were_read_is_tokenised_again(
    layout: StateLayout,
) -> None:
    chunks = random_chunks(random.Random(6), 120)
    write_store(layout, chunks)
    view = open_store_view(layout.store_file, layout)
    BM25Cache(view, layout).index("a")
    tokens = TokenCache(layout.bm25_dir / f"tokens-{tokens_code()}")
    tokens._load()  # ids only
    for segment in (layout.bm25_dir / f"tokens-{tokens_code()}").glob("seg-*.npz"):
        segment.write_bytes(b"PK\x03\x04 torn")  # replaced under us after the ids were read
    rows = view.rows_of_area("a")
    area = [c for c in chunks if c.area == "a"]
    postings = tokens.postings_for(
        view.id_array[rows], lambda pos: [area[int(i)].content for i in pos]
    )
    assert_ranks_like_a_fresh_build(BM25Index([postings]), area)
    assert tokens.tokenised == len(area)


@pytest.mark.parametrize(
    ("edited", "changes"),
    [("retrieval/text.py", True), ("retrieval/token_cache.py", True),
     ("retrieval/bm25_cache.py", False)],
)
def test_the_counts_are_keyed_by_the_code_that_counts(
    edited: str, changes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit to the tokeniser counts every chunk again (a new folder); one to the index
    layout alone tokenises nothing again."""
    real, before, after = key_after_edit(tokens_code, edited, tmp_path, monkeypatch)
    assert real == before
    assert (after != before) is changes
