"""Observe the corpus incrementally: a file-state index, and content-addressed snapshots.

Hashing every file on every run is what made a no-change re-ingest cost as much as a
full one. The index remembers, per corpus-relative source, the file's signature and
sha256 last seen, so an observation re-reads only files changed by the one rule of
`utils.file_signature`. An mtime says nothing about edits made within
the same filesystem tick as the hash was taken, so a file whose mtime lies within
`MTIME_WINDOW_NS` of the moment its hash was taken is re-hashed until a later
observation sees it as settled.

An observation yields a `CorpusSnapshot`: the manifest of the walk (same order, same
skipped entries as the ingest's walk and screening) plus the corpus digest. It is stored
by digest, so chunking reads exactly the files the observation saw, and a Dagster
observation can name it by its data version.

Both live in the ledger (`state.ledger`, this area's tables) and the blobs: the index as
one row per file (`corpus_files`, written only for files hashed again or gone), each
snapshot as a blob named by `corpus_snapshots` (corpus digest -> blob). A worker sharing
them (a step process in an empty folder, a fresh worker on the same corpus mount) reads
the snapshot another observed and trusts the hashes whose signature still matches. A
build directory from before the ledger (`state/files.json`, `state/snapshots/`) is read
in by the first use (`_import_old_files`) and its files removed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from brain_pipeline.corpus.discovery import (
    STATUS_SKIPPED,
    CorpusFile,
    ManifestEntry,
    file_entry,
    screen_file,
    walk_corpus,
)
from brain_pipeline.corpus.junk import DEFAULT_LIMITS, IngestLimits
from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory, memory_for_layout
from brain_pipeline.utils.digest import sha256_hex, sha256_parts
from brain_pipeline.utils.file_signature import FileSignature

#: Re-hash a file whose mtime is this close to (or after) the start of the observation
#: that hashed it. 2 s covers the coarsest common granularity (FAT's 2 s; ext4/xfs/btrfs
#: are ns, HFS+ and many network filesystems 1 s).
MTIME_WINDOW_NS = 2_000_000_000

AREA = "corpus_observation"
DDL = """
CREATE TABLE IF NOT EXISTS corpus_files (source TEXT PRIMARY KEY, row TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS corpus_snapshots (digest TEXT PRIMARY KEY, blob TEXT NOT NULL)
"""
"""`source` is the path as JSON text (ASCII: a file name's undecodable bytes survive),
`row` the index row's JSON."""

log = logging.getLogger("brain_pipeline.damage")
Clock = Callable[[], int]
Where = Memory | StateLayout


class SnapshotNotFoundError(FileNotFoundError):
    """No snapshot is stored for a digest (pruned, damaged, or never observed here)."""

    def __init__(self, digest: str) -> None:
        super().__init__(
            f"no corpus snapshot {digest} in the ledger: observe the corpus again (it may "
            "have been pruned, or observed with another ledger)"
        )
        self.digest = digest


@dataclass(frozen=True)
class CorpusSnapshot:
    """What one observation saw: every walk entry in discovery order, and the digest.

    `digest` is `files_digest` over the hashed files (path and sha256 only), the
    value publish manifests record. `rehashed` names the files this observation had to
    read; it is not part of the stored snapshot (it describes the observation, not the
    corpus) and is empty for a loaded one.
    """

    digest: str
    root: str
    areas: list[str]
    entries: list[ManifestEntry]
    rehashed: tuple[str, ...] = field(default=(), compare=False)

    @property
    def files(self) -> list[ManifestEntry]:
        """Entries read as text or roadmap (skipped and unreadable ones left out)."""
        return [e for e in self.entries if e.status != STATUS_SKIPPED]

    def to_json(self) -> bytes:
        """The stored form: entries as positional rows, about half the size of objects."""
        rows = [_entry_row(e) for e in self.entries]
        body = {
            "digest": self.digest,
            "root": self.root,
            "areas": self.areas,
            "entries": rows,
        }
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogateescape"
        )

    @classmethod
    def from_json(cls, data: bytes) -> CorpusSnapshot:
        """The stored form read back; ValueError when its rows are not `ManifestEntry`'s
        fields (checked against the class itself: no format number to bump). A snapshot
        written with a `"format": 1` key reads the same."""
        body = json.loads(data.decode("utf-8", "surrogateescape"))
        width = len(dataclasses.fields(ManifestEntry))
        if not isinstance(body, dict) or any(
            not isinstance(row, list) or len(row) != width for row in body.get("entries", ())
        ):
            raise ValueError("not a corpus snapshot of this code's entry layout")
        entries = [ManifestEntry(*row) for row in body["entries"]]
        return cls(str(body["digest"]), str(body["root"]), list(body["areas"]), entries)


def _entry_row(e: ManifestEntry) -> list[Any]:
    return [e.area, e.source, e.status, e.reason, e.detail, e.problem, e.size, e.sha256, e.mtime_ns]


def snapshot_digest(entries: Iterable[ManifestEntry]) -> str:
    """The corpus digest over the hashed entries (what `_manifest_digest` gave before)."""
    return files_digest({e.source: e.sha256 for e in entries if e.sha256 is not None})


# --- the file-state index and the ledger --------------------------------------------------

# One index row: [FileSignature.as_list(), sha256, kind, hashed_at_ns]
IndexRow = list[Any]


def _ready(where: Where) -> Memory:
    """The memory with this area's tables, the build directory's old files read in."""
    memory = where if isinstance(where, Memory) else memory_for_layout(where)
    memory.ledger.ensure_tables(AREA, DDL)
    layout = memory.layout
    if layout.files_index.is_file() or layout.snapshots_dir.is_dir():
        _import_old_files(memory)
    return memory


def _import_old_files(memory: Memory) -> None:
    """Read the pre-ledger index (`files.json`) and snapshots (`snapshots/<digest>.json`)
    in, then remove them. An old index row replaces the ledger's for its file (each is a
    hash taken of it; the signature decides whether it is trusted), a snapshot the ledger
    has stays; a damaged old index only costs one hashing pass, and a damaged snapshot is
    found (and dropped) when it is loaded."""
    layout = memory.layout
    try:
        files = json.loads(layout.files_index.read_bytes().decode("utf-8", "surrogateescape"))
        rows = dict(files["files"])
    except (OSError, ValueError, KeyError, TypeError):
        rows = {}
    statement = memory.ledger.sql(
        "INSERT INTO corpus_snapshots VALUES (?, ?) ON CONFLICT (digest) DO NOTHING"
    )
    with memory.ledger.transaction() as cursor:
        _write_index(memory, cursor, rows, ())
        for path in sorted(layout.snapshots_dir.glob("*.json")):
            cursor.execute(statement, (path.stem, memory.blobs.put_bytes(path.read_bytes())))
    layout.files_index.unlink(missing_ok=True)
    shutil.rmtree(layout.snapshots_dir, ignore_errors=True)


def _load_index(memory: Memory) -> dict[str, IndexRow]:
    """source -> index row, as the ledger holds it; a row of another form (an index of
    the first layout kept size and mtime only) is left out: its file is hashed again."""
    rows = memory.ledger.query("SELECT source, row FROM corpus_files")
    return {json.loads(source): row for source, text in rows if (row := _index_row(text))}


def _index_row(text: str) -> IndexRow | None:
    try:
        row = json.loads(text)
    except ValueError:
        return None
    return row if isinstance(row, list) and len(row) == 4 and isinstance(row[3], int) else None


def _write_index(
    memory: Memory, cursor: Any, changed: Mapping[str, IndexRow], gone: Iterable[str]
) -> None:
    sql = memory.ledger.sql
    cursor.executemany(
        sql("INSERT INTO corpus_files VALUES (?, ?) ON CONFLICT (source) DO UPDATE SET "
            "row = excluded.row"),
        ((json.dumps(source), json.dumps(row)) for source, row in changed.items()),
    )  # fmt: skip
    cursor.executemany(
        sql("DELETE FROM corpus_files WHERE source = ?"), ((json.dumps(k),) for k in gone)
    )


def _settled(row: IndexRow, found: CorpusFile, window_ns: int) -> bool:
    """True when the recorded hash still describes the file without reading it.

    The file is unchanged by the one rule (`utils.file_signature`: size, mtime, inode and
    ctime as recorded), of the same kind, and its mtime was already `window_ns` old when
    that hash was taken, so no same-tick edit after the hash can hide behind the mtime.
    """
    return (
        FileSignature.from_list(row[0]) == found.signature
        and row[2] == found.kind
        and found.mtime_ns < row[3] - window_ns
    )


@dataclass
class _Observer:
    """One pass over the walk, reusing settled hashes and hashing the rest."""

    previous: dict[str, IndexRow]
    started_ns: int
    window_ns: int
    current: dict[str, IndexRow] = field(default_factory=dict)
    rehashed: list[str] = field(default_factory=list)
    limits: IngestLimits = DEFAULT_LIMITS

    def entries(self, walk: Iterable[CorpusFile | ManifestEntry]) -> Iterator[ManifestEntry]:
        for item in walk:
            if isinstance(item, ManifestEntry):
                yield item
            else:
                yield self._file(item)

    def _file(self, found: CorpusFile) -> ManifestEntry:
        row = self.previous.get(found.source)
        if row is not None and _settled(row, found, self.window_ns):
            self.current[found.source] = row
            return file_entry(found, row[1])
        # Junk (too large: never read; binary) is reported here as it is by discovery.
        data = screen_file(found, self.limits)
        if isinstance(data, ManifestEntry):
            return data
        digest = sha256_hex(data)
        self.rehashed.append(found.source)
        self.current[found.source] = [
            found.signature.as_list(),
            digest,
            found.kind,
            self.started_ns,
        ]
        return file_entry(found, digest)


def observe_corpus(
    root: Path,
    where: Where | None,
    *,
    clock: Clock = time.time_ns,
    window_ns: int = MTIME_WINDOW_NS,
    limits: IngestLimits = DEFAULT_LIMITS,
    record: bool = True,
) -> CorpusSnapshot:
    """Walk the corpus, hash only what may have changed, store and return the snapshot.

    `clock` is read once, before the walk: every hash of this observation is taken after
    that moment, so "mtime older than clock - window" proves the file was settled when
    hashed (it must be on the same time base as file mtimes; tests inject it).
    Raises CorpusNotFoundError when `root` is not a directory. `record=False` reads the
    index but writes nothing (no index, no snapshot): `status` stays read-only and still
    hashes only what changed; it opens no ledger a build directory does not have yet.
    `where=None`: no index at all (every file hashed), nothing recorded.
    """
    started_ns = clock()
    walk = walk_corpus(root)
    memory = None  # a read-only look at a build directory without a ledger opens none
    if where is not None and (record or isinstance(where, Memory) or where.ledger.exists()):
        memory = _ready(where)
    previous = _load_index(memory) if memory is not None else {}
    observer = _Observer(previous, started_ns, window_ns, limits=limits)
    entries = list(observer.entries(walk))
    snapshot = CorpusSnapshot(
        snapshot_digest(entries), str(root), list(walk.areas), entries, tuple(observer.rehashed)
    )
    if record and memory is not None:
        changed = {source: observer.current[source] for source in observer.rehashed}
        gone = previous.keys() - observer.current.keys()
        if changed or gone:
            with memory.ledger.transaction() as cursor:
                _write_index(memory, cursor, changed, gone)
        save_snapshot(memory, snapshot)
    return snapshot


# --- snapshots ----------------------------------------------------------------------------


def files_digest(files: Mapping[str, str]) -> str:
    """One hex digest for a corpus: relative paths and content hashes only.

    `files` maps each hashed file's corpus-relative path to its sha256. Sizes and mtimes
    are left out on purpose: a `touch` or a fresh checkout changes mtimes without
    changing what the store is built from, and must not make the live publication look
    stale.
    """

    def lines() -> Iterator[bytes]:
        for path in sorted(files):
            sha256 = files[path].encode("ascii")
            yield path.encode("utf-8", errors="surrogateescape") + b"\0" + sha256 + b"\n"

    return sha256_parts(lines())


def corpus_digest(corpus_root: Path, build_dir: Path | None = None, limits: Any = None) -> str:
    """The corpus digest as the pipeline's observation computes it, read-only.

    One code path with the `corpus` asset (same walk, same junk rules, so a corpus with
    an oversized file is not "changed" for status alone), trusting the build directory's
    file index for files whose size and mtime are settled, and writing nothing.
    """
    layout = StateLayout.of(build_dir) if build_dir is not None else None
    return observe_corpus(corpus_root, layout, limits=limits or DEFAULT_LIMITS, record=False).digest


#: The snapshot this process stored or read last, by the blob holding it: the chunking
#: step of an in-process run reads what the observation step just wrote, and parsing it
#: again cost seconds at 70,000 files. A blob is named by its bytes, so the entry is
#: right for as long as the ledger names that blob; one entry, so memory stays bounded.
_last_stored: dict[str, CorpusSnapshot] = {}


def _remember(blob: str, snapshot: CorpusSnapshot) -> None:
    _last_stored.clear()
    _last_stored[blob] = replace(snapshot, rehashed=())


def _stored_blob(memory: Memory, digest: str) -> str | None:
    rows = memory.ledger.query("SELECT blob FROM corpus_snapshots WHERE digest = ?", (digest,))
    return str(rows[0][0]) if rows else None


def save_snapshot(where: Where, snapshot: CorpusSnapshot) -> bool:
    """Store the snapshot under its digest; True when a new or other blob is named.

    Same digest means same hashed files, but skipped entries (a new ignored file, an
    unreadable one) or the root spelling can differ, so the stored snapshot is replaced
    when its bytes differ: it is always the latest observation's.
    """
    memory = _ready(where)
    data = snapshot.to_json()
    blob = sha256_hex(data)
    _remember(blob, snapshot)
    stored = _stored_blob(memory, snapshot.digest)
    if stored == blob:
        return False
    memory.blobs.put_bytes(data)
    memory.ledger.execute(
        "INSERT INTO corpus_snapshots VALUES (?, ?) ON CONFLICT (digest) "
        "DO UPDATE SET blob = excluded.blob",
        (snapshot.digest, blob),
    )
    if stored is not None:
        memory.blobs.delete(stored)  # it held this digest, so no other row names it
    return True


def load_snapshot(where: Where, digest: str) -> CorpusSnapshot:
    """The snapshot an observation stored under `digest` (SnapshotNotFoundError if none).

    A damaged or lost snapshot is dropped from the ledger (named in one WARN line) and
    then missing: the caller observes the corpus again, which stores it anew while the
    corpus still has that digest.
    """
    memory = _ready(where)
    blob = _stored_blob(memory, digest)
    if blob is None:
        raise SnapshotNotFoundError(digest)
    remembered = _last_stored.get(blob)
    if remembered is not None:
        return remembered
    try:
        snapshot = CorpusSnapshot.from_json(memory.blobs.get_bytes(blob))
        if snapshot.digest != digest:
            raise ValueError(f"holds the snapshot {snapshot.digest}")
    except (BlobError, ValueError, KeyError, TypeError) as exc:
        log.warning(
            f"damaged corpus snapshot {digest} (blob {blob}: {type(exc).__name__}: {exc}): "
            "dropped; the corpus is observed again"
        )
        memory.ledger.execute(
            "DELETE FROM corpus_snapshots WHERE digest = ? AND blob = ?", (digest, blob)
        )
        memory.blobs.delete(blob)  # else storing the same bytes again would keep these
        raise SnapshotNotFoundError(digest) from None
    _remember(blob, snapshot)
    return snapshot


def prune_snapshots(where: Where, keep: set[str]) -> list[str]:
    """Drop stored snapshots whose digest is not in `keep`; return the digests removed.

    Snapshots are a few MB each at 70k files; one per corpus change would grow without
    bound, so the caller keeps the ones still named by live records (latest observation,
    published store) and drops the rest, with their blobs.
    """
    memory = _ready(where)
    rows = memory.ledger.query("SELECT digest, blob FROM corpus_snapshots")
    removed = sorted((digest, blob) for digest, blob in rows if digest not in keep)
    for digest, blob in removed:
        memory.ledger.execute("DELETE FROM corpus_snapshots WHERE digest = ?", (digest,))
        memory.blobs.delete(blob)
    return [digest for digest, _ in removed]
