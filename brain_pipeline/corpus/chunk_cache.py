"""Per-file chunk cache: a file is chunked again only when its bytes or the rules changed.

Chunking every file on every run cost as much as the first run. The cache holds, per
(sha256, kind, source, chunking code), what chunking that file produced: the
updated manifest fields (a roadmap can be reported or skipped), the chunk ids, and each
chunk's store fragment — the exact bytes `serialize_store` writes for it, from `{` to
`}` — so assembling the store is a de-duplication and a join, with no JSON work.

`source` is part of the key because chunks carry their area and source; a renamed or
moved file is therefore chunked again (only that file). Rows are immutable: a key's
row never changes, `gc_chunk_cache` deletes what the live snapshot no longer names.

One SQLite file (`chunks/cache.sqlite`): metadata and bodies in separate tables, so a
no-change run reads only the small metadata rows and never touches the fragments.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from brain_pipeline.corpus.discovery import (
    REASON_UNREADABLE,
    STATUS_SKIPPED,
    CorpusFile,
    ManifestEntry,
)
from brain_pipeline.corpus.file_chunks import FileOutcome, corpus_figures, ingest_file
from brain_pipeline.corpus.junk import IngestLimits
from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.damage import check_sqlite, healed

if TYPE_CHECKING:  # only its type: the snapshot's storage is no part of the chunking key
    from brain_pipeline.corpus.observation import CorpusSnapshot

CACHE_FILENAME = "cache.sqlite"
#: What `serialize_store` writes between two chunks' fragments.
FRAGMENT_SEPARATOR = b",\n  "
#: Between two ids in a cached file's id list (`str.split` is the fastest way back).
ID_SEPARATOR = "\n"
_BOUNDARY = b'\n  },\n  {\n    "id": '
BUSY_TIMEOUT_S = 120.0  # another process filling the cache holds the write lock meanwhile
_COMMIT_EVERY = 500  # files per transaction while filling the cache

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    version TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    detail TEXT,
    problem INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    UNIQUE (sha256, kind, source, version)
);
CREATE INDEX IF NOT EXISTS files_by_source ON files (source, version, id);
CREATE TABLE IF NOT EXISTS bodies (
    id INTEGER PRIMARY KEY,
    ids TEXT NOT NULL,
    ends BLOB NOT NULL,
    body BLOB NOT NULL
);
"""


class CorpusChangedError(RuntimeError):
    """A file's bytes differ from what the observation hashed: observe again.

    Chunking must record what the observation saw; mixing newer bytes into an older
    snapshot would publish a store no recorded digest describes.
    """

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(f"the corpus changed after it was observed: {source} ({detail})")
        self.source = source


class ChunkCacheMissError(LookupError):
    """Assembly found a file of the snapshot that was never chunked into the cache."""

    def __init__(self, source: str) -> None:
        super().__init__(
            f"no cached chunks for {source}: run chunk_snapshot on this snapshot first"
        )
        self.source = source


# --- the cache file -----------------------------------------------------------------------


@contextmanager
def open_cache(layout: StateLayout) -> Iterator[sqlite3.Connection]:
    """The cache database, created on first use.

    WAL with synchronous=NORMAL: a crash can lose the last transactions of a cache,
    never corrupt it, and a lost row only costs chunking that file again.
    """
    layout.chunks_dir.mkdir(parents=True, exist_ok=True)
    path = layout.chunks_dir / CACHE_FILENAME

    def connect() -> sqlite3.Connection:
        db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        try:
            check_sqlite(db, path)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
        except BaseException:
            db.close()
            raise
        return db

    rebuilt = "every file is chunked again (a cache miss)"
    with closing(healed(path, connect, what="chunk cache", consequence=rebuilt)) as db:
        yield db


class CachedFile(NamedTuple):
    """The metadata row of one cached file (its fragments live in `bodies`).

    A NamedTuple: 70,000 of them are made per run, twice as fast as a frozen dataclass.
    """

    row: int
    status: str
    reason: str | None
    detail: str | None
    problem: bool
    chunks: int


def load_rows(db: sqlite3.Connection, version: str) -> dict[tuple[str, str, str], CachedFile]:
    """(sha256, kind, source) -> metadata of every file cached under `version`."""
    cursor = db.execute(
        "SELECT sha256, kind, source, id, status, reason, detail, problem, chunks "
        "FROM files WHERE version = ?",
        (version,),
    )
    return {
        (sha, kind, source): CachedFile(row, status, reason, detail, bool(problem), n)
        for sha, kind, source, row, status, reason, detail, problem, n in cursor
    }


def last_cached(db: sqlite3.Connection, source: str, version: str) -> CachedFile | None:
    """The most recently cached version of `source` (for a file that became unreadable)."""
    found = db.execute(
        "SELECT id, status, reason, detail, problem, chunks FROM files "
        "WHERE source = ? AND version = ? AND status != ? ORDER BY id DESC LIMIT 1",
        (source, version, STATUS_SKIPPED),
    ).fetchone()
    if found is None:
        return None
    row, status, reason, detail, problem, n = found
    return CachedFile(row, status, reason, detail, bool(problem), n)


