"""Cached and assembled BM25 indexes must rank exactly like a fresh `BM25Index.build`."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.retrieval import bm25_cache as cache_module
from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.retrieval.bm25_cache import (
    BM25Cache,
    bm25_cache,
    index_layout,
    load_postings,
    save_postings,
)
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.code_copy import key_after_edit
from brain_pipeline_tests.corpus.views import clear_views
from brain_pipeline_tests.retrieval.random_store import (
    assert_ranks_like_a_fresh_build,
    random_chunks,
    write_store,
)


def test_saved_postings_load_and_rank_identically(tmp_path: Path) -> None:
    rng = random.Random(7)
    for trial in range(20):
        chunks = random_chunks(rng, rng.randint(0, 60))
        index = BM25Index.build([c.id for c in chunks], [c.content for c in chunks])
        target = tmp_path / f"idx{trial}"
        (postings,) = index.parts
        save_postings(target, postings)
        loaded = load_postings(target)
        assert loaded is not None
        assert_ranks_like_a_fresh_build(BM25Index([loaded]), chunks)


def test_postings_whose_arrays_do_not_fit_are_set_aside(tmp_path: Path) -> None:
    chunks = random_chunks(random.Random(18), 30)
    (postings,) = BM25Index.build([c.id for c in chunks], [c.content for c in chunks]).parts
    save_postings(tmp_path / "p", postings)
    np.save(tmp_path / "p" / "tf.npy", np.asarray(postings.tf)[:-1], allow_pickle=False)
    assert load_postings(tmp_path / "p") is None
    assert not (tmp_path / "p").exists() and (tmp_path / "p.damaged" / "tf.npy").is_file()


def test_area_indexes_are_assembled_cached_and_reloaded(layout: StateLayout) -> None:
    chunks = random_chunks(random.Random(1), 300)
    write_store(layout, chunks)
    view = open_store_view(layout.store_file, layout)
    cold = BM25Cache(view, layout)
    for area in view.areas:
        assert_ranks_like_a_fresh_build(cold.index(area), [c for c in chunks if c.area == area])
    assert [s.loaded for s in cold.stats] == [False] * len(view.areas)
    assert sum(s.tokenised for s in cold.stats) == len(chunks)

    clear_views()  # a new process: the sidecar and the area indexes come from disk
    view = open_store_view(layout.store_file, layout)
    warm = BM25Cache(view, layout)
    for area in view.areas:
        assert_ranks_like_a_fresh_build(warm.index(area), [c for c in chunks if c.area == area])
    assert all(s.loaded and s.tokenised == 0 for s in warm.stats)


def test_an_edit_tokenises_only_new_chunks(layout: StateLayout) -> None:
    rng = random.Random(2)
    chunks = random_chunks(rng, 400)
    write_store(layout, chunks)
    first = BM25Cache(open_store_view(layout.store_file, layout), layout)
    for area in ("a", "b", "c"):
        first.index(area)
    # One "file" of area b edited: two chunks replaced, one removed, one added.
    b_rows = [i for i, c in enumerate(chunks) if c.area == "b"]
    edited = list(chunks)
    for n, i in enumerate(b_rows[:2]):
        content = f"edited {n} apple zeta {edited[i].content}"
        edited[i] = Chunk(chunk_id(content), content, "b", edited[i].source)
    del edited[b_rows[3]]
    extra = "brand new apple apple chunk criteria"
    edited.insert(b_rows[5], Chunk(chunk_id(extra), extra, "b", "b/new.md"))
    write_store(layout, edited)
    clear_views()
    second = BM25Cache(open_store_view(layout.store_file, layout), layout)
    for area in ("a", "b", "c"):
        assert_ranks_like_a_fresh_build(second.index(area), [c for c in edited if c.area == area])
    by_area = {s.area: s for s in second.stats}
    assert by_area["a"].loaded and by_area["c"].loaded
    assert not by_area["b"].loaded
    assert by_area["b"].tokenised == 3  # not the whole area
    assert by_area["b"].reused == len([c for c in edited if c.area == "b"]) - 3


def test_without_a_layout_nothing_is_written(tmp_path: Path) -> None:
    chunks = random_chunks(random.Random(5), 50)
    store = tmp_path / "knowledge-store.json"
    store.write_bytes(serialize_store(chunks))
    view = open_store_view(store)
    cache = bm25_cache(view, None)
    assert_ranks_like_a_fresh_build(cache.index("a"), [c for c in chunks if c.area == "a"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["knowledge-store.json"]


def _replace_some(
    chunks: list[Chunk], area: str, count: int, tag: str, skip: int = 0
) -> list[Chunk]:
    """`count` chunks of `area` (after the first `skip`) replaced by new ones (an edit
    of one "file")."""
    rows = [i for i, c in enumerate(chunks) if c.area == area][skip : skip + count]
    edited = list(chunks)
    for n, i in enumerate(rows):
        content = f"{tag} {n} apple zeta {edited[i].content}"
        edited[i] = Chunk(chunk_id(content), content, area, edited[i].source)
    return edited


def _layers(layout: StateLayout, view_area_dir: Path) -> list[dict[str, object]]:
    meta = json.loads((view_area_dir / "meta.json").read_text(encoding="utf-8"))
    return list(meta["layers"])


def test_an_edited_area_reuses_its_postings_with_the_old_chunks_masked(
    layout: StateLayout,
) -> None:
    chunks = random_chunks(random.Random(8), 400)
    write_store(layout, chunks)
    BM25Cache(open_store_view(layout.store_file, layout), layout).index("b")
    postings_before = set(layout.bm25_dir.glob("postings-*"))
    edited = _replace_some(chunks, "b", 4, "edit")
    write_store(layout, edited)
    clear_views()
    cache = BM25Cache(open_store_view(layout.store_file, layout), layout)
    area_b = [c for c in edited if c.area == "b"]
    assert_ranks_like_a_fresh_build(cache.index("b"), area_b)
    (stats,) = cache.stats
    assert (stats.reused, stats.tokenised) == (len(area_b) - 4, 4)
    directory = cache.area_dir("b")
    assert directory is not None
    layers = _layers(layout, directory)
    assert len(layers) == 2 and layers[0]["live"] and layers[1]["live"] is None
    mask = np.load(directory / f"{layers[0]['live']}.npy")
    assert int(np.count_nonzero(~mask)) == 4  # the replaced chunks, masked out
    assert len(set(layout.bm25_dir.glob("postings-*")) - postings_before) == 1

    clear_views()  # another process reads the layers from disk
    again = BM25Cache(open_store_view(layout.store_file, layout), layout)
    assert_ranks_like_a_fresh_build(again.index("b"), area_b)
    assert again.stats[0].loaded


def _next_version(layout: StateLayout, chunks: list[Chunk], area: str) -> tuple[BM25Cache, Path]:
    """Write `chunks` as the store, index `area` in a new process (so to speak), check it
    ranks like a fresh build, and return the cache and the area version's directory."""
    write_store(layout, chunks)
    clear_views()
    cache = BM25Cache(open_store_view(layout.store_file, layout), layout)
    assert_ranks_like_a_fresh_build(cache.index(area), [c for c in chunks if c.area == area])
    directory = cache.area_dir(area)
    assert directory is not None
    return cache, directory


