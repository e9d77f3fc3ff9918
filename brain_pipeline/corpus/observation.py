"""Observe the corpus incrementally: a file-state index, and content-addressed snapshots.

Hashing every file on every run is what made a no-change re-ingest cost as much as a
full one. The index in the build directory remembers, per corpus-relative source, the
file's signature and sha256 last seen, so an observation re-reads only files changed
by the one rule of `utils.file_signature`. An mtime says nothing about edits made within
the same filesystem tick as the hash was taken, so a file whose mtime lies within
`MTIME_WINDOW_NS` of the moment its hash was taken is re-hashed until a later
observation sees it as settled.

An observation yields a `CorpusSnapshot`: the manifest of the walk (same order, same
skipped entries as the ingest's walk and screening) plus the corpus digest. It is stored
by digest, so chunking reads exactly the files the observation saw, and a Dagster
observation can name it by its data version.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
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
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_write_bytes, write_if_changed
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import sha256_hex, sha256_parts
from brain_pipeline.utils.file_signature import FileSignature

#: Re-hash a file whose mtime is this close to (or after) the start of the observation
#: that hashed it. 2 s covers the coarsest common granularity (FAT's 2 s; ext4/xfs/btrfs
#: are ns, HFS+ and many network filesystems 1 s).
MTIME_WINDOW_NS = 2_000_000_000

Clock = Callable[[], int]


class SnapshotNotFoundError(FileNotFoundError):
    """No snapshot is stored for a digest (pruned, or observed in another build dir)."""

    def __init__(self, layout: StateLayout, digest: str) -> None:
        path = snapshot_path(layout, digest)
        super().__init__(
            f"no corpus snapshot {digest} in {layout.snapshots_dir}: observe the corpus again "
            f"(it may have been pruned, or observed with another build directory)"
        )
        self.path = path
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
    return files_digest({e.source: e for e in entries if e.sha256 is not None})


# --- the file-state index ---------------------------------------------------------------

# One index row: [FileSignature.as_list(), sha256, kind, hashed_at_ns]
IndexRow = list[Any]


@functools.cache
def index_code(root: Path | None = None) -> str:
    """The index's format: the digest of the code that writes and trusts its rows (this
    module and what it imports, `utils.file_signature` among them). An index of other
    code is ignored, which costs one full hashing pass, never a trusted stale row.
    `root`: another copy of the package (tests)."""
    return code_digest(__name__, root=root)[:16]


def _load_index(path: Path) -> dict[str, IndexRow]:
    """The previous index, or empty when missing, unreadable or of other code.

    The index is only an optimisation: losing it costs one full hashing pass.
    """

    def load() -> dict[str, IndexRow]:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return {}
        body = json.loads(raw.decode("utf-8", "surrogateescape"))
        if not isinstance(body, dict) or body.get("format") != index_code():
            return {}
        files = body.get("files")
        if not isinstance(files, dict):
            raise ValueError("no file table")
        return files

    return healed(path, load, what="corpus file index", consequence="every file is hashed again")


def _save_index(path: Path, files: dict[str, IndexRow], written_ns: int) -> None:
    body = {"format": index_code(), "written_ns": written_ns, "files": files}
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    atomic_write_bytes(path, data.encode("utf-8", "surrogateescape"))


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
    layout: StateLayout,
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
    hashes only what changed.
    """
    started_ns = clock()
    previous = _load_index(layout.files_index)
    walk = walk_corpus(root)
    observer = _Observer(previous, started_ns, window_ns, limits=limits)
    entries = list(observer.entries(walk))
    if record and (observer.rehashed or observer.current.keys() != previous.keys()):
        _save_index(layout.files_index, observer.current, started_ns)
    snapshot = CorpusSnapshot(
        snapshot_digest(entries), str(root), list(walk.areas), entries, tuple(observer.rehashed)
    )
    if record:
        save_snapshot(layout, snapshot)
    return snapshot


# --- snapshots ----------------------------------------------------------------------------


def _file_sha256(entry: Any) -> str:
    """The sha256 of one corpus snapshot entry: an object, a mapping or a tuple."""
    if hasattr(entry, "sha256"):
        return str(entry.sha256)
    if isinstance(entry, Mapping):
        return str(entry["sha256"])
    return str(entry[2])  # (size, mtime_ns, sha256)