def fragments_of(chunks: Sequence[Chunk]) -> tuple[str, array[int], bytes]:
    """(ids joined by newlines, fragment end offsets, fragments joined as the store joins them).

    `serialize_store` of the file's chunks is the file's slice of the store between the
    leading `[\\n  ` and the trailing `\\n]`, so one call yields the body. Fragment
    boundaries are found by the `\\n  },\\n  {` pattern: a raw newline never occurs inside
    a JSON string and nested heading values are indented deeper, so it only matches
    between chunks (the assertion below holds the writer to that).
    """
    ids = ID_SEPARATOR.join(c.id for c in chunks)
    if not chunks:
        return ids, array("q"), b""
    body = serialize_store(chunks)[4:-2]
    ends = array("q")
    start = 0
    while (at := body.find(_BOUNDARY, start)) >= 0:
        ends.append(at + 4)
        start = at + 4 + len(FRAGMENT_SEPARATOR)
    ends.append(len(body))
    assert len(ends) == len(chunks), "a chunk boundary inside a chunk's fragment"
    return ids, ends, body


def _store(db: sqlite3.Connection, version: str, kind: str, outcome: FileOutcome) -> CachedFile:
    """Insert one chunked file (metadata and body) and return its metadata row.

    Another process may have cached the same key meanwhile (chunking is deterministic,
    so its row is as good as ours): the insert is then skipped and that row used.
    """
    entry = outcome.entry
    ids, ends, body = fragments_of(outcome.chunks)
    key = (version, entry.sha256, kind, entry.source)
    cursor = db.execute(
        "INSERT INTO files (version, sha256, kind, source, status, reason, detail, problem,"
        " chunks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (*key, entry.status, entry.reason, entry.detail, int(entry.problem), len(outcome.chunks)),
    )
    if cursor.rowcount == 1:
        row = int(cursor.lastrowid or 0)
        db.execute(
            "INSERT INTO bodies (id, ids, ends, body) VALUES (?, ?, ?, ?)",
            (row, ids, ends.tobytes(), body),
        )
    else:
        (row,) = db.execute(
            "SELECT id FROM files WHERE version = ? AND sha256 = ? AND kind = ? AND source = ?",
            key,
        ).fetchone()
    return CachedFile(
        row, entry.status, entry.reason, entry.detail, entry.problem, len(outcome.chunks)
    )


# --- chunking a snapshot ------------------------------------------------------------------


@dataclass
class ChunkingReport:
    """What chunking a snapshot did, with the figures the knowledge_chunks asset shows.

    `entries` is the snapshot's manifest updated by chunking (roadmap outcomes);
    `files_chunked` were read and chunked (cache misses), `files_reused` came from the
    cache; `occurrences` counts chunks before de-duplication. `kept_unreadable` lists
    files that could not be read at observation but still contribute their last cached
    chunks (also in `problems`).
    """

    digest: str
    entries: list[ManifestEntry]
    areas: list[str]
    files_seen: int = 0
    files_chunked: int = 0
    files_reused: int = 0
    occurrences: int = 0
    occurrences_per_area: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    kept_unreadable: list[str] = field(default_factory=list)


@functools.cache
def chunking_code(root: Path | None = None) -> str:
    """The digest of the code that decides what chunking yields for given bytes: this
    module (fragment serialisation) and all it imports (paragraph split, trim, headings,
    roadmap rules, junk limits' defaults). Part of every cache key, so an edit to any of
    it re-chunks each file once: a stale row is never served, and nothing is bumped by
    hand. Computed once per process. `root`: another copy of the package (tests)."""
    return code_digest(__name__, root=root)[:16]


def cache_version(variant: str = "") -> str:
    """The version column: `chunking_code()`, plus the chunking-shaping settings."""
    return f"{chunking_code()}:{variant}" if variant else chunking_code()


def corpus_file(snapshot: CorpusSnapshot, entry: ManifestEntry) -> CorpusFile:
    """The walk's description of a snapshot file, to read it again at chunking time."""
    path = os.path.join(snapshot.root, *entry.source.split("/"))
    return CorpusFile(
        entry.area, entry.source, path, entry.status, entry.size or 0, entry.mtime_ns or 0
    )


def _chunk_one(
    snapshot: CorpusSnapshot, entry: ManifestEntry, limits: IngestLimits
) -> FileOutcome:
    """Chunk one file, proving its bytes are the ones the observation hashed."""
    outcome = ingest_file(corpus_file(snapshot, entry), limits=limits)
    if outcome.entry.sha256 is None:
        raise CorpusChangedError(entry.source, f"cannot be read: {outcome.entry.detail}")
    if outcome.entry.sha256 != entry.sha256:
        raise CorpusChangedError(entry.source, "its content differs from the observed sha256")
    return outcome


