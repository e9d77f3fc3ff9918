"""The chunk history: what it records, what it returns, and that it reads only new texts."""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.corpus import chunk_history
from brain_pipeline.corpus.store import NO_HEADING, Chunk, serialize_store
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.evaluation.helpers import make_chunk
from brain_pipeline_tests.state.conftest import postgres_server, postgres_url  # noqa: F401

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _store() -> list[Chunk]:
    return [
        make_chunk("Security groups are stateful firewalls.", source="aws/sg.md", heading="SG"),
        make_chunk("NACLs are stateless and evaluated in order.", source="aws/sg.md"),
        make_chunk("Rule 30 is chaotic.", area="ca", source="ca/r30.md", heading=30),
    ]


def test_an_unknown_id_and_an_empty_history(layout: StateLayout) -> None:
    assert chunk_history.is_empty(layout)
    assert chunk_history.lookup(layout, "0123456789ab") is None
    chunk_history.record_store(layout, _store(), T0)
    assert not chunk_history.is_empty(layout)
    assert chunk_history.lookup(layout, "0123456789ab") is None


def test_text_provenance_and_times_are_kept(layout: StateLayout) -> None:
    first = _store()
    outcome = chunk_history.record_store(layout, first, T0)
    assert (outcome.chunks, outcome.new) == (3, 3)
    # Next build: the NACL paragraph was edited (new id), the SG file moved to area "net".
    edited = make_chunk("NACLs are stateless; rules are evaluated in order.", source="aws/sg.md")
    moved = Chunk(first[0].id, first[0].content, "net", "net/sg.md", "SG")
    outcome = chunk_history.record_store(layout, [moved, edited, first[2]], T0 + timedelta(days=1))
    assert (outcome.chunks, outcome.new) == (3, 1)

    gone = chunk_history.lookup(layout, first[1].id)
    assert gone is not None
    assert gone.text == first[1].content
    assert (gone.area, gone.source, gone.heading) == ("aws", "aws/sg.md", NO_HEADING)
    assert (gone.first_seen, gone.last_seen) == ("2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z")
    assert not gone.live_in_latest

    kept = chunk_history.lookup(layout, first[0].id)
    assert kept is not None and kept.live_in_latest
    assert kept.area == "net"  # the area follows a move
    assert kept.source == "aws/sg.md"  # source and heading: those of when it appeared
    assert (kept.first_seen, kept.last_seen) == ("2026-03-01T12:00:00Z", "2026-03-02T12:00:00Z")
    numeric = chunk_history.lookup(layout, first[2].id)
    assert numeric is not None and numeric.heading == 30 and numeric.heading_text == "30"


@dataclass
class _Lazy:
    """A chunk whose content may not be read: proves record_store reads only new texts."""

    id: str
    area: str
    source: str
    heading: Any
    text: str
    allowed: bool

    @property
    def content(self) -> str:
        if not self.allowed:
            raise AssertionError(f"content of the known id {self.id} was read")
        return self.text


def test_only_new_texts_are_read(layout: StateLayout) -> None:
    store = _store()
    chunk_history.record_store(layout, store, T0)
    fresh = make_chunk("Elastic IPs are static public addresses.", source="aws/ip.md")
    lazy = [_Lazy(c.id, c.area, c.source, c.heading, c.content, False) for c in store]
    lazy.append(_Lazy(fresh.id, fresh.area, fresh.source, fresh.heading, fresh.content, True))
    outcome = chunk_history.record_store(layout, lazy, T0 + timedelta(hours=1))
    assert outcome.new == 1
    entry = chunk_history.lookup(layout, fresh.id)
    assert entry is not None and entry.text == fresh.content


def test_recording_the_same_store_twice_adds_nothing(layout: StateLayout) -> None:
    chunk_history.record_store(layout, _store(), T0)
    size = chunk_history.stats(layout)
    outcome = chunk_history.record_store(layout, _store(), T0 + timedelta(hours=1))
    assert outcome.new == 0
    assert chunk_history.stats(layout)["ids"] == size["ids"] == 3
    assert chunk_history.stats(layout)["stores"] == 2


def test_seed_from_a_published_store(layout: StateLayout, tmp_path: Path) -> None:
    published = tmp_path / "agent" / "src" / "storage" / "knowledge-store.json"
    published.parent.mkdir(parents=True)
    published.write_bytes(serialize_store(_store()))
    assert chunk_history.seed_from_store(layout, tmp_path / "missing.json") is None
    outcome = chunk_history.seed_from_store(layout, published, when=T0)
    assert outcome is not None and outcome.new == 3
    entry = chunk_history.lookup(layout, _store()[1].id)
    assert entry is not None and entry.first_seen == "2026-03-01T12:00:00Z"