def files_digest(files: Mapping[str, Any]) -> str:
    """One hex digest for a corpus: relative paths and content hashes only.

    `files` maps relative path -> an entry with its sha256 (a `CorpusSnapshot`'s entries;
    a mapping with "sha256" or a (size, mtime_ns, sha256) tuple serves too). Sizes and
    mtimes are left out on purpose: a `touch` or a fresh checkout changes mtimes without
    changing what the store is built from, and must not make the live publication look
    stale.
    """
    by_path = {str(path).replace("\\", "/"): entry for path, entry in files.items()}

    def lines() -> Iterator[bytes]:
        for path in sorted(by_path):
            sha256 = _file_sha256(by_path[path]).encode("ascii")
            yield path.encode("utf-8", errors="surrogateescape") + b"\0" + sha256 + b"\n"

    return sha256_parts(lines())


def corpus_digest(
    corpus_root: Path, build_dir: Path | None = None, limits: Any = None
) -> str:
    """The corpus digest as the pipeline's observation computes it, read-only.

    One code path with the `corpus` asset (same walk, same junk rules, so a corpus with
    an oversized file is not "changed" for status alone), trusting the build directory's
    file index for files whose size and mtime are settled, and writing nothing.
    """
    layout = StateLayout.of(build_dir if build_dir is not None else corpus_root / ".no-build-dir")
    return observe_corpus(
        corpus_root, layout, limits=limits or DEFAULT_LIMITS, record=False
    ).digest


def snapshot_path(layout: StateLayout, digest: str) -> Path:
    return layout.snapshots_dir / f"{digest}.json"


#: The snapshot this process stored last, with the signature of the file it is in: the
#: chunking step of an in-process run reads what the observation step just wrote, and
#: parsing it again cost seconds at 70,000 files. Trusted only while the file is that
#: file (utils.file_signature's one rule); one entry, so memory stays bounded.
_last_stored: dict[Path, tuple[FileSignature, CorpusSnapshot]] = {}


def save_snapshot(layout: StateLayout, snapshot: CorpusSnapshot) -> bool:
    """Store the snapshot under its digest; True when the file was (re)written.

    Same digest means same hashed files, but skipped entries (a new ignored file, an
    unreadable one) or the root spelling can differ, so an existing file is replaced
    when its bytes differ: the stored snapshot is always the latest observation's.
    """
    path = snapshot_path(layout, snapshot.digest)
    written = write_if_changed(path, snapshot.to_json())
    signature = FileSignature.of(path)
    _last_stored.clear()
    if signature is not None:
        _last_stored[path] = (signature, replace(snapshot, rehashed=()))
    return written


def load_snapshot(layout: StateLayout, digest: str) -> CorpusSnapshot:
    """The snapshot an observation stored under `digest` (SnapshotNotFoundError if none).

    A damaged snapshot is set aside (named in one WARN line) and then missing: the
    caller observes the corpus again, which stores it anew while the corpus still has
    that digest.
    """
    path = snapshot_path(layout, digest)
    remembered = _last_stored.get(path)
    if remembered is not None and remembered[0].still_matches(path):
        return remembered[1]

    def load() -> CorpusSnapshot:
        snapshot = CorpusSnapshot.from_json(path.read_bytes())
        if snapshot.digest != digest:
            raise ValueError(f"holds the snapshot {snapshot.digest}")
        return snapshot

    try:
        return healed(
            path, load, what="corpus snapshot", consequence="the corpus is observed again"
        )
    except FileNotFoundError:
        raise SnapshotNotFoundError(layout, digest) from None


def prune_snapshots(layout: StateLayout, keep: set[str]) -> list[str]:
    """Delete stored snapshots whose digest is not in `keep`; return the digests removed.

    Snapshots are a few MB each at 70k files; one per corpus change would grow without
    bound, so the caller keeps the ones still named by live records (latest observation,
    published store) and drops the rest.
    """
    removed: list[str] = []
    try:
        names = os.listdir(layout.snapshots_dir)
    except FileNotFoundError:
        return removed
    for name in names:
        digest, dot, ext = name.partition(".")
        if ext != "json" or not dot or digest in keep:
            continue
        try:
            os.unlink(layout.snapshots_dir / name)
        except FileNotFoundError:
            continue
        removed.append(digest)
    return sorted(removed)
