"""StoreView must read exactly what `parse_store` reads, from the sidecar or without it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain_pipeline.corpus import store_reader
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.store import NO_HEADING, Chunk, parse_store, serialize_store
from brain_pipeline.corpus.store_reader import StoreView, open_store_view, sidecar_code
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.code_copy import key_after_edit
from brain_pipeline_tests.corpus.corpora import build_edge_corpus, build_random_corpus
from brain_pipeline_tests.corpus.views import clear_views

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "curated-content"


def _tokens(value: Any) -> list[tuple[str, Any]]:
    """A flat, typed rendering of a JSON value (iterative: headings nest very deeply)."""
    out: list[tuple[str, Any]] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            out.append(("list", len(item)))
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            out.append(("dict", list(item)))
            stack.extend(reversed(list(item.values())))
        else:
            out.append((type(item).__name__, item))
    return out


def _same(got: list[Chunk], expected: list[Chunk]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert (a.id, a.content, a.area, a.source) == (b.id, b.content, b.area, b.source)
        assert a.has_heading == b.has_heading
        assert _tokens(a.heading) == _tokens(b.heading)


def _check_view(view: StoreView, data: bytes) -> None:
    expected = parse_store(data)
    _same(view.all_chunks(), expected)
    assert view.ids == [c.id for c in expected]
    assert len(view) == len(expected)
    assert view.areas == sorted({c.area for c in expected})
    counts: dict[str, int] = {}
    for c in expected:
        counts[c.area] = counts.get(c.area, 0) + 1
    assert {a: n for a, n in view.count_per_area().items() if n} == counts
    for area in view.areas:
        _same(view.chunks_of_area(area), [c for c in expected if c.area == area])
    _same([view.chunk_at(i) for i in range(len(expected))], expected)
    rows = list(range(len(expected)))[::3]
    _same(view.chunks_at(rows), [expected[i] for i in rows])


def _store_dir(tmp_path: Path, data: bytes) -> StateLayout:
    build = tmp_path / "build"
    build.mkdir()
    layout = StateLayout.of(build)
    layout.store_file.write_bytes(data)
    return layout


def _both_ways(tmp_path: Path, data: bytes, *, fixed_layout: bool = True) -> None:
    """Fresh scan (saving the sidecar), then a 'new process' that loads the sidecar."""
    layout = _store_dir(tmp_path, data)
    clear_views()
    _check_view(open_store_view(layout.store_file, layout), data)
    saved = list(layout.store_index_dir.glob("v*"))
    assert bool(saved) == fixed_layout, "a sidecar is saved exactly for the fixed layout"
    clear_views()
    view = open_store_view(layout.store_file, layout)
    _check_view(view, data)
    import hashlib

    assert view.sha256 == hashlib.sha256(data).hexdigest()
    clear_views()
    _check_view(open_store_view(layout.store_file), data)  # no layout: in memory only


def test_edge_corpus(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    build_edge_corpus(root, tmp_path / "outside")
    data = serialize_store(ingest_corpus(root).chunks)
    assert b"\\ud" in data, "the edge corpus should exercise escaped lone surrogates"
    _both_ways(tmp_path, data)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_corpus(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "corpus"
    build_random_corpus(root, seed, files=60)
    _both_ways(tmp_path, serialize_store(ingest_corpus(root).chunks))


def test_sample_corpus(tmp_path: Path) -> None:
    _both_ways(tmp_path, serialize_store(ingest_corpus(EXAMPLES).chunks))


def test_odd_headings_and_areas(tmp_path: Path) -> None:
    chunks = [
        Chunk("aaaaaaaaaaaa", "text one is here", 'we"ird\\area', "s/a.md", NO_HEADING),
        Chunk("bbbbbbbbbbbb", "text two", 'we"ird\\area', "s/a.json", 12345678901234567890.0),
        Chunk("cccccccccccc", "x\ud800y", "b", "b/r.json", [1.5, {"k": [None, {}]}, []]),
        Chunk("dddddddddddd", "emoji \U0001f600 ok", "b", "b/x.md", {"2": 1.0, "a": "z"}),
        Chunk("eeeeeeeeeeee", "after", 'we"ird\\area', "s/c.md", "head\u2028ing"),
        Chunk("ffffffffffff", "long area", "a" * 100, "x/y", float("inf")),
    ]
    data = serialize_store(chunks)
    _both_ways(tmp_path, data)


def test_empty_and_foreign_layouts(tmp_path: Path) -> None:
    for name in ("empty", "compact", "odd"):
        (tmp_path / name).mkdir()
    _both_ways(tmp_path / "empty", b"[]")
    rows = [{"id": "abc", "content": "short id", "area": "a", "source": "a/x"}]
    _both_ways(tmp_path / "compact", json.dumps(rows).encode(), fixed_layout=False)
    odd_id = serialize_store([Chunk("abc", "short id", "a", "a/x")])
    _both_ways(tmp_path / "odd", odd_id, fixed_layout=False)


def test_a_replaced_store_is_reread(tmp_path: Path) -> None:
    one = serialize_store([Chunk("aaaaaaaaaaaa", "first text", "a", "a/1")])
    two = serialize_store([Chunk("bbbbbbbbbbbb", "second text", "b", "b/2")])
    layout = _store_dir(tmp_path, one)
    assert open_store_view(layout.store_file, layout).ids == ["aaaaaaaaaaaa"]
    tmp = layout.build_dir / "new.json"
    tmp.write_bytes(two)
    os.replace(tmp, layout.store_file)
    view = open_store_view(layout.store_file, layout)
    assert view.ids == ["bbbbbbbbbbbb"]
    assert view.areas == ["b"]
    assert np.array_equal(view.rows_of_area("a"), np.zeros(0))


def test_a_damaged_sidecar_is_rebuilt(tmp_path: Path) -> None:
    data = serialize_store([Chunk("aaaaaaaaaaaa", "first text", "a", "a/1")])
    layout = _store_dir(tmp_path, data)
    open_store_view(layout.store_file, layout)
    clear_views()
    for member, garbage in (("meta.json", b"garbage"), ("ids.npy", b"\x93NUMPY torn")):
        sidecars = [p for p in layout.store_index_dir.glob("v*") if p.suffix != ".damaged"]
        assert sidecars  # there is a sidecar to damage
        for sidecar in sidecars:
            (sidecar / member).write_bytes(garbage)
        clear_views()
        assert open_store_view(layout.store_file, layout).all_chunks() == parse_store(data)
        assert (sidecars[0].parent / f"{sidecars[0].name}.damaged" / member).read_bytes() == garbage


def test_a_sidecar_of_other_code_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sidecars are named by the digest of the code that scans and reads them: one of
    other code (an upgrade's `v2-*`, hand-bumped then) is ignored, the store scanned anew."""
    build_edge_corpus(tmp_path / "corpus", tmp_path / "outside")
    data = serialize_store(ingest_corpus(tmp_path / "corpus").chunks)
    layout = _store_dir(tmp_path, data)
    clear_views()
    open_store_view(layout.store_file, layout)
    (own,) = layout.store_index_dir.glob("v*")
    assert own.name.startswith(f"v{sidecar_code()}-")
    monkeypatch.setattr(store_reader, "sidecar_code", lambda: "2")
    clear_views()
    _check_view(open_store_view(layout.store_file, layout), data)
    names = sorted(p.name for p in layout.store_index_dir.glob("v*"))
    assert names == sorted([own.name, own.name.replace(f"v{sidecar_code()}-", "v2-")])