def test_naive_times_are_refused_and_a_foreign_file_is_set_aside(
    layout: StateLayout, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        chunk_history.record_store(layout, _store(), datetime(2026, 3, 1))
    target = chunk_history.history_file(layout)
    target.parent.mkdir(parents=True)
    foreign = b"not a database at all" * 100
    target.write_bytes(foreign)
    with caplog.at_level("WARNING", logger="brain_pipeline.damage"):
        assert chunk_history.lookup(layout, _store()[0].id) is None  # a new, empty history
    aside = target.with_name(target.name + ".damaged")
    assert aside.read_bytes() == foreign
    assert chunk_history.is_empty(layout)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "brain_pipeline.damage"]
    assert str(target) in line and "seeded from the live published store" in line


def test_recording_through_a_store_view_decodes_only_new_chunks(
    layout: StateLayout, tmp_path: Path
) -> None:
    from brain_pipeline.corpus.store_reader import open_store_view

    first = _store()
    store = tmp_path / "store-1.json"
    store.write_bytes(serialize_store(first))
    outcome = chunk_history.record_store_view(layout, open_store_view(store), T0)
    assert (outcome.chunks, outcome.new) == (3, 3)
    for chunk in first:  # exactly what record_store keeps for a new id
        entry = chunk_history.lookup(layout, chunk.id)
        assert entry is not None and entry.text == chunk.content
        assert (entry.area, entry.source, entry.heading) == (
            chunk.area,
            chunk.source,
            chunk.heading,
        )
    edited = make_chunk("NACLs are stateless; rules are evaluated in order.", source="aws/sg.md")
    second = tmp_path / "store-2.json"
    second.write_bytes(serialize_store([first[0], edited, first[2]]))
    later = T0 + timedelta(days=1)
    outcome = chunk_history.record_store_view(layout, open_store_view(second), later)
    assert (outcome.chunks, outcome.new) == (3, 1)
    kept = chunk_history.lookup(layout, first[0].id)
    gone = chunk_history.lookup(layout, first[1].id)
    assert kept is not None and kept.live_in_latest and kept.last_seen == "2026-03-02T12:00:00Z"
    assert gone is not None and not gone.live_in_latest and gone.text == first[1].content


def _all_entries(layout: StateLayout, ids: list[str]) -> dict[str, dict[str, Any]]:
    return {key: entry.to_dict() for key, entry in chunk_history.lookup_many(layout, ids).items()}


def _four_stores() -> list[list[Chunk]]:
    a, b, c = _store()
    d = make_chunk("Transit gateways join many VPCs.", source="aws/tgw.md")
    back = Chunk(b.id, b.content, "aws", "aws/nacl.md", "NACL")  # b returns, renamed
    return [[a, b, c], [a, c, d], [a, d], [back, a, d]]


def test_an_id_that_vanishes_and_returns(layout: StateLayout) -> None:
    stores = _four_stores()
    for day, store in enumerate(stores):
        chunk_history.record_store(layout, store, T0 + timedelta(days=day))
        if day == 1:
            gone = chunk_history.lookup(layout, stores[0][1].id)
            assert gone is not None and not gone.live_in_latest
            assert gone.last_seen == "2026-03-01T12:00:00Z"  # the last store that held it
    back = chunk_history.lookup(layout, stores[0][1].id)
    assert back is not None and back.live_in_latest
    assert (back.source, back.heading) == ("aws/nacl.md", "NACL")
    assert (back.first_seen, back.last_seen) == ("2026-03-01T12:00:00Z", "2026-03-04T12:00:00Z")
    dropped = chunk_history.lookup(layout, stores[0][2].id)
    assert dropped is not None and not dropped.live_in_latest
    assert dropped.last_seen == "2026-03-02T12:00:00Z"


@pytest.mark.parametrize("damage", ["deleted", "stale", "garbage"])
def test_a_lost_or_stale_live_set_file_changes_nothing(tmp_path: Path, damage: str) -> None:
    """The live-set file is a cache of `seen`: without it (a crash after the commit, a
    deleted or damaged file) every record and lookup is the same."""
    stores = _four_stores()
    ids = sorted({c.id for store in stores for c in store})
    intact, damaged = StateLayout.of(tmp_path / "a"), StateLayout.of(tmp_path / "b")
    older = b""
    for day, store in enumerate(stores):
        when = T0 + timedelta(days=day)
        chunk_history.record_store(intact, store, when)
        chunk_history.record_store(damaged, store, when)
        live_file = damaged.history_dir / chunk_history.LIVE_FILENAME
        current = live_file.read_bytes()
        if damage == "deleted":
            live_file.unlink()
        elif damage == "stale" and older:
            live_file.write_bytes(older)  # the previous store's: as if the write was lost
        elif damage == "garbage":
            live_file.write_bytes(b"PK\x03\x04 not a zip")
        older = current
        assert _all_entries(damaged, ids) == _all_entries(intact, ids)