def test_layers_are_consolidated_and_a_large_change_rebuilds(layout: StateLayout) -> None:
    chunks = random_chunks(random.Random(9), 300)
    write_store(layout, chunks)
    BM25Cache(open_store_view(layout.store_file, layout), layout).index("a")
    counts = []
    for step in range(cache_module._MAX_LAYERS + 2):
        chunks = _replace_some(chunks, "a", 1 + step % 2, f"step{step}", skip=2 * step)
        _, directory = _next_version(layout, chunks, "a")
        counts.append(len(_layers(layout, directory)))
    # One more set of postings per edit, until the small ones are rebuilt as one.
    most = cache_module._MAX_LAYERS
    assert counts == [*range(2, most + 1), 2, 3, 4]

    area_a = [c for c in chunks if c.area == "a"]
    chunks = _replace_some(chunks, "a", len(area_a) // 2, "half")  # beyond _REUSE_AT_LEAST
    cache, directory = _next_version(layout, chunks, "a")
    assert len(_layers(layout, directory)) == 1 and cache.stats[0].reused == 0
    # The new set copies the counts of the chunks the old postings hold.
    assert cache.stats[0].tokenised == len(area_a) // 2


def test_a_chunk_that_returns_is_served_once(layout: StateLayout) -> None:
    """A chunk masked out of the base and later back must not count twice."""
    chunks = random_chunks(random.Random(10), 200)
    write_store(layout, chunks)
    BM25Cache(open_store_view(layout.store_file, layout), layout).index("c")
    _, directory = _next_version(layout, _replace_some(chunks, "c", 2, "gone"), "c")
    assert len(_layers(layout, directory)) == 2
    _, directory = _next_version(layout, chunks, "c")  # the two chunks are back
    # The base holds every chunk again, unmasked; the set of the replacements is dropped.
    assert [layer["live"] for layer in _layers(layout, directory)] == [None]


def test_pruning_drops_orphans_and_torn_writes_only_once_they_are_old(
    layout: StateLayout,
) -> None:
    """What a killed writer leaves (a temporary directory, postings no area refers to)
    is deleted once older than the grace period, and never while it may be in use."""
    chunks = random_chunks(random.Random(11), 120)
    write_store(layout, chunks)
    bm25_dir = layout.bm25_dir
    bm25_dir.mkdir(parents=True, exist_ok=True)
    hours_ago = time.time() - 2 * 3600
    old_tmp, new_tmp = bm25_dir / ".area-v1.2-x.abc", bm25_dir / ".postings-v1.2-y.def"
    old_orphan, new_orphan = bm25_dir / "postings-v1.2-old", bm25_dir / "postings-v1.2-new"
    for folder in (old_tmp, new_tmp, old_orphan, new_orphan):
        folder.mkdir()
        (folder / "ids.npy").write_bytes(b"torn")
    for folder in (old_tmp, old_orphan):
        os.utime(folder, (hours_ago, hours_ago))
    cache = BM25Cache(open_store_view(layout.store_file, layout), layout)
    assert_ranks_like_a_fresh_build(cache.index("a"), [c for c in chunks if c.area == "a"])
    left = {p.name for p in bm25_dir.iterdir()}
    assert old_tmp.name not in left and old_orphan.name not in left
    assert {new_tmp.name, new_orphan.name} <= left
    directory = cache.area_dir("a")
    assert directory is not None
    for layer in _layers(layout, directory):  # what the area refers to is kept
        assert str(layer["postings"]) in left


def test_token_counts_of_older_versions_go_once_they_are_old(layout: StateLayout) -> None:
    """The per-chunk token counts older versions kept (`tokens-*`; postings hold the
    counts now) are dropped after the grace period (another process may still use them)."""
    chunks = random_chunks(random.Random(12), 60)
    write_store(layout, chunks)
    bm25_dir = layout.bm25_dir
    old, recent = bm25_dir / "tokens-v1", bm25_dir / "tokens-0123456789ab"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "seg-x.npz").write_bytes(b"counts")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    BM25Cache(open_store_view(layout.store_file, layout), layout).index("a")
    left = {p.name for p in bm25_dir.iterdir()}
    assert old.name not in left and recent.name in left