def _is_unreadable(entry: ManifestEntry) -> bool:
    return entry.status == STATUS_SKIPPED and entry.reason == REASON_UNREADABLE


def chunk_snapshot(
    snapshot: CorpusSnapshot,
    layout: StateLayout,
    *,
    variant: str = "",
) -> ChunkingReport:
    """Make sure every file of the snapshot is in the chunk cache; report what it holds.

    Raises CorpusChangedError when a file no longer has the observed bytes. `variant`
    names the settings that shape chunking (`IngestLimits.cache_variant`): a file is
    chunked by `ingest_file` (the one per-file ingest the full path uses too) under the
    limits it names, so a row is never made with other limits than its key names.
    """
    version = cache_version(variant)
    limits = IngestLimits.of_variant(variant)
    report = ChunkingReport(snapshot.digest, [], list(snapshot.areas))
    per_area: Counter[str] = Counter()

    def count(entry: ManifestEntry, cached: CachedFile) -> None:
        report.occurrences += cached.chunks
        per_area[entry.area] += cached.chunks

    with open_cache(layout) as db:
        pending = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            for entry, cached in _serving_rows(db, snapshot, version):
                if entry.status == STATUS_SKIPPED:
                    report.entries.append(entry)
                    if _is_unreadable(entry):
                        report.files_seen += 1
                        if cached is not None:  # it did not change as we know
                            report.kept_unreadable.append(entry.source)
                            count(entry, cached)
                    continue
                report.files_seen += 1
                if cached is None:
                    outcome = _chunk_one(snapshot, entry, limits)
                    cached = _store(db, version, entry.status, outcome)
                    report.files_chunked += 1
                    pending += 1
                    if pending >= _COMMIT_EVERY:
                        db.execute("COMMIT")
                        db.execute("BEGIN IMMEDIATE")
                        pending = 0
                else:
                    report.files_reused += 1
                report.entries.append(
                    entry.with_outcome(cached.status, cached.reason, cached.detail, cached.problem)
                )
                count(entry, cached)
            db.execute("COMMIT")
        except BaseException:
            # SQLite may already have rolled back (a full disk does): a second ROLLBACK
            # would raise and hide the real cause.
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    # Problems, skip reasons and per-area figures, as `ingest_corpus` has them.
    report.problems, report.skipped_by_reason, report.occurrences_per_area = corpus_figures(
        report.entries, report.areas, per_area, set(report.kept_unreadable)
    )
    return report


# --- garbage collection -------------------------------------------------------------------


def _serving_rows(
    db: sqlite3.Connection, snapshot: CorpusSnapshot, version: str
) -> Iterator[tuple[ManifestEntry, CachedFile | None]]:
    """Each snapshot entry with the cache row serving it, in discovery order: by key for
    a hashed file, the last cached version for an unreadable one, None for other skipped
    files (or a key not cached). The one choice chunking, assembly and collection share."""
    known = load_rows(db, version)
    for entry in snapshot.entries:
        if _is_unreadable(entry):
            yield entry, last_cached(db, entry.source, version)
        elif entry.status == STATUS_SKIPPED:
            yield entry, None
        else:
            yield entry, known.get((str(entry.sha256), entry.status, entry.source))


def resolve_rows(
    db: sqlite3.Connection, snapshot: CorpusSnapshot, version: str
) -> list[tuple[ManifestEntry, CachedFile]]:
    """The cache row of every snapshot entry that contributes chunks, in discovery order
    (ChunkCacheMissError for a hashed file that was never chunked)."""
    plan: list[tuple[ManifestEntry, CachedFile]] = []
    for entry, cached in _serving_rows(db, snapshot, version):
        if cached is not None:
            plan.append((entry, cached))
        elif entry.status != STATUS_SKIPPED:
            raise ChunkCacheMissError(entry.source)
    return plan


def gc_chunk_cache(
    layout: StateLayout,
    live_snapshot: CorpusSnapshot,
    *,
    variant: str = "",
) -> int:
    """Drop every cache row the live snapshot does not use; return how many were dropped.

    Keeps the rows a chunking of `live_snapshot` would use (including the last cached
    version of a file that is unreadable now); everything else, rows of other chunking
    code included, goes. Freed pages are returned to the filesystem by VACUUM.
    """
    version = cache_version(variant)
    with open_cache(layout) as db:
        live = {c.row for _, c in _serving_rows(db, live_snapshot, version) if c is not None}
        dead = [(row,) for (row,) in db.execute("SELECT id FROM files") if row not in live]
        if not dead:
            return 0
        db.execute("BEGIN")
        db.executemany("DELETE FROM files WHERE id = ?", dead)
        db.executemany("DELETE FROM bodies WHERE id = ?", dead)
        db.execute("COMMIT")
        db.execute("VACUUM")
    return len(dead)
