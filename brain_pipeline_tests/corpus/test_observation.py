"""observe_corpus: the same walk as discover(), hashing only what may have changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from brain_pipeline.corpus.discovery import CorpusNotFoundError
from brain_pipeline.corpus.observation import (
    CorpusSnapshot,
    SnapshotNotFoundError,
    index_code,
    load_snapshot,
    observe_corpus,
    prune_snapshots,
    snapshot_path,
)
from brain_pipeline.publishing.manifest import corpus_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.code_copy import key_after_edit
from brain_pipeline_tests.corpus import settled
from brain_pipeline_tests.corpus.corpora import build_edge_corpus
from brain_pipeline_tests.corpus.manifests import discover
from brain_pipeline_tests.corpus.settled import NOW_NS, SETTLED_NS, Writer, put, settle

#: Files written with settled mtimes (see `settled`), overriding the corpus conftest's.
write = settled.write


def now() -> int:
    return NOW_NS


def test_snapshot_is_the_manifest_of_discover_and_its_digest(
    tmp_path: Path, layout: StateLayout
) -> None:
    root = tmp_path / "edge"
    build_edge_corpus(root, tmp_path / "outside")
    snapshot = observe_corpus(root, layout, clock=now)
    manifest = discover(root)
    assert snapshot.entries == manifest.entries
    assert snapshot.areas == manifest.areas
    assert snapshot.root == str(root)
    assert snapshot.digest == corpus_digest(root)
    assert load_snapshot(layout, snapshot.digest) == snapshot


def test_an_untouched_file_is_not_read_again(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("a/two.md", "The second file, long enough to be a chunk.")
    write("b/three.md", "The third file, long enough to be a chunk.")
    first = observe_corpus(corpus, layout, clock=now)
    assert sorted(first.rehashed) == ["a/one.md", "a/two.md", "b/three.md"]

    assert observe_corpus(corpus, layout, clock=now).rehashed == ()

    write("a/two.md", "The second file, edited, and longer than it was.")
    again = observe_corpus(corpus, layout, clock=now)
    assert again.rehashed == ("a/two.md",)
    assert again.digest != first.digest
    assert again.digest == corpus_digest(corpus)


def test_an_mtime_change_alone_rehashes_but_keeps_the_digest(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    path = write("a/one.md", "A file that is only touched, never edited.")
    first = observe_corpus(corpus, layout, clock=now)
    touched_ns = path.stat().st_mtime_ns + 10**9
    os.utime(path, ns=(touched_ns, touched_ns))
    touched = observe_corpus(corpus, layout, clock=now)
    assert touched.rehashed == ("a/one.md",)
    assert touched.digest == first.digest


def test_a_same_size_edit_within_the_mtime_tick_is_seen(corpus: Path, layout: StateLayout) -> None:
    tick = NOW_NS
    path = put(corpus / "a/one.md", "Version AAAA of a file of fixed size.", tick)
    one_second_later = tick + 10**9  # hashed in the same 1 s / 2 s filesystem tick
    first = observe_corpus(corpus, layout, clock=lambda: one_second_later)
    # Same size, same mtime: only the window around the hashing time can catch it.
    put(path, "Version BBBB of a file of fixed size.", tick)
    second = observe_corpus(corpus, layout, clock=lambda: one_second_later)
    assert second.rehashed == ("a/one.md",)
    assert second.digest != first.digest
    assert second.digest == corpus_digest(corpus)


def test_a_file_hashed_within_the_window_is_rehashed_until_it_settles(
    corpus: Path, layout: StateLayout
) -> None:
    tick = NOW_NS
    put(corpus / "a/one.md", "Version AAAA of a file of fixed size.", tick)
    observe_corpus(corpus, layout, clock=lambda: tick)  # hashed in the file's own tick
    later = tick + 60 * 10**9
    # A later observation must not trust that hash: an edit in the same tick after it
    # would have left size and mtime as they were.
    assert observe_corpus(corpus, layout, clock=lambda: later).rehashed == ("a/one.md",)
    assert observe_corpus(corpus, layout, clock=lambda: later).rehashed == ()


def test_a_same_size_replacement_with_a_restored_mtime_is_read(
    corpus: Path, layout: StateLayout
) -> None:
    """The one "unchanged" rule (`utils.file_signature`), not size+mtime alone: a file
    replaced by another of the same size with its mtime put back (as an editor's atomic
    save followed by `touch -d` leaves it) is a new inode, so it is hashed again."""
    path = put(corpus / "a/one.md", "Version AAAA of a file of fixed size.", SETTLED_NS)
    first = observe_corpus(corpus, layout, clock=now)
    replacement = put(corpus.parent / "one.md.new", "Version BBBB of a file of fixed size.")
    os.utime(replacement, ns=(SETTLED_NS, SETTLED_NS))
    os.replace(replacement, path)
    second = observe_corpus(corpus, layout, clock=now)
    assert second.rehashed == ("a/one.md",)
    assert second.digest != first.digest


def test_deleted_files_leave_the_index(corpus: Path, layout: StateLayout, write: Writer) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    gone = write("a/two.md", "The second file, long enough to be a chunk.")
    observe_corpus(corpus, layout, clock=now)
    gone.unlink()
    observe_corpus(corpus, layout, clock=now)
    index = json.loads(layout.files_index.read_bytes())
    assert sorted(index["files"]) == ["a/one.md"]
    assert index["written_ns"] == NOW_NS


def test_an_unreadable_index_costs_one_full_hash(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    first = observe_corpus(corpus, layout, clock=now)
    layout.files_index.write_bytes(b"{not json")
    again = observe_corpus(corpus, layout, clock=now)
    assert again.rehashed == ("a/one.md",)
    assert again.digest == first.digest


def test_an_index_of_other_code_costs_one_full_hash(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    """The index is keyed by the digest of the code that trusts its rows: one written
    by other code (an upgrade's `"format": 2`, hand-bumped then) is not trusted."""
    write("a/one.md", "The first file, long enough to be a chunk.")
    first = observe_corpus(corpus, layout, clock=now)
    body = json.loads(layout.files_index.read_bytes())
    assert body["format"] == index_code()
    layout.files_index.write_text(json.dumps({**body, "format": 2}))
    again = observe_corpus(corpus, layout, clock=now)
    assert again.rehashed == ("a/one.md",) and again.digest == first.digest
    assert observe_corpus(corpus, layout, clock=now).rehashed == ()


@pytest.mark.parametrize(
    ("edited", "changes"),
    [("corpus/observation.py", True), ("utils/file_signature.py", True),
     ("retrieval/bm25.py", False)],
)
def test_the_index_key_follows_the_code_that_trusts_it(
    edited: str, changes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, before, after = key_after_edit(index_code, edited, tmp_path, monkeypatch)
    assert real == before
    assert (after != before) is changes


def test_snapshots_are_stored_by_digest_and_pruned(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    first = observe_corpus(corpus, layout, clock=now)
    write("a/one.md", "The first file, edited to something else entirely.")
    second = observe_corpus(corpus, layout, clock=now)
    assert snapshot_path(layout, first.digest).exists()
    assert prune_snapshots(layout, {second.digest}) == [first.digest]
    assert load_snapshot(layout, second.digest) == second
    with pytest.raises(SnapshotNotFoundError, match=first.digest):
        load_snapshot(layout, first.digest)


def test_same_digest_with_other_skipped_entries_replaces_the_stored_snapshot(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    first = observe_corpus(corpus, layout, clock=now)
    write("a/picture.png", b"\x89PNG")
    second = observe_corpus(corpus, layout, clock=now)
    assert second.digest == first.digest
    assert load_snapshot(layout, first.digest).entries == second.entries


def test_snapshot_json_round_trips(tmp_path: Path, layout: StateLayout) -> None:
    root = tmp_path / "edge"
    build_edge_corpus(root, tmp_path / "outside")
    settle(root)
    snapshot = observe_corpus(root, layout, clock=now)
    assert CorpusSnapshot.from_json(snapshot.to_json()) == snapshot


def test_a_missing_corpus_is_refused_before_anything_is_written(
    tmp_path: Path, layout: StateLayout
) -> None:
    with pytest.raises(CorpusNotFoundError, match="missing"):
        observe_corpus(tmp_path / "missing", layout, clock=now)
    assert not layout.state_dir.exists()


def test_a_snapshot_is_checked_against_the_entry_layout(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    """No format number: a snapshot an older release wrote (with `"format": 1`) reads
    the same; rows that are not `ManifestEntry`'s fields are refused."""
    write("a/one.md", "The first file, long enough to be a chunk.")
    snapshot = observe_corpus(corpus, layout, clock=now)
    body = json.loads(snapshot.to_json())
    assert "format" not in body
    assert CorpusSnapshot.from_json(json.dumps({**body, "format": 1}).encode()) == snapshot
    wider = {**body, "entries": [[*row, "tomorrow"] for row in body["entries"]]}
    with pytest.raises(ValueError, match="entry layout"):
        CorpusSnapshot.from_json(json.dumps(wider).encode())