def _fresh_cache(layout: StateLayout, chunks: list[Chunk]) -> BM25Cache:
    """`chunks` written as the store, and the BM25 cache of a new process over it."""
    write_store(layout, chunks)
    clear_views()
    return BM25Cache(open_store_view(layout.store_file, layout), layout)


def test_chunks_that_move_to_another_area_are_not_tokenised_again(layout: StateLayout) -> None:
    chunks = random_chunks(random.Random(13), 200)
    first = _fresh_cache(layout, chunks)
    for area in ("a", "b", "c"):
        first.index(area)
    moved = [Chunk(c.id, c.content, "d", c.source) if c.area == "a" and n % 2 else c
             for n, c in enumerate(chunks)]  # fmt: skip
    moved.sort(key=lambda c: c.area)
    cache = _fresh_cache(layout, moved)
    area_d = [c for c in moved if c.area == "d"]
    assert_ranks_like_a_fresh_build(cache.index("d"), area_d)
    assert (cache.stats[0].tokenised, cache.stats[0].reused) == (0, 0)


def test_a_repeated_id_is_tokenised_once_and_counted_for_each_document(
    layout: StateLayout,
) -> None:
    """An undeduplicated store: the copies are one text to tokenise (or to copy from the
    cached postings) and one document each."""
    chunks = [c for c in random_chunks(random.Random(14), 60) if c.area == "a"]
    doubled = sorted([*chunks, chunks[3], chunks[7], chunks[3]], key=lambda c: c.id)
    cache = _fresh_cache(layout, doubled)
    assert_ranks_like_a_fresh_build(cache.index("a"), doubled)
    assert cache.stats[0].tokenised == len(chunks)
    extra = Chunk(chunk_id("one more apple"), "one more apple", "a", "a/new.md")
    again = _fresh_cache(layout, [*doubled, extra])  # repeats: no layer is reused
    assert_ranks_like_a_fresh_build(again.index("a"), [*doubled, extra])
    assert (again.stats[0].tokenised, again.stats[0].reused) == (1, 0)