@pytest.mark.parametrize(
    ("edited", "changes"),
    [("corpus/store_scan.py", True), ("corpus/store_reader.py", True),
     ("corpus/chunking.py", False)],
)
def test_the_sidecar_name_follows_the_code_that_scans(
    edited: str, changes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, before, after = key_after_edit(sidecar_code, edited, tmp_path, monkeypatch)
    assert real == before
    assert (after != before) is changes


def test_id_keys_sort_like_the_ids_and_refuse_other_ids() -> None:
    import random

    from brain_pipeline.corpus.id_lookup import id_keys, lookup_sorted

    rng = random.Random(3)
    ids = sorted({"".join(rng.choice("0123456789abcdef") for _ in range(12)) for _ in range(500)})
    ids += ["000000000000", "ffffffffffff"]
    array = np.array(sorted(i.encode() for i in ids), dtype="S12")
    keys = id_keys(array)
    assert keys is not None and np.all(np.diff(keys.astype(np.float64)) >= 0)
    assert len(set(keys.tolist())) == len(array)
    for odd in (["ABCDEF012345"], ["abc"], ["zzzzzzzzzzzz"]):
        assert id_keys(np.array([o.encode() for o in odd])) is None
    needles = np.array([b"000000000000", b"123456789abc", array[7], b"zzzzzzzzzzzz"], dtype="S12")
    pos, hit = lookup_sorted(array, needles)
    assert hit.tolist() == [True, b"123456789abc" in set(array.tolist()), True, False]
    assert array[pos[2]] == array[7]


def _fresh_index(path: Path) -> Any:
    """The index a scan of the whole file gives (no sidecar to reuse)."""
    clear_views()
    return open_store_view(path)._index  # noqa: SLF001 - comparing internals on purpose


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_an_edited_store_reuses_the_unchanged_blocks_exactly(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edits anywhere (first, last, middle chunks; inserts, deletes, a moved area, a longer
    heading) give the sidecar a fresh scan gives, block digests included."""
    from brain_pipeline.corpus import store_reader, store_scan

    monkeypatch.setattr(store_scan, "BLOCK_ROWS", 7)  # many blocks on a small store
    scanned: list[int] = []
    scan = store_scan.scan_store

    def counting_scan(data: Any) -> Any:
        scanned.append(len(data))
        return scan(data)

    # Whole stores are scanned through the reader's name, the pieces between reused
    # blocks through the scan module's.
    monkeypatch.setattr(store_scan, "scan_store", counting_scan)
    monkeypatch.setattr(store_reader, "scan_store", counting_scan)
    root = tmp_path / "corpus"
    build_random_corpus(root, 40 + seed, files=60)
    chunks = ingest_corpus(root).chunks
    build = tmp_path / "build"
    build.mkdir()
    layout = StateLayout.of(build)
    rng = np.random.default_rng(seed)
    areas = sorted({c.area for c in chunks})
    partial = 0
    for step in range(12):
        if step:
            chunks = list(chunks)
            i = int(rng.integers(0, len(chunks)))
            kind = step % 6
            c = chunks[i]
            if kind == 0:
                del chunks[i : i + int(rng.integers(1, 12))]
            elif kind == 1:
                text = f"inserted paragraph {step} {seed}"
                chunks.insert(i, Chunk(f"{step:06d}{seed:06d}", text, c.area, c.source))
            elif kind == 2:
                chunks[i] = Chunk(c.id, c.content, areas[(areas.index(c.area) + 1) % len(areas)],
                                  c.source)
            elif kind == 3:
                chunks[i] = Chunk(c.id, c.content, c.area, c.source, "a much longer heading " * 3)
            elif kind == 4:
                chunks[0] = Chunk(chunks[0].id, chunks[0].content + " edited", chunks[0].area,
                                  chunks[0].source)
            else:
                chunks[-1] = Chunk(chunks[-1].id, chunks[-1].content + "!", "zz-new-area",
                                   chunks[-1].source)
        data = serialize_store(chunks)
        tmp = build / ".store.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, layout.store_file)
        clear_views()
        scanned.clear()
        view = open_store_view(layout.store_file, layout)
        partial += bool(scanned) and max(scanned) < len(data) / 2  # only a piece was scanned
        got = view._index  # noqa: SLF001
        want = _fresh_index(layout.store_file)
        for name in ("starts", "stops", "ids", "area_codes"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), (step, name)
        assert got.area_names == want.area_names
        # Blocks may be cut differently after a reuse: they must tile the rows, and each
        # digest must be that of its block's bytes.
        assert got.block_rows[0] == 0 and got.block_rows[-1] == len(chunks)
        assert np.all(np.diff(got.block_rows) > 0)
        begins, ends = store_scan._block_bounds(got, len(data))  # noqa: SLF001
        assert [hashlib.sha1(data[b:e]).digest() for b, e in zip(begins, ends, strict=True)] == (
            [bytes(row) for row in got.block_digests]
        ), step
        _check_view(view, data)
    assert partial >= 6  # most edits scanned only the blocks around them


def test_block_digests_keep_their_trailing_zero_bytes(tmp_path: Path) -> None:
    """A SHA-1 ending in zero bytes (one block in 256) must survive the sidecar intact."""
    from brain_pipeline.corpus import store_scan

    digests = [bytes(range(1, 21)), bytes(18) + b"\x07\x00", bytes(20)]
    saved = store_scan._digest_array(digests)  # noqa: SLF001
    np.save(tmp_path / "d.npy", saved, allow_pickle=False)
    assert [bytes(row) for row in np.load(tmp_path / "d.npy")] == digests