def test_a_history_file_without_the_live_flag_is_read_into_the_ledger(
    layout: StateLayout,
) -> None:
    """The history file of the first release had no live flag: an id was live when its
    last_seen was the latest store's time. Read into the ledger, the file goes."""
    import sqlite3
    import zlib

    a, b, c = _store()
    path = chunk_history.history_file(layout)
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE texts (id TEXT PRIMARY KEY, text BLOB NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE seen (id TEXT PRIMARY KEY, area TEXT NOT NULL, source TEXT NOT NULL,"
        " heading TEXT, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE stores (seq INTEGER PRIMARY KEY AUTOINCREMENT, recorded_at TEXT"
        " NOT NULL, chunks INTEGER NOT NULL, new INTEGER NOT NULL);"
        "PRAGMA user_version=1;"
    )
    old, new = "2026-03-01T12:00:00Z", "2026-03-02T12:00:00Z"
    for chunk, last in ((a, new), (b, old), (c, new)):
        conn.execute(
            "INSERT INTO texts VALUES (?, ?)", (chunk.id, zlib.compress(chunk.content.encode()))
        )
        conn.execute(
            "INSERT INTO seen VALUES (?, ?, ?, ?, ?, ?)",
            (chunk.id, chunk.area, chunk.source, None, old, last),
        )
    conn.executemany(
        "INSERT INTO stores (recorded_at, chunks, new) VALUES (?, ?, ?)", [(old, 3, 3), (new, 2, 0)]
    )
    conn.commit()
    conn.close()

    entries = chunk_history.lookup_many(layout, [a.id, b.id, c.id])
    assert not path.exists()
    assert [entries[k].live_in_latest for k in (a.id, b.id, c.id)] == [True, False, True]
    assert entries[b.id].last_seen == old and entries[a.id].last_seen == new
    # The next store is diffed against the upgraded live flags: c vanishes, b returns.
    outcome = chunk_history.record_store(layout, [a, b], T0 + timedelta(days=2))
    assert outcome.new == 0
    after = chunk_history.lookup_many(layout, [a.id, b.id, c.id])
    assert after[b.id].live_in_latest and not after[c.id].live_in_latest
    assert after[c.id].last_seen == new


def test_a_full_disk_loses_no_recorded_store(tmp_path: Path) -> None:
    """A store that cannot be recorded (disk full) leaves the history as it was, and
    the next record, once there is room, diffs against the last store that made it."""
    from brain_pipeline_tests.mounts import small_tmpfs

    stores = _four_stores()
    ids = sorted({c.id for store in stores for c in store})
    reference = StateLayout.of(tmp_path / "reference")
    for day in (0, 1, 3):  # what the full-disk history must end up equal to
        chunk_history.record_store(reference, stores[day], T0 + timedelta(days=day))
    with small_tmpfs(tmp_path / "disk", "512k") as disk:
        layout = StateLayout.of(disk / "build")
        chunk_history.record_store(layout, stores[0], T0)
        chunk_history.record_store(layout, stores[1], T0 + timedelta(days=1))
        after_two = _all_entries(layout, ids)
        filler = disk / "filler"
        with contextlib.suppress(OSError), filler.open("wb", buffering=0) as handle:
            while True:
                handle.write(b"\0" * 4096)
        bulky = [make_chunk(f"{n} " + "filler text " * 400, source="big.md") for n in range(60)]
        with pytest.raises((OSError, sqlite3.Error)) as full:
            chunk_history.record_store(layout, stores[2] + bulky, T0 + timedelta(days=2))
        assert "full" in str(full.value) or "No space left" in str(full.value)
        assert _all_entries(layout, ids) == after_two
        filler.unlink()
        chunk_history.record_store(layout, stores[3], T0 + timedelta(days=3))
        assert _all_entries(layout, ids) == _all_entries(reference, ids)


def test_a_history_file_of_the_live_flag_layout_keeps_its_sidecar_valid(
    tmp_path: Path,
) -> None:
    """A pre-ledger build directory (its own history file with the live flag and the
    live-set sidecar) is read in once: every entry as before, the sidecar still trusted
    (its digest was copied with the stores), and the next record diffs against it."""
    import shutil

    stores = _four_stores()
    ids = sorted({c.id for store in stores for c in store})
    reference = StateLayout.of(tmp_path / "reference")
    for day in range(3):
        chunk_history.record_store(reference, stores[day], T0 + timedelta(days=day))
    before = _all_entries(reference, ids)
    old = StateLayout.of(tmp_path / "old")
    old.history_dir.mkdir(parents=True)
    _write_old_file(reference, chunk_history.history_file(old))
    shutil.copy(reference.history_dir / chunk_history.LIVE_FILENAME, old.history_dir)

    assert _all_entries(old, ids) == before
    assert not chunk_history.history_file(old).exists()
    assert chunk_history.stats(old)["stores"] == 3
    (old.history_dir / chunk_history.LIVE_FILENAME).write_bytes(b"stale")  # read `seen` now
    chunk_history.record_store(reference, stores[3], T0 + timedelta(days=3))
    chunk_history.record_store(old, stores[3], T0 + timedelta(days=3))
    assert _all_entries(old, ids) == _all_entries(reference, ids)


def _write_old_file(source: StateLayout, path: Path) -> None:
    """The history file the code before the ledger wrote (schema 2), from `source`'s rows."""
    from brain_pipeline.state.ledger import Ledger, sqlite_url

    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE texts (id TEXT PRIMARY KEY, text BLOB NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE seen (id TEXT PRIMARY KEY, area TEXT NOT NULL, source TEXT NOT NULL,"
        " heading TEXT, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL,"
        " live INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
        "CREATE TABLE stores (seq INTEGER PRIMARY KEY AUTOINCREMENT, recorded_at TEXT"
        " NOT NULL, chunks INTEGER NOT NULL, new INTEGER NOT NULL, live_digest TEXT);"
        "PRAGMA user_version=2;"
    )
    with Ledger(sqlite_url(source.ledger)) as ledger:
        for table, old in (("chunk_texts", "texts"), ("chunk_seen", "seen")):
            rows = ledger.query(f"SELECT * FROM {table}")
            marks = ", ".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO {old} VALUES ({marks})", rows)
        conn.executemany(
            "INSERT INTO stores (recorded_at, chunks, new, live_digest) VALUES (?, ?, ?, ?)",
            ledger.query("SELECT recorded_at, chunks, new, live_digest FROM chunk_stores "
                         "ORDER BY seq"),
        )  # fmt: skip
    conn.commit()
    conn.close()


def test_a_history_file_read_into_a_ledger_that_has_stores_adds_what_it_knew(
    tmp_path: Path,
) -> None:
    """Another worker recorded stores in the shared ledger first: the old file's texts
    and provenance are added (no longer live), the ledger's own live set is kept."""
    a, b, c = _store()
    old_history = StateLayout.of(tmp_path / "old")
    chunk_history.record_store(old_history, [a, b], T0)
    shared = StateLayout.of(tmp_path / "shared")
    chunk_history.record_store(shared, [a, c], T0 + timedelta(days=1))
    shared.history_dir.mkdir(parents=True, exist_ok=True)
    _write_old_file(old_history, chunk_history.history_file(shared))

    entries = chunk_history.lookup_many(shared, [a.id, b.id, c.id])
    assert entries[b.id].text == b.content and not entries[b.id].live_in_latest
    assert entries[a.id].live_in_latest and entries[c.id].live_in_latest
    assert entries[a.id].first_seen == "2026-03-02T12:00:00Z"  # the ledger's row wins
    assert chunk_history.stats(shared)["stores"] == 1


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger's URL outside every build directory, on each engine."""
    from brain_pipeline.state.ledger import sqlite_url

    if request.param == "sqlite":
        return sqlite_url(tmp_path / "shared" / "ledger.sqlite")
    server = request.getfixturevalue("postgres_server")
    return postgres_url(server, server.create_database(f"history_{next(_databases)}"))


_databases = itertools.count()


def test_two_build_directories_sharing_a_ledger_share_the_history(
    shared_ledger: str, tmp_path: Path
) -> None:
    """Worker B, with an empty build directory, explains what worker A recorded, and the
    store B records next is diffed against A's (no sidecar of its own), on both engines."""
    from brain_pipeline.state.blobs import LocalBlobs
    from brain_pipeline.state.ledger import Ledger
    from brain_pipeline.state.memory import Memory

    def worker(name: str) -> Memory:
        layout = StateLayout.of(tmp_path / name)
        return Memory(Ledger(shared_ledger), LocalBlobs(tmp_path / "blobs"), layout)

    stores = _four_stores()
    ids = sorted({c.id for store in stores for c in store})
    reference = StateLayout.of(tmp_path / "reference")
    a, b = worker("a"), worker("b")
    for day, store in enumerate(stores):
        expected = chunk_history.record_store(reference, store, T0 + timedelta(days=day))
        recorder = a if day % 2 == 0 else b
        assert chunk_history.record_store(recorder, store, T0 + timedelta(days=day)) == expected
        assert {k: e.to_dict() for k, e in chunk_history.lookup_many(b, ids).items()} == (
            _all_entries(reference, ids)
        )
    assert chunk_history.stats(a) == chunk_history.stats(b)
    assert chunk_history.stats(a)["stores"] == 4