def test_texts_are_tokenised_in_batches_in_store_order(
    layout: StateLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "_TOKENISE_BATCH", 7)
    asked: list[list[str]] = []
    real = cache_module.term_ids_of

    def counting(texts: list[str]) -> object:
        asked.append(list(texts))
        return real(texts)

    monkeypatch.setattr(cache_module, "term_ids_of", counting)
    chunks = random_chunks(random.Random(15), 90)
    cache = _fresh_cache(layout, chunks)
    area_b = [c for c in chunks if c.area == "b"]
    assert_ranks_like_a_fresh_build(cache.index("b"), area_b)
    sizes = [len(batch) for batch in asked]
    assert sizes == [7] * (len(area_b) // 7) + ([len(area_b) % 7] if len(area_b) % 7 else [])
    assert [text for batch in asked for text in batch] == [c.content for c in area_b]


def test_an_unwritable_build_directory_still_gives_the_index(layout: StateLayout) -> None:
    chunks = random_chunks(random.Random(16), 40)
    layout.bm25_dir.parent.mkdir(parents=True, exist_ok=True)
    layout.bm25_dir.write_text("not a directory")
    cache = _fresh_cache(layout, chunks)
    assert_ranks_like_a_fresh_build(cache.index("a"), [c for c in chunks if c.area == "a"])
    assert layout.bm25_dir.read_text() == "not a directory"


def test_damaged_postings_are_set_aside_and_their_chunks_tokenised_again(
    layout: StateLayout,
) -> None:
    chunks = random_chunks(random.Random(17), 80)
    _fresh_cache(layout, chunks).index("c")
    (postings,) = layout.bm25_dir.glob("postings-*")
    (postings / "tf.npy").write_bytes(b"torn")
    cache = _fresh_cache(layout, chunks)
    area_c = [c for c in chunks if c.area == "c"]
    assert_ranks_like_a_fresh_build(cache.index("c"), area_c)
    assert cache.stats[0].tokenised == len(area_c)
    assert (postings.parent / f"{postings.name}.damaged" / "tf.npy").read_bytes() == b"torn"


@pytest.mark.parametrize(
    ("edited", "changes"),
    [("retrieval/bm25.py", True), ("retrieval/text.py", True),
     ("retrieval/bm25_cache.py", True), ("corpus/chunking.py", False)],
)
def test_the_index_layout_follows_the_code_that_writes_and_reads_it(
    edited: str, changes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Area and postings folders are named by the digest of the index code: an edit to
    BM25 or the tokeniser builds them again (nothing to bump), another edit does not."""
    real, before, after = key_after_edit(index_layout, edited, tmp_path, monkeypatch)
    assert real == before
    assert (after != before) is changes
