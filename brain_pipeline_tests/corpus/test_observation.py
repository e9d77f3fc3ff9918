"""observe_corpus: the same walk as discover(), hashing only what may have changed."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.corpus.discovery import CorpusNotFoundError
from brain_pipeline.corpus.observation import (
    CorpusSnapshot,
    SnapshotNotFoundError,
    load_snapshot,
    observe_corpus,
    prune_snapshots,
)
from brain_pipeline.publishing.manifest import corpus_digest
from brain_pipeline.state.blobs import LocalBlobs
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.memory import Memory, memory_for_layout
from brain_pipeline_tests.corpus import settled
from brain_pipeline_tests.corpus.corpora import build_edge_corpus
from brain_pipeline_tests.corpus.manifests import discover
from brain_pipeline_tests.corpus.settled import NOW_NS, SETTLED_NS, Writer, put, settle
from brain_pipeline_tests.state.conftest import postgres_server  # noqa: F401

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
    rows = memory_for_layout(layout).ledger.query("SELECT source, row FROM corpus_files")
    assert [(json.loads(source), json.loads(row)[3]) for source, row in rows] == [
        ("a/one.md", NOW_NS)
    ]


def test_an_unreadable_index_row_costs_hashing_its_file_again(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("a/two.md", "The second file, long enough to be a chunk.")
    first = observe_corpus(corpus, layout, clock=now)
    memory = memory_for_layout(layout)
    memory.ledger.execute(
        "UPDATE corpus_files SET row = ? WHERE source = ?", ("{not json", '"a/one.md"')
    )
    again = observe_corpus(corpus, layout, clock=now)
    assert again.rehashed == ("a/one.md",)
    assert again.digest == first.digest
    assert observe_corpus(corpus, layout, clock=now).rehashed == ()  # the row written anew


def test_snapshots_are_stored_by_digest_and_pruned(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    first = observe_corpus(corpus, layout, clock=now)
    write("a/one.md", "The first file, edited to something else entirely.")
    second = observe_corpus(corpus, layout, clock=now)
    assert load_snapshot(layout, first.digest) == first
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


def test_the_index_and_snapshots_of_a_build_directory_from_before_the_ledger_are_read_in(
    corpus: Path, tmp_path: Path, write: Writer
) -> None:
    """`state/files.json` and `state/snapshots/` (as main wrote them before the ledger)
    are read in by the first observation: nothing is hashed again, every snapshot loads,
    and the old files are gone."""
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("b/two.md", "The second file, long enough to be a chunk.")
    fresh = StateLayout.of(tmp_path / "fresh")
    first = observe_corpus(corpus, fresh, clock=now)
    write("b/two.md", "The second file, edited, and longer than it was.")
    second = observe_corpus(corpus, fresh, clock=now)

    old = StateLayout.of(tmp_path / "old")
    old.snapshots_dir.mkdir(parents=True)
    rows = memory_for_layout(fresh).ledger.query("SELECT source, row FROM corpus_files")
    files = {json.loads(source): json.loads(row) for source, row in rows}
    body = {"format": 2, "written_ns": NOW_NS, "files": files}
    old.files_index.write_text(json.dumps(body), encoding="utf-8")
    for snapshot in (first, second):
        stored = json.loads(snapshot.to_json())
        stored["format"] = 1
        (old.snapshots_dir / f"{snapshot.digest}.json").write_text(json.dumps(stored))

    assert load_snapshot(old, first.digest) == first
    assert not old.files_index.exists() and not old.snapshots_dir.exists()
    again = observe_corpus(corpus, old, clock=now)
    assert again.rehashed == () and again.digest == second.digest


def test_a_damaged_snapshot_is_dropped_and_named(
    corpus: Path, layout: StateLayout, write: Writer, caplog: pytest.LogCaptureFixture
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    observed = observe_corpus(corpus, layout, clock=now)
    memory = memory_for_layout(layout)
    (blob,) = memory.ledger.query("SELECT blob FROM corpus_snapshots")[0]
    memory.blobs.delete(blob)
    memory.ledger.execute("UPDATE corpus_snapshots SET blob = ?", (memory.blobs.put_bytes(b"{}"),))
    with (
        caplog.at_level("WARNING", logger="brain_pipeline.damage"),
        pytest.raises(SnapshotNotFoundError),
    ):
        load_snapshot(layout, observed.digest)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "brain_pipeline.damage"]
    assert observed.digest in line and "observed again" in line
    assert observe_corpus(corpus, layout, clock=now).digest == observed.digest
    assert load_snapshot(layout, observed.digest).entries == observed.entries


@pytest.fixture(params=["sqlite", "postgresql"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Memory]:
    """Workers with their own build directories sharing one ledger and blob folder."""
    from brain_pipeline.state.ledger import sqlite_url
    from brain_pipeline_tests.state.conftest import postgres_url

    if request.param == "sqlite":
        url = sqlite_url(tmp_path / "shared" / "ledger.sqlite")
    else:
        server = request.getfixturevalue("postgres_server")
        url = postgres_url(server, server.create_database(f"observed_{next(_databases)}"))

    def worker(name: str) -> Memory:
        layout = StateLayout.of(tmp_path / name)
        return Memory(Ledger(url), LocalBlobs(tmp_path / "shared" / "blobs"), layout)

    return worker


_databases = itertools.count()


def test_a_worker_sharing_the_ledger_reads_what_another_observed(
    corpus: Path, write: Writer, shared: Callable[[str], Memory]
) -> None:
    """Worker B (an empty build directory) loads the snapshot worker A stored, and on
    the same corpus mount trusts A's hashes: nothing is read again."""
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("a/\udcff-odd-name.md", "A file name that is not UTF-8, long enough.")
    a, b = shared("a"), shared("b")
    observed = observe_corpus(corpus, a, clock=now)
    assert load_snapshot(b, observed.digest) == observed
    assert observe_corpus(corpus, b, clock=now).rehashed == ()
    assert prune_snapshots(b, set()) == [observed.digest]
    with pytest.raises(SnapshotNotFoundError):
        load_snapshot(a, observed.digest)
